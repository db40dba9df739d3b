import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, newUser, randomId, sendEvent, shipped } from '../../helpers/app.ts'
import { MAX_DEPTH } from '../../../src/domain/input-rules.ts'

const app = await buildTestApp(t)

/** POSTs a body exactly as written (number literals that JSON.stringify could not produce). */
function postRaw (app: FastifyInstance, secret: string, url: string, body: string) {
  return app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, payload: body })
}

function deep (levels: number): string {
  let text = '1'
  for (let i = 0; i < levels; i++) text = `{"m":${text}}`
  return text
}

async function setup () {
  const user = await newUser(app)
  const key = await user.createKey()
  return { user, key, agentId: randomId('agent-') }
}

const LONE = 'must be valid Unicode text (lone surrogate)'

t.test('regression: a lone surrogate in a value or a key is a 400 naming its path, not a failed shared insert', async (t) => {
  const { key, agentId } = await setup()
  const cases: [unknown, (string | number)[]][] = [
    [{ agentId, reasoning: 'x\ud800' }, ['reasoning']],
    [{ agentId, toolsConsidered: ['ok', '\udc00'] }, ['toolsConsidered', 1]],
    [{ agentId, amount: { token: 'T\ud800', value: 1 } }, ['amount', 'token']],
    [{ agentId, model: '\ud800' }, ['model']],
    [{ agentId, metadata: { note: 'a\ud800' } }, ['metadata', 'note']],
    [{ agentId, input: { context: { 'k\ud800': 1 } } }, ['input', 'context', 'k\ud800']],
  ]
  for (const [payload, path] of cases) {
    const res = await sendEvent(app, key.secret, payload)
    t.equal(res.statusCode, 400, JSON.stringify(path))
    t.same(res.json(), { error: 'validation_failed', message: 'the body is not valid', details: [{ path, message: LONE }] })
  }
  const pair = await sendEvent(app, key.secret, { agentId, reasoning: 'ok 😀', metadata: { 'é😀': 'ü' } })
  t.equal(pair.statusCode, 202, 'surrogate pairs are fine')
  const nul = await sendEvent(app, key.secret, { agentId, reasoning: 'a\u0000b' })
  t.equal(nul.statusCode, 202, 'NUL in event text is stored as sent (ClickHouse keeps it)')
})

t.test('regression: a batch with one poisoned event answers 207 with a 400 for it and 202 for the others', async (t) => {
  const { user, key, agentId } = await setup()
  const body = JSON.stringify({ events: [{ agentId, reasoning: 'one' }, { agentId, reasoning: 'x\ud800' }, { agentId, reasoning: 'three' }] })
  const res = await postRaw(app, key.secret, '/v1/events/batch', body)
  t.equal(res.statusCode, 207, res.body)
  const results = res.json().results
  t.same(results.map((r: { status: number }) => r.status), [202, 400, 202])
  t.same(results[1], { status: 400, error: 'validation_failed', message: 'the body is not valid', details: [{ path: ['reasoning'], message: LONE }] })
  await shipped(app)
  for (const i of [0, 2]) t.ok(await app.events.getRow(user.id, results[i].eventId), `event ${i} is stored`)
})

t.test(`regression: nesting 3000 levels is a 400 (limit ${MAX_DEPTH} below the event), alone and in a batch`, async (t) => {
  const { key, agentId } = await setup()
  const single = await postRaw(app, key.secret, '/v1/events', `{"agentId":"${agentId}","metadata":${deep(3000)}}`)
  t.equal(single.statusCode, 400, single.body)
  t.equal(single.json().error, 'validation_failed')
  t.same(single.json().details, [{ path: ['metadata', ...Array(MAX_DEPTH).fill('m')], message: `nests objects or arrays more than ${MAX_DEPTH} levels deep` }])
  const input = await postRaw(app, key.secret, '/v1/events', `{"agentId":"${agentId}","input":{"context":${deep(3000)}}}`)
  t.equal(input.statusCode, 400)

  const atLimit = `{"agentId":"${agentId}","metadata":${deep(MAX_DEPTH)}}`
  t.equal((await postRaw(app, key.secret, '/v1/events', atLimit)).statusCode, 202, `${MAX_DEPTH} levels are accepted`)

  const batch = await postRaw(app, key.secret, '/v1/events/batch',
    `{"events":[{"agentId":"${agentId}"},{"agentId":"${agentId}","metadata":${deep(3000)}},${atLimit}]}`)
  t.equal(batch.statusCode, 207, batch.body)
  const results = batch.json().results
  t.same(results.map((r: { status: number }) => r.status), [202, 400, 202], 'depth counts from each event, as alone')
  t.same(results[1], { status: 400, ...single.json() }, 'the same answer the event alone got')

  const envelope = await postRaw(app, key.secret, '/v1/events/batch', `{"events":[{"agentId":"${agentId}"}],"extra":${deep(3000)}}`)
  t.equal(envelope.statusCode, 400, 'too deep outside the events: the whole batch is refused')
  t.equal(envelope.json().error, 'validation_failed')
  t.equal(envelope.json().details[0].path[0], 'extra')
})

t.test('regression: numbers JSON.parse would change are a 400 naming their path', async (t) => {
  const { key, agentId } = await setup()
  const cases: [string, (string | number)[]][] = [
    [`{"agentId":"${agentId}","amount":{"token":"T","value":1e309}}`, ['amount', 'value']],
    [`{"agentId":"${agentId}","amount":{"token":"T","value":-1e309}}`, ['amount', 'value']],
    [`{"agentId":"${agentId}","amount":{"token":"T","value":1e-400}}`, ['amount', 'value']],
    [`{"agentId":"${agentId}","metadata":{"n":[0, 9007199254740993]}}`, ['metadata', 'n', 1]],
    [`{"agentId":"${agentId}","durationMs":18446744073709551616}`, ['durationMs']],
  ]
  for (const [body, path] of cases) {
    const res = await postRaw(app, key.secret, '/v1/events', body)
    t.equal(res.statusCode, 400, body.slice(-40))
    t.equal(res.json().error, 'validation_failed')
    t.same(res.json().details.map((d: { path: unknown }) => d.path), [path])
  }

  const batch = await postRaw(app, key.secret, '/v1/events/batch',
    `{"events":[{"agentId":"${agentId}"},{"agentId":"${agentId}","amount":{"token":"T","value":1e309}}]}`)
  t.same(batch.json().results.map((r: { status: number }) => r.status), [202, 400])
  t.same(batch.json().results[1].details.map((d: { path: unknown }) => d.path), [['amount', 'value']], 'the path is relative to the event')
})

t.test('numbers that survive are accepted and read back exactly: 2^53-1 and 1e-300', async (t) => {
  const { user, key, agentId } = await setup()
  const res = await postRaw(app, key.secret, '/v1/events',
    `{"agentId":"${agentId}","amount":{"token":"T","value":1e-300},"durationMs":9007199254740991,"metadata":{"big":9007199254740991,"id":"12345678901234567890"}}`)
  t.equal(res.statusCode, 202, res.body)
  await shipped(app)
  const row = await app.events.getRow(user.id, res.json().eventId)
  t.equal(Number(row!.amount_value), 1e-300)
  t.equal(JSON.parse(row!.metadata as string).big, 9007199254740991)
  t.equal(String(row!.duration_ms), '9007199254740991')
})

t.test('regression: timestamps outside [1970-01-01Z, 2106-01-01Z) are refused, the edges inside accepted', async (t) => {
  const { user, key, agentId } = await setup()
  for (const timestamp of ['1970-01-01T00:00:00+05:00', '2106-01-01T00:00:00Z', '2106-06-01T00:00:00Z', 4291747200000, -1]) {
    const res = await sendEvent(app, key.secret, { agentId, timestamp })
    t.equal(res.statusCode, 400, String(timestamp))
    t.same(res.json().details.map((d: { path: unknown }) => d.path), [['timestamp']])
  }
  for (const timestamp of ['2105-12-31T23:59:59Z', '1970-01-01T00:00:00Z', 4291747199999]) {
    const res = await sendEvent(app, key.secret, { agentId, timestamp })
    t.equal(res.statusCode, 202, String(timestamp))
    await shipped(app)
    const row = await app.events.getRow(user.id, res.json().eventId)
    t.equal(Number(row!.ts_ms), typeof timestamp === 'number' ? timestamp : Date.parse(timestamp), 'stored at the instant sent')
  }
})

t.test('every other JSON route obeys the same rules with a 400', async (t) => {
  const { user } = await setup()
  const headers = { ...user.auth, 'content-type': 'application/json' }
  const patch = await app.inject({ method: 'PATCH', url: '/v1/me', headers, payload: `{"handle":${deep(3000)}}` })
  t.equal(patch.statusCode, 400)
  t.equal(patch.json().error, 'validation_failed')
  const key = await app.inject({ method: 'POST', url: '/v1/me/keys', headers, payload: JSON.stringify({ label: 'x\ud800' }) })
  t.same(key.json(), { error: 'validation_failed', message: 'the body is not valid', details: [{ path: ['label'], message: LONE }] })
  const waitlist = await app.inject({
    method: 'POST', url: '/v1/waitlist', headers: { 'content-type': 'application/json' },
    payload: `{"email":"${randomId()}@example.com","metadata":{"n":1e999}}`,
  })
  t.equal(waitlist.statusCode, 400)
  t.same(waitlist.json().details.map((d: { path: unknown }) => d.path), [['metadata', 'n']])
})

t.test("Fastify's own body protections still hold", async (t) => {
  const { key } = await setup()
  for (const body of ['{"agentId": ', '', '{"agentId":"a","__proto__":{"x":1}}', '{"agentId":"a","constructor":{"prototype":{"x":1}}}']) {
    const res = await postRaw(app, key.secret, '/v1/events', body)
    t.equal(res.statusCode, 400, JSON.stringify(body))
    t.equal(res.json().error, 'invalid_json', JSON.stringify(body))
  }
})

t.test('a poisoned key is named as such, not as invalid JSON; broken JSON still is', async (t) => {
  const { key } = await setup()
  const poisoned = [
    '{"agentId":"a","__proto__":{"x":1}}',
    '{"agentId":"a","metadata":{"toolResult":{"result":"ok","constructor":{"prototype":{"x":1}}}}}',
    '{"agentId":"a","metadata":{"\\u005f_proto__":{"x":1}}}',
  ]
  for (const body of poisoned) {
    const res = await postRaw(app, key.secret, '/v1/events', body)
    t.equal(res.statusCode, 400, body)
    t.same(res.json(), { error: 'invalid_json', message: 'the body holds a __proto__ or constructor.prototype key, which is refused' }, body)
  }
  const batch = await postRaw(app, key.secret, '/v1/events/batch', `{"events":[{"agentId":"a"},${poisoned[1]}]}`)
  t.equal(batch.statusCode, 400)
  t.match(batch.json().message, /__proto__ or constructor\.prototype/)
  for (const body of ['{"agentId": ', '{"agentId":"__proto__"', '{"prototype":}']) {
    const res = await postRaw(app, key.secret, '/v1/events', body)
    t.same(res.json(), { error: 'invalid_json', message: 'the body is not valid JSON' }, body)
  }
})
