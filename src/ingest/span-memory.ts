import type { Result } from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { IncomingEvent } from '../domain/event-row.ts'
import { HttpError } from '../http-error.ts'
import type { BestEffortRedis } from './best-effort-redis.ts'

/**
 * Claims spans for one request, in one round trip. KEYS: one hash per (user, trace); ARGV: the
 * in-flight time, the window, then (index into KEYS, span id) pairs. A span's field holds 'd' once
 * it was accepted, or the instant (Redis' clock, ms) until which a request is storing it. Answers
 * this request's instant, then per span: 0 claimed now (the field holds that instant), 1 accepted
 * already, 2 being stored by another request. A claim older than its instant is stale (its request
 * died, or is slower than the in-flight time): taken over, with a later instant.
 */
const CLAIM = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = tostring(now + tonumber(ARGV[1]))
local states = { until_ms }
for i = 3, #ARGV, 2 do
  local key = KEYS[tonumber(ARGV[i])]
  local held = redis.call('HGET', key, ARGV[i + 1])
  if held == 'd' then
    states[#states + 1] = 1
  elseif held and tonumber(held) > now then
    states[#states + 1] = 2
  else
    redis.call('HSET', key, ARGV[i + 1], until_ms)
    states[#states + 1] = 0
  end
end
for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return states
`

/**
 * Settles the spans a request claimed. KEYS as for CLAIM; ARGV: the window, the instant of the
 * request's claim, then (index into KEYS, span id, '1' accepted or '0' not stored) triples. An
 * accepted span is remembered for the window; one not stored is forgotten, so that its retry is
 * stored, unless another request took it over meanwhile (the field no longer holds this request's
 * instant): that request's claim, or the span it stored, stays.
 */
const SETTLE = `
for i = 3, #ARGV, 3 do
  local key = KEYS[tonumber(ARGV[i])]
  if ARGV[i + 2] == '1' then
    redis.call('HSET', key, ARGV[i + 1], 'd')
  elseif redis.call('HGET', key, ARGV[i + 1]) == ARGV[2] then
    redis.call('HDEL', key, ARGV[i + 1])
  end
end
-- A hash whose last field was deleted is gone: PEXPIRE then does nothing.
for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
return 0
`

declare module 'ioredis' {
  interface RedisCommander<Context> {
    spanMemoryClaim(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<[string, ...number[]], Context>
    spanMemorySettle(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Result<number, Context>
  }
}

const CLAIMED = 0
const ACCEPTED = 1

export interface SpanMemoryOptions {
  /** REDIS_PREFIX. */
  prefix: string
  /** How long an accepted span is recognised (IDEMPOTENCY_WINDOW_HOURS). */
  windowMs: number
  /** How long a claim holds off other requests for the same span, unless settled sooner. */
  inFlightMs: number
  /** Most spans this instance remembers in its own memory. */
  localMax?: number
}

/** One span of a request's claim: its hash in Redis and its field there. */
interface SpanRef { trace: string; span: string }

/** What `claim` found: the events to store, and how many were accepted before (answered as accepted, not stored again). */
interface SpanClaim {
  userId: string
  fresh: IncomingEvent[]
  /** The span of each fresh event, in the same order (null: a span without ids, never remembered). */
  spans: (SpanRef | null)[]
  repeated: number
  /** The instant (Redis' clock) its claims in Redis hold until, null when Redis did not take them: then nothing is settled there either. */
  claimedUntil: string | null
}

/**
 * Which OTLP spans were accepted already, by any instance, within the window: a span is (user, trace
 * id, span id). An exporter re-sends an export whose answer was lost or late, and behind a load
 * balancer the re-send usually reaches another instance, or one that restarted meanwhile.
 *
 * In Redis, shared by every instance: one hash per (user, trace) whose fields are its span ids (a
 * trace's spans share one key: about 40 bytes a span instead of 230 for a key per span), living for
 * the window after its last claim. A request claims its spans before it stores them (one script
 * call for the whole export) and settles them once answered: accepted spans are kept for the
 * window, the others forgotten so that their retry is stored (unless a retry took them over
 * meanwhile: see SETTLE). A span claimed by a request still under way is not answered as accepted,
 * since that request may yet fail: the export is refused with 503 + Retry-After, and its retry
 * finds the span accepted or free.
 *
 * This instance also keeps the spans it accepted lately in its own memory (the last 200,000): a
 * re-send to the same instance is answered without Redis, and while Redis is out of reach (one
 * warning, see BestEffortRedis) re-sends to the same instance are still recognised; a re-send to
 * another instance is then stored again (at least once).
 */
export class SpanMemory {
  private readonly local: LRUCache<string, true>

  constructor (private readonly redis: BestEffortRedis, private readonly opts: SpanMemoryOptions) {
    this.local = new LRUCache({ max: opts.localMax ?? 200_000 })
    redis.redis.defineCommand('spanMemoryClaim', { lua: CLAIM })
    redis.redis.defineCommand('spanMemorySettle', { lua: SETTLE })
  }

  /**
   * Claims the spans of `events` for `userId` (whose spans they are among: a user's, or, for a key
   * bound to an agent, `<user>:ag:<agent id>`, so that such a key cannot claim another agent's span
   * ids first and have that agent's real spans answered as accepted and never stored): those
   * accepted before (or repeated within the request) are counted in `repeated`, the others are
   * handed back to be stored. Throws a 503 when another request is storing some of them.
   */
  async claim (userId: string, events: IncomingEvent[]): Promise<SpanClaim> {
    const claim: SpanClaim = { userId, fresh: [], spans: [], repeated: 0, claimedUntil: null }
    const seen = new Set<string>()
    const asked: { event: IncomingEvent; span: SpanRef }[] = []
    for (const event of events) {
      const span = spanOf(this.opts.prefix, userId, event)
      if (span === null) {
        claim.fresh.push(event)
        claim.spans.push(null)
        continue
      }
      const local = `${span.trace}\u0000${span.span}`
      if (seen.has(local) || this.local.has(local)) {
        claim.repeated++
        continue
      }
      seen.add(local)
      asked.push({ event, span })
    }
    if (asked.length === 0) return claim
    const answer = await this.redis.run((redis) => redis.spanMemoryClaim(...scriptArgs([this.opts.inFlightMs, this.opts.windowMs], asked.map((a) => a.span))))
    claim.claimedUntil = answer?.[0] ?? null
    let busy = false
    asked.forEach(({ event, span }, i) => {
      const state = answer?.[i + 1] ?? CLAIMED
      if (state === CLAIMED) {
        claim.fresh.push(event)
        claim.spans.push(span)
      } else if (state === ACCEPTED) {
        claim.repeated++
      } else {
        busy = true
      }
    })
    if (busy) {
      await this.settle(claim, null)
      throw spansInFlight()
    }
    return claim
  }

  /**
   * Settles a claim before its request is answered (so that a re-send after the answer finds its
   * spans accepted, or free): `accepted[i]` says whether fresh event i was stored; null when none
   * was (the request failed). Never throws.
   */
  async settle (claim: SpanClaim, accepted: boolean[] | null): Promise<void> {
    const spans: SpanRef[] = []
    const flags: string[] = []
    claim.spans.forEach((span, i) => {
      if (span === null) return
      const stored = accepted?.[i] === true
      if (stored) this.local.set(`${span.trace}\u0000${span.span}`, true)
      spans.push(span)
      flags.push(stored ? '1' : '0')
    })
    const until = claim.claimedUntil
    if (until === null || spans.length === 0) return
    await this.redis.run((redis) => redis.spanMemorySettle(...scriptArgs([this.opts.windowMs, until], spans, flags)))
  }
}

/** The span of an event mapped from OTLP: its (user, trace) hash and its field; null without ids. */
function spanOf (prefix: string, userId: string, event: IncomingEvent): SpanRef | null {
  const { traceId, spanId } = event.metadata ?? {}
  return typeof traceId === 'string' && typeof spanId === 'string' ? { trace: `${prefix}spans:${userId}:${traceId}`, span: spanId } : null
}

/**
 * A script's keys and arguments: the number of distinct hashes, the hashes, `head`, then per span
 * the index of its hash (from 1, as Lua counts), its id and, when given, its flag.
 */
function scriptArgs (head: (string | number)[], spans: SpanRef[], flags?: string[]): [number, ...(string | number)[]] {
  const index = new Map<string, number>()
  const tail: (string | number)[] = []
  spans.forEach((span, i) => {
    let at = index.get(span.trace)
    if (at === undefined) index.set(span.trace, (at = index.size + 1))
    tail.push(at, span.span)
    if (flags) tail.push(flags[i]!)
  })
  return [index.size, ...index.keys(), ...head, ...tail]
}

/** The answer to an export some of whose spans another request is storing: retried by the exporter. */
function spansInFlight (): HttpError {
  return new HttpError(503, 'unavailable', {
    reason: 'spans_in_flight',
    message: 'some spans of this export are being stored by an earlier request; retry after Retry-After',
  }, { 'retry-after': '1' })
}
