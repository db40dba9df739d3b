import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent } from '../../helpers/app.ts'
import { PUBLISHABLE_PER_MINUTE } from '../../../src/routes/v1/scores.ts'
import { PUBLISHABLE_BATCH_MAX, PUBLISHABLE_SCORES_PER_MINUTE } from '../../../src/ingest/score-ingestion.ts'
import { PUBLISHABLE_COMMENT_MAX, PUBLISHABLE_METADATA_MAX_BYTES } from '../../../src/domain/score-row.ts'

const app = await buildTestApp(t, { CORS_ORIGINS: 'https://dash.example' })
const PAGE = 'https://shop.example'

async function publishableKey (opts: { burst?: number } = {}) {
  const user = await newUser(app, opts)
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
  t.equal(thumbs.headers['access-control-expose-headers'], 'Retry-After, Idempotent-Replayed', 'the page can read whether its retry was replayed')
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

t.test('a publishable key\'s batch holds at most PUBLISHABLE_BATCH_MAX scores', async (t) => {
  const { key } = await publishableKey()
  const score = { traceId: randomId('trace-'), name: 'thumbs', boolean: true, source: 'human' }
  const tooMany = await send(key.secret, { scores: Array.from({ length: PUBLISHABLE_BATCH_MAX + 1 }, () => score) }, PAGE, '/v1/scores/batch')
  t.equal(tooMany.statusCode, 400)
  t.same(tooMany.json().details?.[0]?.path, ['scores'])
  t.equal(tooMany.headers['access-control-allow-origin'], PAGE, 'the page can read why')
  const full = await send(key.secret, { scores: Array.from({ length: PUBLISHABLE_BATCH_MAX }, () => score) }, PAGE, '/v1/scores/batch')
  t.equal(full.statusCode, 207)
})

t.test('a publishable key spends a budget of its own, never the owner\'s scores burst', async (t) => {
  // The owner's scores bucket is smaller than the key's budget: were the key to draw from it, the owner would be starved.
  const { user, key } = await publishableKey({ burst: 50 })
  const traceId = randomId('trace-')
  const score = { traceId, name: 'thumbs', boolean: true, source: 'human' }
  // Batches until one meets the key's limit (the bucket refills as the test runs, so how many fit is a floor).
  let accepted = 0
  let limited = 0
  for (let i = 0; limited === 0 && i < 20; i++) {
    const res = await send(key.secret, { scores: Array.from({ length: PUBLISHABLE_BATCH_MAX }, () => score) }, PAGE, '/v1/scores/batch', `203.0.113.${100 + i}`)
    const statuses = res.json().results.map((r: { status: number }) => r.status)
    accepted += statuses.filter((s: number) => s === 202).length
    limited += statuses.filter((s: number) => s === 429).length
  }
  t.ok(limited > 0, 'the key\'s budget is spent')
  t.ok(accepted >= PUBLISHABLE_SCORES_PER_MINUTE, `the key's own budget: ${accepted} accepted`)
  const owner = await user.createKey()
  const own = await send(owner.secret, { scores: Array.from({ length: 40 }, () => ({ traceId, name: 'helpfulness', value: 1 })) }, null, '/v1/scores/batch')
  t.same(own.json().results.map((r: { status: number }) => r.status), Array(40).fill(202), 'the owner\'s evaluators still score')
})

t.test('a publishable key names no agent and sends short texts only', async (t) => {
  const { user, key } = await publishableKey()
  const traceId = randomId('trace-')
  const score = { traceId, name: 'thumbs', boolean: true, source: 'human' }
  const agentName = randomId('made-up-agent-')
  const named = await send(key.secret, { ...score, agentId: agentName })
  t.equal(named.statusCode, 400, named.body)
  t.same(named.json().details?.map((d: { path: string[] }) => d.path), [['agentId']])
  t.equal(named.headers['access-control-allow-origin'], PAGE)
  const agents = (await app.inject({ method: 'GET', url: '/v1/me/agents', headers: user.auth })).json().agents
  t.notOk(agents.some((a: { displayName: string }) => a.displayName === agentName), 'no agent was created')

  const inBatch = await send(key.secret, { scores: [score, { ...score, agentId: agentName }] }, PAGE, '/v1/scores/batch')
  t.same(inBatch.json().results.map((r: { status: number }) => r.status), [202, 400])
  t.same(inBatch.json().results[1].details[0].path, ['agentId'])

  const longComment = await send(key.secret, { ...score, comment: 'x'.repeat(PUBLISHABLE_COMMENT_MAX + 1) })
  t.equal(longComment.statusCode, 400)
  t.same(longComment.json().details?.[0]?.path, ['comment'])
  t.equal((await send(key.secret, { ...score, comment: 'é'.repeat(PUBLISHABLE_COMMENT_MAX) })).statusCode, 202, 'a comment of the most characters')
  const bigMetadata = await send(key.secret, { ...score, metadata: { text: 'x'.repeat(PUBLISHABLE_METADATA_MAX_BYTES) } })
  t.equal(bigMetadata.statusCode, 400)
  t.same(bigMetadata.json().details?.[0]?.path, ['metadata'])
  t.equal((await send(key.secret, { ...score, metadata: { page: '/checkout' } })).statusCode, 202)

  const owner = await user.createKey()
  t.equal((await send(owner.secret, { ...score, source: 'api', agentId: randomId('agent-'), comment: 'x'.repeat(PUBLISHABLE_COMMENT_MAX + 1) }, null)).statusCode, 202, 'a secret key may')
})

t.test('a publishable key\'s Idempotency-Keys and the owner\'s do not meet', async (t) => {
  const { user, key } = await publishableKey()
  const owner = await user.createKey()
  const traceId = randomId('trace-')
  const withKey = (secret: string, idem: string, payload: unknown, origin: string | null) =>
    app.inject({ method: 'POST', url: '/v1/scores', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': idem, ...(origin !== null ? { origin } : {}) }, payload: JSON.stringify(payload) })
  const same = { traceId, name: 'thumbs', boolean: true, source: 'human' }
  const shared = randomId('idem-')
  const page = await withKey(key.secret, shared, same, PAGE)
  const own = await withKey(owner.secret, shared, same, null)
  t.equal(page.statusCode, 202)
  t.equal(own.statusCode, 202)
  t.notOk(own.headers['idempotent-replayed'], 'the owner\'s request is not answered with the page\'s')
  t.not(own.json().id, page.json().id)

  // The page takes a key first: the owner's request with it still runs, and the other way round.
  const preClaimed = randomId('idem-')
  t.equal((await withKey(key.secret, preClaimed, { ...same, boolean: false }, PAGE)).statusCode, 202)
  const ownAfter = await withKey(owner.secret, preClaimed, { traceId, name: 'helpfulness', value: 0.5 }, null)
  t.equal(ownAfter.statusCode, 202, ownAfter.body)
  t.notOk(ownAfter.headers['idempotent-replayed'])
  const ownFirst = randomId('idem-')
  t.equal((await withKey(owner.secret, ownFirst, { traceId, name: 'helpfulness', value: 0.9 }, null)).statusCode, 202)
  const pageAfter = await withKey(key.secret, ownFirst, { ...same, comment: 'nice' }, PAGE)
  t.equal(pageAfter.statusCode, 202, pageAfter.body)

  const retried = await withKey(key.secret, shared, same, PAGE)
  t.equal(retried.headers['idempotent-replayed'], 'true', 'the page\'s own retry is replayed')
  t.equal(retried.json().id, page.json().id)

  const scores = (await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}/scores`, headers: user.auth })).json().scores
  t.equal(scores.length, 6, 'each request stored its score')
})

t.test('allowedOrigins are stored as browsers send them, or refused', async (t) => {
  const user = await newUser(app)
  const create = (allowedOrigins: string[]) => app.inject({ method: 'POST', url: '/v1/me/keys', headers: user.auth, payload: { label: 'widget', kind: 'publishable', allowedOrigins } })
  const created = await create(['https://Shop.Example.COM', 'https://x.example:443', 'http://y.example:80', 'http://y.example', 'https://z.example:8443'])
  t.equal(created.statusCode, 201, created.body)
  t.same(created.json().allowedOrigins, ['https://shop.example.com', 'https://x.example', 'http://y.example', 'https://z.example:8443'])
  const secret = created.json().secret
  t.equal((await send(secret, { traceId: randomId('trace-'), name: 'thumbs', boolean: true, source: 'human' }, 'https://shop.example.com')).statusCode, 202, 'the page\'s Origin as a browser sends it')
  t.equal((await send(secret, { traceId: randomId('trace-'), name: 'thumbs', boolean: true, source: 'human' }, 'https://x.example')).statusCode, 202)

  for (const origin of ['https://x.example:0', 'https://x.example:99999', 'https://x.example:080']) {
    const refused = await create([PAGE, origin])
    t.equal(refused.statusCode, 400, origin)
    t.same(refused.json().details?.[0]?.path, ['allowedOrigins', 1], origin)
    t.match(refused.json().details?.[0]?.message, /port/, origin)
  }
})

t.test('a page reads the refusals of its own origin, not another origin\'s', async (t) => {
  const { key } = await publishableKey()
  const wrongType = await app.inject({ method: 'POST', url: '/v1/scores', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'text/plain', origin: PAGE }, payload: 'thumbs up' })
  t.equal(wrongType.statusCode, 415)
  t.equal(wrongType.headers['access-control-allow-origin'], PAGE)
  const badJson = await app.inject({ method: 'POST', url: '/v1/scores', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json', origin: PAGE }, payload: '{"name":' })
  t.equal(badJson.statusCode, 400)
  t.equal(badJson.headers['access-control-allow-origin'], PAGE)
  const elsewhere = await app.inject({ method: 'POST', url: '/v1/scores', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'text/plain', origin: 'https://evil.example' }, payload: 'x' })
  t.equal(elsewhere.statusCode, 403)
  t.equal(elsewhere.headers['access-control-allow-origin'], undefined, 'no CORS headers for another origin')
})

t.test('a publishable key\'s scoreId leaves room for its prefix: what is stored stays within the owner\'s 200 characters', async (t) => {
  const { key } = await publishableKey()
  const traceId = randomId('trace-')
  const longest = await send(key.secret, { traceId, name: 'thumbs', boolean: true, source: 'human', scoreId: 'x'.repeat(171) })
  t.equal(longest.statusCode, 202, longest.body)
  t.ok(longest.json().scoreId.length <= 200, `stored as ${longest.json().scoreId.length} characters`)
  const over = await send(key.secret, { traceId, name: 'thumbs', boolean: true, source: 'human', scoreId: 'x'.repeat(172) })
  t.equal(over.statusCode, 400)
  t.match(over.json().details, [{ path: ['scoreId'], message: /at most 171 characters with a publishable key/ }])
})
