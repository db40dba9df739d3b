import t from 'tap'
import http from 'node:http'
import { buildTestApp, newUser, randomId, sendBatch, sendEvent, shipped } from '../../helpers/app.ts'
import { contentHash } from '../../../src/domain/canonical-json.ts'

const app = await buildTestApp(t)

t.test('accepts an event, answers 202 with the ack, and stores every field', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const name = randomId('agent-')
  const payload = {
    agentId: name,
    timestamp: '2026-03-01T10:00:00.250Z',
    type: 'tool',
    input: { prompt: 'find flights', context: { city: 'Lyon' } },
    reasoning: 'cheapest first',
    toolsConsidered: ['search', 'book'],
    toolExecuted: 'search',
    transaction: null,
    amount: { token: 'USDC', value: 12.5 },
    outcome: 'success',
    durationMs: 420,
    model: 'claude-sonnet-4-5-20250929',
    metadata: {
      tokensBreakdown: { inputBase: 1000, cacheCreation: 200, cacheRead: 3000, output: 500 },
      traceId: 'tr-1', sessionId: 'se-1', cwd: '/work', git: { branch: 'main' }, privacyLevel: 'standard',
      tool: 'claude-code', custom: { nested: true },
    },
  }
  const res = await sendEvent(app, key.secret, payload)
  t.equal(res.statusCode, 202, res.body)
  const ack = res.json()
  t.match(ack, { accepted: true, agentId: /^c[a-z0-9]{24}$/, eventId: /^evt_[0-9A-Z]{26}$/ })
  t.equal(ack.id, ack.eventId)
  await shipped(app)
  const row = await app.events.getRow(user.id, ack.eventId)
  t.ok(row, 'the event is in ClickHouse once the 202 is back')
  t.equal(row!.agent_id, ack.agentId)
  t.equal(Number(row!.ts_ms), Date.parse('2026-03-01T10:00:00.250Z'))
  t.equal(row!.type, 'tool')
  t.equal(row!.outcome, 'success')
  t.equal(row!.session_id, 'se-1')
  t.equal(row!.trace_id, 'tr-1')
  t.equal(row!.privacy_level, 'standard')
  t.equal(row!.cwd, '/work')
  t.same(JSON.parse(row!.git as string), { branch: 'main' })
  t.same(JSON.parse(row!.input as string), payload.input)
  t.same(row!.tools_considered, ['search', 'book'])
  t.equal(row!.amount_token, 'USDC')
  t.equal(Number(row!.duration_ms), 420)
  t.equal(Number(row!.tokens_cache_read), 3000)
  // 1000*3 + 200*3.75 + 3000*0.3 + 500*15 = 3000 + 750 + 900 + 7500 = 12150 $/M → 0.01215 $
  t.equal(Number(row!.cost_usd), 0.01215)
  t.equal(row!.cost_status, 'priced')
  t.equal(row!.content_hash, contentHash(payload))
  t.same(JSON.parse(row!.metadata as string).custom, { nested: true }, 'unknown metadata keys are kept')
  t.equal(row!.error_fingerprint, '')
})

t.test('input and metadata are stored as the exact JSON text of what was sent, alone and in a batch built on the row thread', async (t) => {
  await app.rowThread.whenReady()
  const user = await newUser(app, { tier: 'enterprise' })
  const key = await user.createKey()
  const agentId = randomId('agent-')
  const odd = (i: number) => ({
    agentId,
    input: { prompt: `a "quote", a \\ backslash, }{][ braces — café ✈ \u{1F600} \u2028 #${i}`, context: { n: [1e21, 1e-7, -0, 1.5, null, true], deep: { a: [{ b: {} }, []] } } },
    metadata: { zKey: 'last', aKey: 'first', tokensBreakdown: { output: 3 }, ctl: 'tab\there\u0001', emptyObject: {}, emptyArray: [], git: 'a string' },
  })
  const one = await sendEvent(app, key.secret, odd(0))
  t.equal(one.statusCode, 202, one.body)
  const batch = Array.from({ length: 70 }, (_, i) => odd(i + 1)) // past INGEST_ROW_THREAD_MIN_EVENTS (64)
  const before = app.rowThread.builtOnThread
  const res = await sendBatch(app, key.secret, batch)
  t.equal(res.statusCode, 207)
  t.equal(app.rowThread.builtOnThread - before, 70, 'the batch was built on the row thread')
  await shipped(app)
  const sent = [odd(0), ...batch]
  const ids = [one.json().eventId, ...res.json().results.map((r: { eventId: string }) => r.eventId)]
  for (const [i, id] of ids.entries()) {
    const row = await app.events.getRow(user.id, id)
    if (row!.input !== JSON.stringify(sent[i]!.input) || row!.metadata !== JSON.stringify(sent[i]!.metadata) || row!.git !== JSON.stringify('a string')) {
      t.fail(`event ${i}: ${JSON.stringify([row!.input, row!.metadata, row!.git])}`)
      return
    }
  }
  t.pass(`all ${ids.length} rows hold JSON.stringify of the input, the metadata and metadata.git sent`)
})

t.test('defaults: receive time, type decision; unknown model costs 0 with a flag', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const before = Date.now()
  const res = await sendEvent(app, key.secret, { agentId: 'a', model: 'mystery-9', metadata: { tokensBreakdown: { output: 10 } } })
  t.equal(res.statusCode, 202)
  await shipped(app)
  const row = await app.events.getRow(user.id, res.json().eventId)
  t.equal(row!.type, 'decision')
  t.ok(Number(row!.ts_ms) >= before && Number(row!.ts_ms) <= Date.now())
  t.equal(Number(row!.cost_usd), 0)
  t.equal(row!.cost_status, 'unknown_model')
})

t.test('an empty model is no model, as documented', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const res = await sendEvent(app, key.secret, { agentId: 'a', model: '', metadata: { tokensBreakdown: { output: 10 } } })
  t.equal(res.statusCode, 202)
  await shipped(app)
  const row = await app.events.getRow(user.id, res.json().eventId)
  t.equal(row!.model, '')
  t.equal(row!.cost_status, 'no_model')
})

t.test('unix-ms timestamps are accepted', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const res = await sendEvent(app, key.secret, { agentId: 'a', timestamp: 1767225600123 })
  t.equal(res.statusCode, 202)
  await shipped(app)
  const row = await app.events.getRow(user.id, res.json().eventId)
  t.equal(Number(row!.ts_ms), 1767225600123)
})

t.test('error events get a fingerprint that groups the same failure', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const a = await sendEvent(app, key.secret, { agentId: 'x', type: 'error', toolExecuted: 'http', errorMessage: 'timeout after 3000 ms on request 81' })
  const b = await sendEvent(app, key.secret, { agentId: 'x', outcome: 'failed', toolExecuted: 'http', errorMessage: 'Timeout after 5000 ms on request 99' })
  const c = await sendEvent(app, key.secret, { agentId: 'x', outcome: 'failed', toolExecuted: 'db', errorMessage: 'timeout after 3000 ms on request 81' })
  await shipped(app)
  const [ra, rb, rc] = await Promise.all([a, b, c].map((r) => app.events.getRow(user.id, r.json().eventId)))
  t.match(ra!.error_fingerprint, /^[0-9a-f]{16}$/)
  t.equal(ra!.error_fingerprint, rb!.error_fingerprint)
  t.not(ra!.error_fingerprint, rc!.error_fingerprint, 'another tool is another cluster')
})

t.test('one keep-alive connection: each request is checked by its own key, and a revocation applies at once', async (t) => {
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const post = (authorization: string, body: unknown) => new Promise<{ status: number; json: Record<string, unknown>; port: number }>((resolve, reject) => {
    const req = http.request(`${address}/v1/events`, { method: 'POST', agent, headers: { authorization, 'content-type': 'application/json' } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { text += chunk })
      res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text), port: req.socket!.localPort! }))
    })
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
  const alice = await newUser(app)
  const bob = await newUser(app)
  const aliceKey = await alice.createKey()
  const bobKey = await bob.createKey()
  const name = randomId('agent-')
  const first = await post(`Bearer ${aliceKey.secret}`, { agentId: name })
  t.equal(first.status, 202)
  const again = await post(`Bearer ${aliceKey.secret}`, { agentId: name })
  t.equal(again.json.agentId, first.json.agentId, 'the same key, the same agent')
  const other = await post(`Bearer ${bobKey.secret}`, { agentId: name })
  t.equal(other.status, 202)
  t.not(other.json.agentId, first.json.agentId, 'another key on the connection sends for its own user')
  const bogus = await post('Bearer vk_' + 'x'.repeat(43), { agentId: name })
  t.same([bogus.status, bogus.json.reason], [401, 'invalid_key'])
  const basic = await post('Basic abc', { agentId: name })
  t.same([basic.status, basic.json.reason], [401, 'missing_bearer'])
  t.equal((await post(`Bearer ${aliceKey.secret}`, { agentId: name })).status, 202)
  const del = await app.inject({ method: 'DELETE', url: `/v1/me/keys/${aliceKey.id}`, headers: alice.auth })
  t.equal(del.statusCode, 204)
  const revoked = await post(`Bearer ${aliceKey.secret}`, { agentId: name })
  t.same([revoked.status, revoked.json.reason], [401, 'revoked_key'])
  t.equal(new Set([first, again, other, bogus, basic, revoked].map((r) => r.port)).size, 1, 'every request went over one connection')
})

t.test('401 reasons: missing bearer, unknown key, revoked key', async (t) => {
  const none = await app.inject({ method: 'POST', url: '/v1/events', payload: { agentId: 'a' } })
  t.equal(none.statusCode, 401)
  t.same(none.json(), { error: 'unauthorized', reason: 'missing_bearer' })
  const basic = await app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: 'Basic abc' }, payload: { agentId: 'a' } })
  t.same(basic.json(), { error: 'unauthorized', reason: 'missing_bearer' })
  const bogus = await sendEvent(app, 'vk_' + 'x'.repeat(43), { agentId: 'a' })
  t.equal(bogus.statusCode, 401)
  t.same(bogus.json(), { error: 'unauthorized', reason: 'invalid_key' })
  const notVk = await sendEvent(app, 'sk_live_123', { agentId: 'a' })
  t.same(notVk.json(), { error: 'unauthorized', reason: 'invalid_key' })

  const user = await newUser(app)
  const key = await user.createKey()
  t.equal((await sendEvent(app, key.secret, { agentId: 'a' })).statusCode, 202)
  const del = await app.inject({ method: 'DELETE', url: `/v1/me/keys/${key.id}`, headers: user.auth })
  t.equal(del.statusCode, 204)
  const after = await sendEvent(app, key.secret, { agentId: 'a' })
  t.equal(after.statusCode, 401)
  t.same(after.json(), { error: 'unauthorized', reason: 'revoked_key' })
})

t.test('validation: 400 with details whose path is an array of keys and indices', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const res = await sendEvent(app, key.secret, {
    agentId: 'a', bogus: 1, type: 'nope', durationMs: -1, toolsConsidered: ['ok', 7],
    metadata: { tokensBreakdown: { output: 1.5 }, privacyLevel: 'secret', anything: 'kept' },
  })
  t.equal(res.statusCode, 400)
  const body = res.json()
  t.equal(body.error, 'validation_failed')
  const paths = body.details.map((d: { path: unknown[] }) => JSON.stringify(d.path))
  for (const p of [['bogus'], ['type'], ['durationMs'], ['toolsConsidered', 1], ['metadata', 'tokensBreakdown', 'output'], ['metadata', 'privacyLevel']]) {
    t.ok(paths.includes(JSON.stringify(p)), `details name ${JSON.stringify(p)}`)
  }
  t.notOk(paths.some((p: string) => p.includes('anything')), 'unknown metadata keys are not errors')
  for (const d of body.details) t.type(d.message, 'string')
})

t.test('a refused event of a batch gets exactly the body it would have got alone', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  for (const event of [{ agentId: 'a1', type: 'x' }, { agentId: 'a1', durationMs: -1, model: '' }, { agentId: 'a\u0000b' }, { reasoning: 'no agent' }]) {
    const alone = await sendEvent(app, key.secret, event)
    t.equal(alone.statusCode, 400, JSON.stringify(event))
    const batch = await sendBatch(app, key.secret, [event])
    t.same(batch.json().results, [{ status: 400, ...alone.json() }], JSON.stringify(event))
  }
})

t.test('an event of a batch larger than a body of its own may be gets the 413 it would have got alone', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  // 600,000 characters of 'é' are 1.2 MB of UTF-8: bytes are counted, not characters.
  const large = { agentId: 'a1', reasoning: '\u00e9'.repeat(600_000) }
  const underLimit = { agentId: 'a1', reasoning: '\u00e9'.repeat(500_000) }
  const alone = await sendEvent(app, key.secret, large)
  t.equal(alone.statusCode, 413)
  t.equal((await sendEvent(app, key.secret, underLimit)).statusCode, 202, 'an event of 1 MB alone is taken')
  const batch = await sendBatch(app, key.secret, [{ agentId: 'a1', type: 'decision' }, large, underLimit])
  t.equal(batch.statusCode, 207)
  const [first, second, third] = batch.json().results
  t.equal(first.status, 202)
  t.same(second, { status: 413, ...alone.json() })
  t.equal(third.status, 202, 'the body over the limit alone refuses only the event that is')
})

t.test('validation: each field rule', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const bad: [string, unknown][] = [
    ['agentId', ''],
    ['agentId', 'x'.repeat(121)],
    ['timestamp', 'yesterday'],
    ['timestamp', '2026-02-30T00:00:00Z'],
    ['timestamp', -5],
    ['timestamp', 12.5],
    ['durationMs', 1.5],
    ['durationMs', '10'],
    ['outcome', 'done'],
    ['input', 'text'],
    ['amount', { token: 'SOL' }],
    ['transaction', 5],
    ['metadata', []],
  ]
  for (const [field, value] of bad) {
    const res = await sendEvent(app, key.secret, { agentId: 'a', [field]: value })
    t.equal(res.statusCode, 400, `${field}=${JSON.stringify(value)} is refused`)
    t.equal(res.json().details[0].path[0], field)
  }
  const okLong = await sendEvent(app, key.secret, { agentId: 'x'.repeat(120), timestamp: '2026-01-01 10:00:00' })
  t.equal(okLong.statusCode, 202, 'a 120-character agentId and a zone-less timestamp are accepted')
})

t.test('an unbound key without agentId is a 400 naming agentId', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const res = await sendEvent(app, key.secret, { type: 'decision' })
  t.equal(res.statusCode, 400)
  t.same(res.json().details.map((d: { path: unknown }) => d.path), [['agentId']])
})

t.test('malformed JSON, wrong content type and oversized bodies get JSON errors', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const headers = { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }
  const broken = await app.inject({ method: 'POST', url: '/v1/events', headers, payload: '{"agentId": ' })
  t.equal(broken.statusCode, 400)
  t.equal(broken.json().error, 'invalid_json')
  const text = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...headers, 'content-type': 'text/plain' }, payload: 'hi' })
  t.equal(text.statusCode, 415)
  t.equal(text.json().error, 'unsupported_media_type')
  const big = await app.inject({ method: 'POST', url: '/v1/events', headers, payload: JSON.stringify({ agentId: 'a', reasoning: 'x'.repeat(1024 * 1024) }) })
  t.equal(big.statusCode, 413)
  t.equal(big.json().error, 'payload_too_large')
  const array = await app.inject({ method: 'POST', url: '/v1/events', headers, payload: '[1,2]' })
  t.equal(array.statusCode, 400)
  t.equal(array.json().error, 'validation_failed')
})

t.test('Redis unreachable: ingestion answers 503 with Retry-After, not a 500', async (t) => {
  const broken = await buildTestApp(t)
  const user = await newUser(broken)
  const key = await user.createKey()
  t.equal((await sendEvent(broken, key.secret, { agentId: 'r' })).statusCode, 202)
  broken.redis.disconnect()
  const res = await sendEvent(broken, key.secret, { agentId: 'r' })
  t.equal(res.statusCode, 503)
  t.match(res.json(), { error: 'unavailable' })
  t.equal(res.headers['retry-after'], '1')
})

t.test('a batch mixing agents this instance holds with new ones: each event gets its own agent and answer, in order', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const held = randomId('held-')
  const first = await sendEvent(app, key.secret, { agentId: held })
  t.equal(first.statusCode, 202)
  const heldId = first.json().agentId
  const fresh = [randomId('new-'), randomId('new-')]
  const names = [held, fresh[0], held, fresh[1], fresh[0], held]
  const res = await sendBatch(app, key.secret, names.map((agentId, i) => ({ agentId, reasoning: `event ${i}` })))
  t.equal(res.statusCode, 207)
  const results = res.json().results as { status: number; agentId: string; id: string }[]
  t.same(results.map((r) => r.status), names.map(() => 202))
  const ids = results.map((r) => r.agentId)
  t.equal(ids[0], heldId, 'the held agent resolves to its id')
  t.equal(ids[2], heldId)
  t.equal(ids[5], heldId)
  t.equal(ids[1], ids[4], 'a new agent named twice is one agent')
  t.not(ids[1], ids[3], 'two new agents are two agents')
  t.notOk([ids[1], ids[3]].includes(heldId))
  await shipped(app)
  const listed = await app.inject({ url: '/v1/me/events?limit=50', headers: user.auth })
  const stored = new Map((listed.json().events as { eventId: string; agent: { id: string }; reasoning: string }[]).map((e) => [e.eventId, e]))
  results.forEach((r, i) => {
    t.equal(stored.get(r.id)?.agent.id, ids[i], `event ${i} is stored under its own agent`)
    t.equal(stored.get(r.id)?.reasoning, `event ${i}`)
  })
})

t.test('a batch on a key bound to an agent: events naming another agent are refused one by one, the rest accepted', async (t) => {
  const user = await newUser(app)
  const unbound = await user.createKey()
  const bound = randomId('bound-')
  const agentId = (await sendEvent(app, unbound.secret, { agentId: bound })).json().agentId
  const other = randomId('other-')
  await sendEvent(app, unbound.secret, { agentId: other })
  const key = await user.createKey('bound', agentId)
  const events = [{ agentId: bound }, { agentId: other }, {}, { agentId }, { agentId: other }]
  for (const round of [1, 2]) { // the second time, every reference is held by this instance
    const res = await sendBatch(app, key.secret, events)
    t.equal(res.statusCode, 207)
    const results = res.json().results as { status: number; agentId?: string; reason?: string }[]
    t.same(results.map((r) => r.status), [202, 403, 202, 202, 403], `round ${round}`)
    t.same(results.filter((r) => r.status === 403).map((r) => r.reason), ['key_bound_to_other_agent', 'key_bound_to_other_agent'])
    t.ok(results.filter((r) => r.status === 202).every((r) => r.agentId === agentId), 'accepted events go to the bound agent')
  }
})
