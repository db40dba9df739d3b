import './built-client.ts'
import t from 'tap'
import { AgentTelemetry, type TelemetryError } from 'agent-telemetry-client'
import { accept, upstream } from './upstream.ts'

// Delivery against a local upstream that answers as the service does when it limits, fails or
// refuses (429, 503 with Retry-After, a reset connection, 413, a 207 with refused events), and keeps
// every request it got.

const fast = { retryBaseMs: 20, retryMaxMs: 2000, flushIntervalMs: 10 }
const events = (n: number, prefix = 'e') => Array.from({ length: n }, (_, i) => ({ agentId: 'a', reasoning: `${prefix}${i}` }))

t.test('503 and 429 with Retry-After: the same body under the same key, not before Retry-After', async (t) => {
  const up = await upstream(t, (_req, res, g, n) => {
    if (n === 1) res.writeHead(503, { 'retry-after': '1', 'content-type': 'application/json' }).end('{"error":"unavailable","reason":"ingest_log_full"}')
    else if (n === 2) res.writeHead(429, { 'retry-after': '1', 'content-type': 'application/json' }).end('{"error":"rate_limited"}')
    else accept(res, g)
  })
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, ...fast, onError: () => {} })
  for (const e of events(3)) client.track(e)
  await client.flush()
  t.equal(up.got.length, 3)
  t.equal(new Set(up.got.map((g) => g.key)).size, 1, 'one Idempotency-Key across the retries')
  t.equal(new Set(up.got.map((g) => g.body)).size, 1, 'the same bytes each time')
  t.ok(up.got[1]!.at - up.got[0]!.at >= 1000, `the retry after the 503 waited for Retry-After (${up.got[1]!.at - up.got[0]!.at} ms)`)
  t.ok(up.got[2]!.at - up.got[1]!.at >= 1000, `so did the one after the 429 (${up.got[2]!.at - up.got[1]!.at} ms)`)
  t.match(client.stats(), { sent: 3, retries: 2, queued: 0, inFlight: 0 })
})

t.test('a reset connection and a 502 are retried under the same key', async (t) => {
  const up = await upstream(t, (req, res, g, n) => {
    if (n === 1) req.socket.destroy()
    else if (n === 2) res.writeHead(502).end()
    else accept(res, g)
  })
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, ...fast, onError: () => {} })
  for (const e of events(5)) client.track(e)
  await client.flush()
  t.equal(up.got.length, 3)
  t.equal(new Set(up.got.map((g) => g.key)).size, 1)
  t.match(client.stats(), { sent: 5, retries: 2 })
})

t.test('events refused inside a 207 are dropped with their reason and never sent again; 429s in it are sent again under a new key', async (t) => {
  const up = await upstream(t, (_req, res, g, n) => {
    if (n === 1) accept(res, g, (i) => (i === 1 ? 400 : i >= 3 ? 429 : 202), { 'retry-after': '1' })
    else accept(res, g)
  })
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, ...fast, onError: (e) => errors.push(e) })
  for (const e of events(5)) client.track(e)
  await client.flush()
  t.equal(up.got.length, 2)
  t.same(up.got[1]!.events.map((e) => e.reasoning), ['e3', 'e4'], 'only the rate-limited events went again')
  t.not(up.got[1]!.key, up.got[0]!.key, 'under a new key (a replay of the first would answer 429 again)')
  t.ok(up.got[1]!.at - up.got[0]!.at >= 1000, 'after Retry-After')
  t.match(client.stats(), { sent: 4, limited: 2, dropped: { rejected: 1 }, retries: 0 })
  t.match(errors, [{ reason: 'rejected', count: 1, details: { status: 400, error: 'validation_failed' } }])
})

t.test('a 413 splits the batch; a whole-batch 401 drops it, never retried', async (t) => {
  const up = await upstream(t, (_req, res, g) => {
    if (g.events.length > 2) res.writeHead(413, { 'content-type': 'application/json' }).end('{"error":"payload_too_large"}')
    else if (g.events.some((e) => e.reasoning === 'x')) res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized","reason":"invalid_key"}')
    else accept(res, g)
  })
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, ...fast, onError: () => {} })
  for (const e of events(8)) client.track(e)
  await client.flush()
  t.match(client.stats(), { sent: 8, dropped: { too_large: 0 } })
  t.same(up.got.filter((g) => g.events.length <= 2).flatMap((g) => g.events.map((e) => e.reasoning)), events(8).map((e) => e.reasoning), 'every event once, in order')
  client.track({ agentId: 'a', reasoning: 'x' })
  await client.flush()
  t.match(client.stats(), { dropped: { refused: 1 }, retries: 0 })
})

t.test('retries give up after maxRetries, counted', async (t) => {
  const up = await upstream(t, (_req, res) => { res.writeHead(503).end() })
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, ...fast, maxRetries: 2, onError: () => {} })
  for (const e of events(4)) client.track(e)
  await client.flush()
  t.equal(up.got.length, 3, 'the first try and two retries')
  t.match(client.stats(), { sent: 0, retries: 2, dropped: { retries_exhausted: 4 } })
})

t.test('a full queue drops the oldest events, counted; the newest are sent', async (t) => {
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, maxQueue: 100, onError: (e) => errors.push(e) })
  for (const e of events(250)) client.track(e)
  t.match(client.stats(), { queued: 100, dropped: { queue_full: 150 } })
  t.equal(errors.filter((e) => e.reason === 'queue_full').length, 150)
  await client.shutdown()
  const sent = up.got.flatMap((g) => g.events.map((e) => e.reasoning))
  t.same(sent, events(250).slice(150).map((e) => e.reasoning))
  t.match(client.stats(), { sent: 100, queued: 0 })
})

t.test('shutdown() against a service that never answers gives up at its timeout, counted', async (t) => {
  const up = await upstream(t, () => { /* never answers */ })
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, flushIntervalMs: 10, onError: () => {} })
  for (const e of events(30)) client.track(e)
  await client.shutdown(300)
  t.match(client.stats(), { sent: 0, queued: 0, inFlight: 0, dropped: { shutdown: 30 } })
  t.notOk(client.track({ agentId: 'a' }), 'a closed client takes nothing')
  t.match(client.stats(), { dropped: { closed: 1 } })
})

t.test('track() refuses what the service would refuse, reports it and never throws', async (t) => {
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, onError: (e) => errors.push(e) })
  const cyclic: Record<string, unknown> = { agentId: 'a' }
  cyclic.metadata = { self: cyclic }
  const bad: unknown[] = [
    null, 'text', [], { agentId: 'a', durationMs: '10' }, { agentId: 'a', colour: 'red' }, { agentId: 'a', type: 'thought' },
    { agentId: 'a', timestamp: '2026-02-30T00:00:00Z' }, { agentId: 'a', reasoning: '\ud800' }, { agentId: 'a', durationMs: Number.NaN },
    { agentId: 'a', amount: { value: 1 } }, { agentId: 'a', metadata: { n: 2n } }, cyclic, { agentId: 'x'.repeat(121) },
    { agentId: 'a', metadata: { tokensBreakdown: { output: -1 } } }, { agentId: 'a', metadata: { big: 2 ** 60 } },
  ]
  bad.forEach((e, i) => t.equal(client.track(e as never), false, `bad event ${i} refused`))
  t.match(client.stats(), { queued: 0, dropped: { invalid: bad.length } })
  t.match(errors[3], { reason: 'invalid', details: [{ path: ['durationMs'], message: 'must be integer' }] })
  t.match(errors[4], { details: [{ path: ['colour'], message: 'is not an allowed key' }] })
  t.ok(client.track({ agentId: 'a', timestamp: '2026-01-01 10:00:00', metadata: { when: new Date(0), skip: undefined } }), 'dates and undefined as JSON.stringify writes them')
  await client.shutdown()
  t.equal(up.got[0]!.events.length, 1)
})

t.test('the constructor throws a clear TypeError for a missing or unusable apiKey or baseUrl', async (t) => {
  const ok = { apiKey: 'vk_test', baseUrl: 'https://telemetry.example.com/base/' }
  t.ok(new AgentTelemetry(ok), 'an https URL with a path prefix')
  t.ok(new AgentTelemetry({ ...ok, baseUrl: 'http://127.0.0.1:3000' }), 'an http URL with a port')
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...ok, apiKey: undefined }, /^apiKey is required/], [{ ...ok, apiKey: '' }, /^apiKey is required/],
    [{ ...ok, apiKey: 42 }, /^apiKey must be a string, not number/], [{ ...ok, apiKey: 'vk_a\nb' }, /^apiKey must not contain spaces or line breaks/],
    [{ ...ok, baseUrl: undefined }, /^baseUrl is required/], [{ ...ok, baseUrl: 'not a url' }, /^baseUrl must be an absolute http\(s\) URL .*not a URL/],
    [{ ...ok, baseUrl: 'telemetry.example.com' }, /not a URL/], [{ ...ok, baseUrl: '/v1' }, /not a URL/],
    [{ ...ok, baseUrl: 'ftp://telemetry.example.com' }, /not a ftp: URL/], [{ ...ok, baseUrl: { href: 'https://x' } }, /must be a string .*not object/],
    [{ ...ok, baseUrl: 'https://me:pw@telemetry.example.com' }, /must not hold a user or password/],
    [{ ...ok, baseUrl: 'https://telemetry.example.com/?x=1' }, /must not hold a query/],
  ]
  for (const [options, message] of cases) {
    t.throws(() => new AgentTelemetry(options as never), { name: 'TypeError', message }, JSON.stringify(options))
  }
  try {
    new AgentTelemetry({ ...ok, baseUrl: 'vk_secret key' }) // eslint-disable-line no-new
    t.fail('a key given as baseUrl is refused')
  } catch (err) {
    t.notMatch((err as Error).message, 'vk_secret', 'the value given is not echoed')
  }
})

t.test('the constructor throws a TypeError naming a number option that is not a number, not whole or out of range', async (t) => {
  const ok = { apiKey: 'vk_test', baseUrl: 'https://telemetry.example.com' }
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ flushAt: '100' }, /^flushAt must be an integer from 1 to 500 \(got string\)$/],
    [{ flushAt: 1000 }, /^flushAt must be an integer from 1 to 500 \(got 1000\)$/],
    [{ flushAt: 0 }, /^flushAt must be/], [{ flushAt: 2.5 }, /^flushAt must be an integer/],
    [{ maxInFlight: NaN }, /^maxInFlight must be an integer from 1 to 16 \(got NaN\)$/], [{ maxInFlight: 17 }, /^maxInFlight/],
    [{ maxQueue: Infinity }, /^maxQueue must be/], [{ maxQueueBytes: 100 }, /^maxQueueBytes must be an integer from 1024/],
    [{ maxBatchBytes: 6 * 1024 * 1024 }, /^maxBatchBytes must be/], [{ maxRetries: -1 }, /^maxRetries must be/],
    [{ flushIntervalMs: -1 }, /^flushIntervalMs must be a number from 0/], [{ retryBaseMs: 0 }, /^retryBaseMs/],
    [{ retryMaxMs: null }, /^retryMaxMs must be a number .*\(got object\)$/], [{ requestTimeoutMs: 2 ** 31 }, /^requestTimeoutMs/],
  ]
  for (const [bad, message] of cases) {
    t.throws(() => new AgentTelemetry({ ...ok, ...bad } as never), { name: 'TypeError', message }, JSON.stringify(bad))
  }
  const edges = { flushAt: 500, maxInFlight: 16, maxQueue: 1, maxQueueBytes: 1024, maxBatchBytes: 1024, maxRetries: 0, flushIntervalMs: 0, retryBaseMs: 1.5, retryMaxMs: 1, requestTimeoutMs: 2 ** 31 - 1 }
  t.ok(new AgentTelemetry({ ...ok, ...edges }), 'the ends of every range are taken')
})

t.test('an event larger than a request may be is refused in track(), before scrubbing or serialising it', async (t) => {
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, maxBatchBytes: 4096, onError: () => {} })
  t.notOk(client.track({ agentId: 'a', reasoning: 'x'.repeat(5000) }), 'a string alone over the bound')
  let read = 0
  const part = { toJSON: () => { read++; return 'y'.repeat(50) } }
  t.notOk(client.track({ agentId: 'a', metadata: { parts: Array.from({ length: 100 }, () => part) } }), 'many strings over it together')
  t.ok(read < 100, `the event was not read past the bound (${read} of 100 parts)`)
  t.ok(client.track({ agentId: 'a', reasoning: 'x'.repeat(3000) }), 'under it')
  t.match(client.stats(), { queued: 1, dropped: { too_large: 2, invalid: 0 } })
  await client.shutdown()
})

t.test('events left behind a full batch still leave within flushIntervalMs, with no track() after them', async (t) => {
  let release: () => void = () => {}
  const held = new Promise<void>((resolve) => { release = resolve })
  const up = await upstream(t, (_req, res, g, n) => {
    if (n === 1) void held.then(() => accept(res, g))
    else accept(res, g)
  })
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, flushAt: 10, flushIntervalMs: 20, onError: () => {} })
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  for (const e of events(10, 'a')) client.track(e)
  while (up.got.length === 0) await sleep(5)
  for (const e of events(15, 'b')) client.track(e)
  await sleep(200) // the interval timer fires while the first request is held
  for (const e of events(494, 'c')) client.track(e) // the queue is over flushAt: no timer is started
  release()
  // 500 go in one request; the 9 behind them must not wait for a track() or flush() that never comes.
  const deadline = Date.now() + 10_000
  while (client.stats().sent < 519 && Date.now() < deadline) await sleep(20)
  t.equal(client.stats().sent, 519)
  t.same(up.got.map((g) => g.events.length), [10, 500, 9])
})

t.test('maxInFlight: batches go side by side, each under its own key kept across its retries; every event once', async (t) => {
  let release: () => void = () => {}
  const allIn = new Promise<void>((resolve) => { release = resolve })
  let open = 0
  let most = 0
  const up = await upstream(t, (_req, res, g, n) => {
    if (n === 1 || n > 4) return accept(res, g)
    open++
    most = Math.max(most, open)
    if (n === 4) release()
    void allIn.then(() => {
      open--
      // The first of the three fails: it is retried under its key while the others are answered.
      if (n === 2) res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"unavailable"}')
      else accept(res, g)
    })
  })
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, ...fast, flushIntervalMs: 60_000, flushAt: 10, maxInFlight: 3, onError: () => {} })
  for (const e of events(40)) client.track(e)
  // 40 queued at once: the first loop takes them all (a batch carries up to 500), so none is left for a second.
  await client.flush()
  t.equal(up.got.length, 1, 'one batch for what was queued at once')
  for (const e of events(30, 'b')) {
    client.track(e)
    // Each track() lets the loops run, so each batch of flushAt goes as soon as it is queued.
    await new Promise((resolve) => setImmediate(resolve))
  }
  t.equal(client.stats().inFlight, 30, 'three batches under way together')
  await client.flush()
  t.equal(most, 3, 'three requests were open at once')
  const second = up.got.slice(1)
  t.same(second.map((g) => g.events.length), [10, 10, 10, 10], 'three batches of flushAt and one retry')
  const byKey = new Map<string, Set<string>>()
  for (const g of second) byKey.set(g.key!, (byKey.get(g.key!) ?? new Set()).add(g.body))
  t.equal(byKey.size, 3, 'a key per batch')
  t.ok([...byKey.values()].every((bodies) => bodies.size === 1), 'the retry sent the same body under the same key')
  const delivered = up.got.filter((_g, i) => i !== 1).flatMap((g) => g.events.map((e) => e.reasoning))
  t.same([...delivered].sort(), [...events(40), ...events(30, 'b')].map((e) => e.reasoning).sort(), 'every event acknowledged once')
  t.match(client.stats(), { sent: 70, retries: 1, queued: 0, inFlight: 0 })
})

t.test('maxInFlight: shutdown() at its timeout gives up on every batch under way, counted once', async (t) => {
  const up = await upstream(t, () => { /* never answers */ })
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, flushAt: 5, maxInFlight: 4, onError: () => {} })
  for (const e of events(20)) {
    client.track(e)
    await new Promise((resolve) => setImmediate(resolve))
  }
  for (const deadline = Date.now() + 10_000; up.got.length < 4 && Date.now() < deadline;) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(up.got.length, 4, 'four requests under way')
  t.match(client.stats(), { inFlight: 20, queued: 0 })
  await client.shutdown(300)
  t.match(client.stats(), { sent: 0, queued: 0, inFlight: 0, dropped: { shutdown: 20 } })
})

t.test('the wait before a retry: exponential with equal jitter; a Retry-After plus up to a fifth of it, capped at retryMaxMs', async (t) => {
  const { backoffMs } = await import('../../client/src/delivery.ts')
  t.equal(backoffMs(1, 500, 30_000, undefined, () => 0), 250, 'half of the first delay, fixed')
  t.equal(backoffMs(3, 500, 30_000, undefined, () => 1), 2000, 'up to the whole of the third')
  t.equal(backoffMs(1, 500, 30_000, 3000, () => 0), 3000, 'never less than Retry-After')
  t.equal(backoffMs(1, 500, 30_000, 3000, () => 1), 3600, 'and up to a fifth more, so a fleet spreads out')
  t.equal(backoffMs(1, 500, 30_000, 120_000, () => 0.5), 33_000, 'a Retry-After over retryMaxMs counts as retryMaxMs')
  t.equal(backoffMs(10, 500, 30_000, 1000, () => 1), 30_000, 'the exponential delay wins when it is longer')
})
