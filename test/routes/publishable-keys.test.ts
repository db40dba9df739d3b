import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent } from '../helpers/app.ts'
import { PUBLISHABLE_PER_MINUTE } from '../../src/routes/v1/scores.ts'

const app = await buildTestApp(t, { CORS_ORIGINS: 'https://dash.example' })
const PAGE = 'https://shop.example'

async function publishableKey () {
  const user = await newUser(app)
  const res = await app.inject({ method: 'POST', url: '/v1/me/keys', headers: user.auth, payload: { label: 'feedback widget', kind: 'publishable', allowedOrigins: [PAGE] } })
  if (res.statusCode !== 201) throw new Error(`${res.statusCode} ${res.body}`)
  return { user, key: res.json() as { id: string; secret: string; kind: string; allowedOrigins: string[] } }
}
const send = (secret: string, payload: unknown, origin: string | null = PAGE, url = '/v1/scores', ip = '203.0.113.7') =>
  app.inject({ method: 'POST', url, remoteAddress: ip, headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...(origin !== null ? { origin } : {}) }, payload: JSON.stringify(payload) })

t.test('a publishable key: created with its origins, shown once, listed with its kind', async (t) => {
  const { user, key } = await publishableKey()
  t.match(key, { kind: 'publishable', allowedOrigins: [PAGE], secret: /^vk_pk_/ })
  const listed = (await app.inject({ method: 'GET', url: '/v1/me/keys', headers: user.auth })).json().keys
  t.match(listed, [{ id: key.id, kind: 'publishable', allowedOrigins: [PAGE] }])
  t.notOk('secret' in listed[0])
  const noOrigins = await app.inject({ method: 'POST', url: '/v1/me/keys', headers: user.auth, payload: { label: 'x', kind: 'publishable' } })
  t.equal(noOrigins.statusCode, 400)
  t.same(noOrigins.json().details[0].path, ['allowedOrigins'])
  const secretWithOrigins = await app.inject({ method: 'POST', url: '/v1/me/keys', headers: user.auth, payload: { label: 'x', allowedOrigins: [PAGE] } })
  t.equal(secretWithOrigins.statusCode, 400)
  const badOrigin = await app.inject({ method: 'POST', url: '/v1/me/keys', headers: user.auth, payload: { label: 'x', kind: 'publishable', allowedOrigins: ['https://shop.example/path'] } })
  t.equal(badOrigin.statusCode, 400)
  const secret = await user.createKey()
  t.match((await app.inject({ method: 'GET', url: '/v1/me/keys', headers: user.auth })).json().keys.find((k: { id: string }) => k.id === secret.id), { kind: 'secret', allowedOrigins: null })
})

t.test('it sends human scores from its origins, with CORS headers; nothing else', async (t) => {
  const { user, key } = await publishableKey()
  const traceId = randomId('trace-')
  const preflight = await app.inject({ method: 'OPTIONS', url: '/v1/scores', headers: { origin: PAGE, 'access-control-request-method': 'POST' } })
  t.equal(preflight.statusCode, 204)
  t.equal(preflight.headers['access-control-allow-origin'], PAGE)
  t.match(preflight.headers['access-control-allow-headers'], /Authorization/)

  const thumbs = await send(key.secret, { traceId, name: 'thumbs', boolean: true, comment: 'great', source: 'human', scoreId: 'page-1' })
  t.equal(thumbs.statusCode, 202, thumbs.body)
  t.equal(thumbs.headers['access-control-allow-origin'], PAGE)
  t.equal(thumbs.json().scoreId, `pk:${key.id}:page-1`, 'its score ids are its own')

  t.match((await send(key.secret, { traceId, name: 'thumbs', boolean: true })).json(), { error: 'forbidden', reason: 'publishable_key_human_scores_only' }, 'source api (the default) is refused')
  t.equal((await send(key.secret, { traceId, name: 'thumbs', boolean: true, source: 'human' }, 'https://evil.example')).statusCode, 403, 'another origin')
  t.equal((await send(key.secret, { traceId, name: 'thumbs', boolean: true, source: 'human' }, null)).statusCode, 403, 'no origin')
  const batch = await send(key.secret, { scores: [{ traceId, name: 'thumbs', boolean: false, source: 'human' }, { traceId, name: 'q', value: 1, source: 'llm' }] }, PAGE, '/v1/scores/batch')
  t.same(batch.json().results.map((r: { status: number }) => r.status), [202, 403])

  const event = await sendEvent(app, key.secret, { agentId: 'x' })
  t.equal(event.statusCode, 403, 'never events')
  t.equal(event.json().reason, 'publishable_key')
  const otlp = await app.inject({ method: 'POST', url: '/v1/traces', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }, payload: '{}' })
  t.equal(otlp.statusCode, 403, 'never spans')

  // A secret key of the same user cannot be overwritten through the page's ids, and the other way round.
  const secret = await user.createKey()
  t.equal((await send(secret.secret, { traceId, name: 'thumbs', boolean: false, scoreId: 'page-1' }, null)).statusCode, 202)
  const scores = (await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}/scores`, headers: user.auth })).json().scores
  t.same(scores.map((s: { scoreId: string }) => s.scoreId).sort(), [`pk:${key.id}:page-1`, 'page-1', batch.json().results[0].scoreId].sort())
  t.match(scores.find((s: { scoreId: string }) => s.scoreId === `pk:${key.id}:page-1`), { boolean: true, source: 'human', comment: 'great' })
})

t.test('rate-limited per key and client address', async (t) => {
  const { key } = await publishableKey()
  const traceId = randomId('trace-')
  const score = { traceId, name: 'thumbs', boolean: true, source: 'human' }
  for (let i = 0; i < PUBLISHABLE_PER_MINUTE; i++) t.equal((await send(key.secret, score)).statusCode, 202)
  const limited = await send(key.secret, score)
  t.equal(limited.statusCode, 429)
  t.ok(Number(limited.headers['retry-after']) >= 1)
  t.equal((await send(key.secret, score, PAGE, '/v1/scores', '203.0.113.8')).statusCode, 202, 'another address has its own limit')
})
