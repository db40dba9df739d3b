import './built-client.ts'
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AgentTelemetry, type TelemetryError } from 'agent-telemetry-client'
import { buildTestApp, newUser, randomId, shipped } from '../helpers/app.ts'

// The client against the real service on a real port: what it is given is stored, once.

const app = await buildTestApp(t)
await app.listen({ port: 0, host: '127.0.0.1' })
const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`

async function stored (userId: string, marker: string): Promise<{ rows: number; distinct: number }> {
  const rs = await app.clickhouse.query({
    query: 'SELECT count() AS rows, uniqExact(reasoning) AS distinct FROM events WHERE user_id = {u:String} AND startsWith(reasoning, {m:String})',
    query_params: { u: userId, m: marker },
    format: 'JSONEachRow',
  })
  const [row] = await rs.json<{ rows: string; distinct: string }>()
  return { rows: Number(row?.rows ?? 0), distinct: Number(row?.distinct ?? 0) }
}

t.test('10,000 events tracked, then shutdown(): every one stored exactly once', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 10_000_000 })
  const key = await user.createKey('client-10k')
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: key.secret, baseUrl, agentId: randomId('client-'), onError: (e) => errors.push(e) })
  const marker = randomId('n-')
  for (let i = 0; i < 10_000; i++) {
    const queued = client.track({ type: 'tool', toolExecuted: 'search', reasoning: `${marker}-${i}`, model: 'gpt-4o', metadata: { tokensBreakdown: { inputBase: 100, output: 20 } } })
    if (!queued) t.fail(`event ${i} was not queued`)
  }
  await client.shutdown()
  const stats = client.stats()
  t.equal(stats.sent, 10_000, 'the service acknowledged all of them')
  t.same(Object.values(stats.dropped).filter((n) => n > 0), [], 'nothing dropped')
  t.same(errors, [], 'nothing reported')
  t.equal(stats.queued + stats.inFlight, 0)
  await shipped(app)
  t.same(await stored(user.id, marker), { rows: 10_000, distinct: 10_000 })
})

t.test('an answer lost on the way back: the retry under the same key is answered from the record, stored once', async (t) => {
  // A proxy in front of the service that passes the first request on and then cuts the connection
  // instead of relaying the 207, as a load balancer failing over does.
  let requests = 0
  const keys: string[] = []
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', async () => {
      const n = ++requests
      keys.push(String(req.headers['idempotency-key']))
      const answer = await fetch(`${baseUrl}${req.url}`, { method: 'POST', headers: req.headers as Record<string, string>, body: Buffer.concat(chunks) })
      const body = await answer.text()
      if (n === 1) return req.socket.destroy()
      res.writeHead(answer.status, Object.fromEntries(answer.headers)).end(body)
    })
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => proxy.close())
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('client-lost-answer')
  const client = new AgentTelemetry({ apiKey: key.secret, baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, agentId: randomId('client-'), retryBaseMs: 10, onError: () => {} })
  const marker = randomId('lost-')
  for (let i = 0; i < 20; i++) client.track({ reasoning: `${marker}-${i}` })
  await client.flush()
  t.equal(requests, 2)
  t.equal(keys[0], keys[1], 'the retry carried the same Idempotency-Key')
  t.match(client.stats(), { sent: 20, retries: 1, replayed: 1 })
  await shipped(app)
  t.same(await stored(user.id, marker), { rows: 20, distinct: 20 }, 'stored once')
})

t.test('the real burst limit: refused events wait for Retry-After and go again, each stored once', async (t) => {
  const user = await newUser(app, { tier: 'free', burst: 600 })
  const key = await user.createKey('client-limited')
  const client = new AgentTelemetry({ apiKey: key.secret, baseUrl, agentId: randomId('client-'), onError: () => {} })
  const marker = randomId('limited-')
  for (let i = 0; i < 650; i++) client.track({ reasoning: `${marker}-${i}` })
  await client.shutdown(120_000)
  const stats = client.stats()
  t.equal(stats.sent, 650)
  // 650 against 600 a minute: about 50 are refused, fewer when sending is slow enough for the
  // bucket to refill meanwhile (a busy machine), never none.
  t.ok(stats.limited > 0, `the limit refused some, which went again (${stats.limited})`)
  t.same(Object.entries(stats.dropped).filter(([, n]) => n > 0), [], 'nothing dropped: rate-limited events are not refused events')
  await shipped(app)
  t.same(await stored(user.id, marker), { rows: 650, distinct: 650 })
})

t.test('an event with a key the service refuses as poisoning is dropped alone at track(), not with its batch', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 10_000_000 })
  const key = await user.createKey('client-poisoned')
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: key.secret, baseUrl, agentId: randomId('client-'), onError: (e) => errors.push(e) })
  const marker = randomId('poison-')
  for (let i = 0; i < 20; i++) t.ok(client.track({ reasoning: `${marker}-${i}` }))
  t.notOk(client.track({ reasoning: `${marker}-poisoned`, metadata: { toolResult: { result: 'ok', constructor: { prototype: { x: 1 } } } } }), 'constructor.prototype refused')
  // A __proto__ own key, however it got there (JSON.parse makes one).
  t.notOk(client.track({ reasoning: `${marker}-proto`, input: JSON.parse('{"context":{"__proto__":{"x":1}}}') }), '__proto__ refused')
  for (let i = 20; i < 40; i++) t.ok(client.track({ reasoning: `${marker}-${i}` }))
  await client.shutdown()
  const stats = client.stats()
  t.equal(stats.sent, 40)
  t.same(Object.entries(stats.dropped).filter(([, n]) => n > 0), [['invalid', 2]])
  t.same(errors.map((e) => e.reason), ['invalid', 'invalid'])
  t.match(errors[0]!.message, 'metadata.toolResult.constructor.prototype')
  t.same((errors[0]!.details as { path: unknown[] }[]).map((p) => p.path), [['metadata', 'toolResult', 'constructor', 'prototype']])
  t.match(errors[1]!.message, 'input.context.__proto__')
  t.equal(({} as Record<string, unknown>).x, undefined, 'no prototype was polluted')
  await shipped(app)
  t.same(await stored(user.id, marker), { rows: 40, distinct: 40 })
})
