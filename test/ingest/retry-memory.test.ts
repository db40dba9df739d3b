import t from 'tap'
import { Redis } from 'ioredis'
import { deflateRawSync } from 'node:zlib'
import { BestEffortRedis, type OutageLog } from '../../src/ingest/best-effort-redis.ts'
import { SpanMemory, type SpanMemoryOptions } from '../../src/ingest/span-memory.ts'
import { IdempotencyStore, type Begun } from '../../src/ingest/idempotency.ts'
import type { IncomingEvent } from '../../src/domain/event-row.ts'
import { HttpError } from '../../src/http-error.ts'
import { randomId } from '../helpers/env.ts'

const REDIS_URL = 'redis://127.0.0.1:6379'
const WINDOW_MS = 24 * 3_600_000

/** A log that keeps what it was told. */
function recordingLog (): OutageLog & { warnings: string[]; infos: string[] } {
  const log = { warnings: [] as string[], infos: [] as string[], warn: (_o: object, msg: string) => log.warnings.push(msg), info: (_o: object, msg: string) => log.infos.push(msg) }
  return log
}

/** One instance's Redis connection (ready), torn down with the test. */
async function connection (t: { teardown(fn: () => unknown): void }): Promise<Redis> {
  const redis = new Redis(REDIS_URL, { enableAutoPipelining: true })
  await redis.ping()
  t.teardown(() => redis.disconnect())
  return redis
}

/** A connection to a port nothing listens on: every command is refused, as when Redis is down. */
function deadConnection (t: { teardown(fn: () => unknown): void }): Redis {
  const dead = new Redis('redis://127.0.0.1:1', { lazyConnect: true, maxRetriesPerRequest: 1 })
  dead.on('error', () => {})
  dead.connect().catch(() => {})
  t.teardown(() => dead.disconnect())
  return dead
}

/** What one instance remembers of spans, on its own connection, under `prefix`. */
async function spanMemory (t: { teardown(fn: () => unknown): void }, prefix: string, opts: Partial<SpanMemoryOptions> = {}): Promise<SpanMemory> {
  return new SpanMemory(new BestEffortRedis(await connection(t), recordingLog()), { prefix, windowMs: WINDOW_MS, inFlightMs: 10_000, ...opts })
}

const span = (traceId: string, spanId: string): IncomingEvent => ({ agentId: 'a', metadata: { traceId, spanId } })

/** The token of a request that `begin` let run and recorded (what `finish` is given back). */
function tokenOf (begun: Begun): string {
  if (begun.kind !== 'run' || !begun.recorded) throw new Error(`not a recorded run: ${JSON.stringify(begun)}`)
  return begun.token
}

t.test('a span accepted by one instance is recognised by another and after a restart; one refused is stored on retry', async (t) => {
  const prefix = `test:${randomId()}:`
  const user = randomId('user-')
  const [a, b] = [await spanMemory(t, prefix), await spanMemory(t, prefix)]
  const spans = [span('t1', 's1'), span('t1', 's2'), span('t2', 's3')]

  const first = await a.claim(user, spans)
  t.same(first.fresh, spans, 'every span is new')
  t.equal(first.repeated, 0)
  const busy = await b.claim(user, spans).catch((err: unknown) => err)
  t.ok(busy instanceof HttpError, 'spans another request is storing are not answered as accepted')
  t.match(busy, { statusCode: 503, extra: { reason: 'spans_in_flight' }, headers: { 'retry-after': '1' } })

  await a.settle(first, [true, false, true])
  const retry = await b.claim(user, spans)
  t.same(retry.fresh, [spans[1]], 'only the span the first request did not store is stored by the retry')
  t.equal(retry.repeated, 2)
  await b.settle(retry, [true])

  const restarted = await spanMemory(t, prefix)
  const late = await restarted.claim(user, spans)
  t.same(late.fresh, [], 'a restarted instance recognises all three')
  t.equal(late.repeated, 3)
  t.same((await restarted.claim(randomId('other-'), spans)).fresh, spans, 'the same ids from another user are that user\'s own spans')

  const redis = await connection(t)
  t.same(await redis.hgetall(`${prefix}spans:${user}:t1`), { s1: 'd', s2: 'd' }, 'one hash per trace, a field per span')
  const ttl = await redis.pttl(`${prefix}spans:${user}:t1`)
  t.ok(ttl > WINDOW_MS - 60_000 && ttl <= WINDOW_MS, `the trace is kept for the window (${ttl} ms left)`)
})

t.test('the same span twice in one export is stored once; a claim whose request died is taken over', async (t) => {
  const prefix = `test:${randomId()}:`
  const user = randomId('user-')
  const a = await spanMemory(t, prefix, { inFlightMs: 50 })
  const twice = await a.claim(user, [span('t', 's'), span('t', 's'), span('t', 'other')])
  t.equal(twice.fresh.length, 2)
  t.equal(twice.repeated, 1)
  // Never settled, as when its instance crashed: once its in-flight time is over, a retry stores it.
  await new Promise((resolve) => setTimeout(resolve, 120))
  const retry = await (await spanMemory(t, prefix)).claim(user, [span('t', 's')])
  t.equal(retry.fresh.length, 1, 'the stale claim is taken over')
})

t.test('a request that outlived its claim and then failed forgets neither what the retry stored nor what it holds', async (t) => {
  const prefix = `test:${randomId()}:`
  const user = randomId('user-')
  const slow = await spanMemory(t, prefix, { inFlightMs: 50 })
  const [other, later] = [await spanMemory(t, prefix), await spanMemory(t, prefix)]
  const [stored, held] = [span('t', 'stored'), span('t', 'held')]
  const first = await slow.claim(user, [stored, held])
  // The first request takes longer than its claim (a slow store): retries take its spans over.
  await new Promise((resolve) => setTimeout(resolve, 120))
  const retry = await other.claim(user, [stored])
  t.same(retry.fresh, [stored], 'the stale claim is taken over')
  await other.settle(retry, [true])
  const holding = await other.claim(user, [held])
  t.same(holding.fresh, [held], 'and this one, still under way')

  await slow.settle(first, null)
  const again = await later.claim(user, [stored])
  t.equal(again.repeated, 1, 'the span the retry stored is still recognised')
  t.same(again.fresh, [])
  await t.rejects(later.claim(user, [held]), { statusCode: 503, code: 'unavailable', extra: { reason: 'spans_in_flight' } }, 'the span the retry is storing is still held')
})

t.test('an Idempotency-Key: run once, 409 while in flight, 422 for another request, the answer replayed, a failure forgotten', async (t) => {
  const prefix = `test:${randomId()}:`
  const user = randomId('user-')
  const store = (redis: Redis) => new IdempotencyStore(new BestEffortRedis(redis, recordingLog()), { prefix, windowMs: WINDOW_MS, inFlightMs: 10_000 })
  const [a, b] = [store(await connection(t)), store(await connection(t))]

  const k1 = await a.begin(user, 'k1', 'body-1')
  t.match(k1, { kind: 'run', recorded: true, token: String })
  await t.rejects(b.begin(user, 'k1', 'body-1'), { statusCode: 409, code: 'conflict', extra: { reason: 'idempotency_key_in_flight' } })
  await t.rejects(b.begin(user, 'k1', 'body-2'), { statusCode: 422, code: 'idempotency_key_reused' })
  t.match(await b.begin(randomId('other-'), 'k1', 'body-2'), { kind: 'run', recorded: true }, 'keys are per user')

  const results = Array.from({ length: 500 }, (_, i) => ({ status: 202, id: `evt_01K00000000000000000${String(i).padStart(4, '0')}`, accepted: true }))
  const body = JSON.stringify({ results })
  await a.finish(user, 'k1', 'body-1', tokenOf(k1), { status: 207, body, retryAfter: '3' })
  t.same(await b.begin(user, 'k1', 'body-1'), { kind: 'replay', status: 207, retryAfter: '3', body }, 'another instance replays the answer, byte for byte, and its Retry-After')
  await t.rejects(b.begin(user, 'k1', 'body-2'), { statusCode: 422, code: 'idempotency_key_reused' }, 'a done key with another body is still refused')
  const stored = await (await connection(t)).getBuffer(`${prefix}idem:${user}:k1`)
  t.ok(stored!.length < body.length / 4, `a batch's answer is kept deflated (${stored!.length} of ${body.length} bytes)`)

  const k2 = await a.begin(user, 'k2', 'body-3')
  t.match(k2, { kind: 'run', recorded: true })
  await a.finish(user, 'k2', 'body-3', tokenOf(k2), { status: 503, body: '{"error":"unavailable"}', retryAfter: undefined })
  const k2Retry = await b.begin(user, 'k2', 'body-3')
  t.match(k2Retry, { kind: 'run', recorded: true }, 'a 503 stored nothing: its retry runs')
  await b.finish(user, 'k2', 'body-3', tokenOf(k2Retry), { status: 429, body: '{"error":"rate_limited"}', retryAfter: undefined })
  t.match(await a.begin(user, 'k2', 'body-3'), { kind: 'run', recorded: true }, 'nor does a 429 poison the key')

  // A record of a release before Retry-After was kept (its header has no fourth field) still replays.
  await (await connection(t)).set(`${prefix}idem:${user}:older`, Buffer.concat([Buffer.from('d 202 body-4\n'), deflateRawSync('{"id":"older"}')]))
  t.same(await b.begin(user, 'older', 'body-4'), { kind: 'replay', status: 202, retryAfter: undefined, body: '{"id":"older"}' }, 'an older record replays')
})

t.test('a request that outlived its hold on an Idempotency-Key frees neither the hold nor the answer of the retry that took it', async (t) => {
  const prefix = `test:${randomId()}:`
  const user = randomId('user-')
  const store = (redis: Redis, inFlightMs: number) => new IdempotencyStore(new BestEffortRedis(redis, recordingLog()), { prefix, windowMs: WINDOW_MS, inFlightMs })
  const [slow, other] = [store(await connection(t), 50), store(await connection(t), 10_000)]
  const keys = ['done', 'held', 'replaced', 'overtaken', 'late']
  const first = await Promise.all(keys.map((key) => slow.begin(user, key, 'body')))
  // The first requests take longer than their hold (a slow store): their retries run meanwhile.
  await new Promise((resolve) => setTimeout(resolve, 120))
  const retries = await Promise.all(keys.slice(0, 4).map((key) => other.begin(user, key, 'body')))
  t.match(retries, retries.map(() => ({ kind: 'run', recorded: true })), 'the keys are free once the first holds are over')
  await other.finish(user, 'done', 'body', tokenOf(retries[0]!), { status: 202, body: '{"id":"retry"}', retryAfter: undefined })
  await other.finish(user, 'replaced', 'body', tokenOf(retries[2]!), { status: 202, body: '{"id":"retry"}', retryAfter: undefined })

  await slow.finish(user, 'done', 'body', tokenOf(first[0]!), { status: 503, body: '{"error":"unavailable"}', retryAfter: undefined })
  t.same(await other.begin(user, 'done', 'body'), { kind: 'replay', status: 202, body: '{"id":"retry"}' }, 'the retry\'s answer is still replayed')
  await slow.finish(user, 'held', 'body', tokenOf(first[1]!), { status: 503, body: '{"error":"unavailable"}', retryAfter: undefined })
  await t.rejects(other.begin(user, 'held', 'body'), { statusCode: 409, code: 'conflict', extra: { reason: 'idempotency_key_in_flight' } }, 'the retry under way still holds its key')
  await slow.finish(user, 'replaced', 'body', tokenOf(first[2]!), { status: 202, body: '{"id":"first"}', retryAfter: undefined })
  t.same(await other.begin(user, 'replaced', 'body'), { kind: 'replay', status: 202, body: '{"id":"retry"}' }, 'the answer replayed is the one recorded first')

  await slow.finish(user, 'overtaken', 'body', tokenOf(first[3]!), { status: 202, body: '{"id":"first"}', retryAfter: undefined })
  await other.finish(user, 'overtaken', 'body', tokenOf(retries[3]!), { status: 503, body: '{"error":"unavailable"}', retryAfter: undefined })
  t.same(await other.begin(user, 'overtaken', 'body'), { kind: 'replay', status: 202, body: '{"id":"first"}' }, 'an answer recorded while a retry runs stays, whatever the retry answers')
  await slow.finish(user, 'late', 'body', tokenOf(first[4]!), { status: 202, body: '{"id":"late"}', retryAfter: undefined })
  t.same(await other.begin(user, 'late', 'body'), { kind: 'replay', status: 202, body: '{"id":"late"}' }, 'a late answer is recorded when no retry took its key')
})

t.test('with Redis down both memories let requests run, and warn once for the outage', async (t) => {
  const log = recordingLog()
  const redis = new BestEffortRedis(deadConnection(t), log)
  const spans = new SpanMemory(redis, { prefix: 'test:', windowMs: WINDOW_MS, inFlightMs: 10_000 })
  const keys = new IdempotencyStore(redis, { prefix: 'test:', windowMs: WINDOW_MS, inFlightMs: 10_000 })
  const events = [span('t', 's1'), span('t', 's2')]

  const first = await spans.claim('u', events)
  t.same(first.fresh, events, 'spans are stored without Redis')
  await spans.settle(first, [true, true])
  t.equal((await spans.claim('u', events)).repeated, 2, 'a re-send to the same instance is still recognised from its own memory')
  for (let i = 0; i < 3; i++) t.same(await keys.begin('u', 'k', 'body'), { kind: 'run', recorded: false }, 'a keyed request runs unrecorded')
  await keys.finish('u', 'k', 'body', 'token', { status: 202, body: '{}', retryAfter: undefined })
  t.same(log.warnings, [log.warnings[0]], 'one warning for the whole outage')
  t.match(log.warnings[0], /Redis unreachable.*at least once/)
})

t.test('Redis back: one line says so, and retries are recognised again', async (t) => {
  const log = recordingLog()
  const connected = await connection(t)
  let now = 1_000_000
  const redis = new BestEffortRedis(connected, log, () => now)
  const keys = new IdempotencyStore(redis, { prefix: `test:${randomId()}:`, windowMs: WINDOW_MS, inFlightMs: 10_000 })
  connected.disconnect()
  t.same(await keys.begin('u', 'k', 'body'), { kind: 'run', recorded: false })
  await connected.connect()
  // After a failure Redis is left alone for a second, even once it answers again.
  now += 999
  t.same(await keys.begin('u', 'k', 'body'), { kind: 'run', recorded: false }, 'still left alone at 999 ms')
  now += 1
  t.match(await keys.begin('u', 'k', 'body'), { kind: 'run', recorded: true })
  t.equal(log.warnings.length, 1)
  t.same(log.infos, ['Redis answers again: retries are recognised again by every instance'])
})
