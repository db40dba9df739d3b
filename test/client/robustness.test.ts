import './built-client.ts'
import t from 'tap'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AgentTelemetry, type TelemetryError } from 'agent-telemetry-client'

// What a host application does wrong with the client, or what goes wrong around it, never becomes the
// host's crash or a silent loss: each case here was found by embedding the client as a new user would.

const KEY = 'vk_live_robustness_0123456789'

async function listen (handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

t.test('an async onError that rejects is no unhandled rejection of the host', async (t) => {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => { unhandled.push(reason) }
  process.on('unhandledRejection', onUnhandled)
  t.teardown(() => { process.off('unhandledRejection', onUnhandled) })
  let called = 0
  const client = new AgentTelemetry({
    apiKey: KEY, baseUrl: 'http://127.0.0.1:9', agentId: 'a', onError: async () => { called++; throw new Error('async handler boom') },
  })
  t.notOk(client.track({ type: 'bad' } as never), 'an invalid event is dropped and reported')
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(called, 1)
  t.same(unhandled, [], 'the handler\'s rejection was caught')
  await client.shutdown(10)
})

t.test('requestTimeoutMs ends a request whose fetch ignores the abort signal', async (t) => {
  let calls = 0
  // A wrapper that forgets to pass the signal on, in front of a service that never answers.
  const client = new AgentTelemetry({
    apiKey: KEY, baseUrl: 'http://127.0.0.1:9', agentId: 'a', requestTimeoutMs: 200, retryBaseMs: 10, retryMaxMs: 20, maxRetries: 2,
    fetch: () => { calls++; return new Promise<Response>(() => {}) },
    onError: () => {},
  })
  client.track({ type: 'action' })
  const flushed = await Promise.race([client.flush().then(() => 'flushed'), new Promise((resolve) => setTimeout(() => resolve('stuck'), 5000))])
  t.equal(flushed, 'flushed', 'flush() ended: the request was abandoned, retried, then given up')
  t.equal(calls, 3, 'the first send and two retries')
  t.equal(client.stats().dropped.retries_exhausted, 1)
  await client.shutdown(10)
})

t.test('a baseUrl that redirects is told as a redirect, not as the 404 of the page it leads to', async (t) => {
  const { server, url } = await listen((req, res) => {
    if (req.url?.startsWith('/v1/')) res.writeHead(301, { location: 'https://telemetry.example/v1/events/batch' }).end()
    else res.writeHead(404).end()
  })
  t.teardown(() => server.close())
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: url, agentId: 'a', onError: (e) => errors.push(e) })
  client.track({ type: 'action' })
  await client.flush()
  t.equal(client.stats().dropped.refused, 1)
  t.match(errors[0]?.message, /301 redirected_301 to https:\/\/telemetry\.example\/v1\/events\/batch: set baseUrl to the service's own address/)
  await client.shutdown(10)
})

t.test('an event over maxItemBytes or maxQueueBytes is dropped as too_large, and sent nowhere', async (t) => {
  let posted = 0
  const { server, url } = await listen((req, res) => { posted++; req.resume(); res.writeHead(503).end() })
  t.teardown(() => server.close())
  const big = { type: 'action' as const, input: { prompt: 'x'.repeat(1024 * 1024 + 10) } }
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: url, agentId: 'a', onError: () => {}, flushIntervalMs: 0 })
  t.notOk(client.track(big), 'over the service\'s 1 MiB for one event')
  t.equal(client.stats().dropped.too_large, 1)
  const roomy = new AgentTelemetry({ apiKey: KEY, baseUrl: url, agentId: 'a', onError: () => {}, maxItemBytes: 2 * 1024 * 1024, flushIntervalMs: 60_000 })
  t.ok(roomy.track(big), 'a service with a larger BODY_LIMIT: maxItemBytes says so')

  const small = new AgentTelemetry({ apiKey: KEY, baseUrl: url, agentId: 'a', onError: () => {}, maxQueueBytes: 2048, flushAt: 100, flushIntervalMs: 60_000 })
  for (let i = 0; i < 6; i++) t.ok(small.track({ type: 'action', metadata: { i } }))
  t.notOk(small.track({ type: 'action', input: { prompt: 'y'.repeat(5000) } }), 'larger than the whole queue')
  t.equal(small.stats().queued, 6, 'the queue was not emptied for it')
  t.equal(small.stats().dropped.too_large, 1)
  t.equal(posted, 0)
  for (const c of [client, roomy, small]) await c.shutdown(10)
})

t.test('bad options are refused at construction, naming the option', async (t) => {
  const base = { apiKey: KEY, baseUrl: 'http://127.0.0.1:9' }
  t.throws(() => new AgentTelemetry(undefined as never), { name: 'TypeError', message: /options must be an object with at least apiKey and baseUrl/ })
  for (const agentId of [42, '', 'x'.repeat(121), 'a\u0000b']) {
    t.throws(() => new AgentTelemetry({ ...base, agentId: agentId as never }), { name: 'TypeError', message: /agentId must be a string of 1 to 120 characters/ }, String(agentId).slice(0, 10))
  }
  t.throws(() => new AgentTelemetry({ ...base, onError: 'x' as never }), { name: 'TypeError', message: /onError must be a function \(got string\)/ })
  t.throws(() => new AgentTelemetry({ ...base, fetch: 'x' as never }), { name: 'TypeError', message: /fetch must be a function \(got string\)/ })
  const ok = new AgentTelemetry({ ...base, agentId: 'x'.repeat(120) })
  await ok.shutdown(10)
})

t.test('span.set() with no fields does nothing; span() without a function says what is missing', async (t) => {
  const events: unknown[] = []
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: 'http://127.0.0.1:9', agentId: 'a', onError: () => {}, flushIntervalMs: 60_000 })
  const result = await client.span('x', async (s) => {
    s.set(null as never)
    s.set('model' as never)
    s.set({ model: 'm', metadata: null as never })
    events.push(s.traceId)
    return 7
  })
  t.equal(result, 7, 'the span ran to its end')
  t.equal(client.stats().queued, 1, 'and its event was tracked')
  t.throws(() => client.span('x', undefined as never), { name: 'TypeError', message: /span x: the second argument must be the function the span runs/ })
  await client.shutdown(10)
})

t.test('shutdown() at its timeout says which of what it gives up may have been stored', async (t) => {
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({
    apiKey: KEY, baseUrl: 'http://127.0.0.1:9', agentId: 'a', flushAt: 2, requestTimeoutMs: 60_000,
    fetch: () => new Promise<Response>(() => {}), onError: (e) => errors.push(e),
  })
  for (let i = 0; i < 3; i++) client.track({ type: 'action', metadata: { i } })
  await new Promise((resolve) => setTimeout(resolve, 50))
  await client.shutdown(100)
  const given = errors.find((e) => e.reason === 'shutdown')
  t.equal(given?.count, 3)
  t.match(given?.message, /3 events were still queued or unanswered when shutdown\(\) timed out \([23] of them in requests under way, which the service may have stored\)/)
})

t.test('an option the client does not know is warned about, naming the one meant', async (t) => {
  const warned: string[] = []
  const warn = console.warn
  console.warn = (message: string) => { warned.push(message) }
  t.teardown(() => { console.warn = warn })
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: 'http://127.0.0.1:9', flushAT: 5, colour: 'red' } as never)
  t.same(warned, [
    'agent-telemetry-client: unknown option flushAT (did you mean flushAt?): it is ignored',
    'agent-telemetry-client: unknown option colour: it is ignored',
  ])
  await client.shutdown(10)
})

t.test('the score type says what the checks at the call say: one target, one value', async (t) => {
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: 'http://127.0.0.1:9', agentId: 'a', onError: () => {}, flushIntervalMs: 60_000 })
  // Each @ts-expect-error fails `npm run typecheck` if the type lets the mistake through.
  // @ts-expect-error two targets
  t.notOk(client.score({ traceId: 't', sessionId: 's', name: 'n', value: 1 }))
  // @ts-expect-error two values
  t.notOk(client.score({ traceId: 't', name: 'n', value: 1, label: 'x' }))
  // @ts-expect-error no target
  t.notOk(client.score({ name: 'n', value: 1 }))
  // @ts-expect-error a span without its trace
  t.notOk(client.score({ sessionId: 's', spanId: 'x', name: 'n', value: 1 }))
  t.ok(client.score({ traceId: 't', spanId: 's', name: 'n', boolean: true }))
  t.ok(client.score({ eventId: 'evt_1', name: 'n', label: 'good', comment: 'fine' }))
  await client.shutdown(10)
})

t.test('a network error says what failed and where; the service\'s reason for refusing an event is in the warning', async (t) => {
  const errors: TelemetryError[] = []
  // A port nothing listens on (fetch refuses some ports, such as 1, before connecting).
  const closed = await listen(() => {})
  await new Promise((resolve) => closed.server.close(resolve))
  const down = new AgentTelemetry({ apiKey: KEY, baseUrl: closed.url, agentId: 'a', maxRetries: 1, retryBaseMs: 1, onError: (e) => errors.push(e) })
  down.track({ reasoning: 'x' })
  await down.flush()
  t.match(errors.find((e) => e.reason === 'retrying')?.message, new RegExp(`^network_error \\(.*ECONNREFUSED.*\\) sending to ${closed.url}/v1/events/batch: retry 1 of 1`))
  t.match(errors.find((e) => e.reason === 'retries_exhausted')?.message, /ECONNREFUSED/)

  const warned: string[] = []
  const warn = console.warn
  console.warn = (message: string) => { warned.push(message) }
  t.teardown(() => { console.warn = warn })
  // One event refused with the service's message and details, as the service words them, then whole
  // batches refused with 404, 404 and 401.
  let n = 0
  const { server, url } = await listen((req, res) => {
    req.resume()
    req.on('end', () => {
      n++
      if (n === 1) {
        res.writeHead(207, { 'content-type': 'application/json' }).end(JSON.stringify({ results: [{ status: 400, error: 'validation_failed', message: 'the body is not valid', details: [{ path: ['agentId'], message: 'is required when the API key is not bound to an agent' }] }] }))
      } else {
        const status = n === 4 ? 401 : 404
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: status === 401 ? 'revoked_key' : 'not_found' }))
      }
    })
  })
  t.teardown(() => server.close())
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: url })
  for (let i = 0; i < 4; i++) {
    client.track({ agentId: 'a', reasoning: `r${i}` })
    await client.flush()
  }
  t.equal(warned.length, 3, warned.join('\n'))
  t.match(warned[0], /rejected: the service refused an event: 400 validation_failed: the body is not valid: agentId is required when the API key is not bound to an agent/, 'the field at fault is named')
  t.match(warned[1], /refused: the service refused a batch of 1 events sent to http:\/\/127\.0\.0\.1:\d+\/v1\/events\/batch: 404 not_found/)
  t.match(warned[2], /refused: .*401 revoked_key/, 'a later refusal of another status is told too, once')
  await client.shutdown(100)
})
