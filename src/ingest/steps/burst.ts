import { burstLimit } from '../../domain/tiers.ts'
import { rateLimited } from '../../http-error.ts'
import type { Admission } from '../../storage/rate-limiter.ts'
import type { Step, Verdict } from '../pipeline.ts'
import type { EventAck, IngestCaller, IngestItem, IngestRun } from './ingest-run.ts'

/** The burst limiter the `burst` step takes tokens from (src/storage/rate-limiter.ts, or leased from it). */
export interface BurstLimiter {
  take(bucket: string, limit: number, n: number): Promise<Admission>
  /** Admits all n from what this instance holds, without waiting, or answers undefined (then take). */
  tryTake?(bucket: string, limit: number, n: number): Admission | undefined
}

/**
 * `burst`: the caller's user's limit (src/domain/tiers.ts), from tokens this instance holds when it
 * can (no promise), else leasing more. The first events of the request that fit go on; the others
 * are refused with 429 and the wait the limiter gave. Events take from the bucket `user:<id>`; scores
 * have a bucket of their own (`bucketOf`), so that scoring never spends the events' limit.
 */
export function burstStep<A = EventAck> (parts: {
  limiter: BurstLimiter
  bucketOf?: (caller: IngestCaller) => string
  /** The bucket's limit a minute; by default the user's (src/domain/tiers.ts). */
  limitOf?: (caller: IngestCaller) => number
}): Step<IngestRun, IngestItem, A> {
  const { limiter } = parts
  const bucketOf = parts.bucketOf ?? ((caller: IngestCaller) => `user:${caller.userId}`)
  const limitOf = parts.limitOf ?? burstLimit
  return {
    name: 'burst',
    run: ({ caller }, items) => {
      const bucket = bucketOf(caller)
      const limit = limitOf(caller)
      const held = limiter.tryTake?.(bucket, limit, items.length)
      if (held) return admit<A>(items, held, limit)
      return limiter.take(bucket, limit, items.length).then((admission) => admit<A>(items, admission, limit))
    },
  }
}

/**
 * The first `admitted` items go on; the others are over the limit, each told when it would fit: the
 * first refused when one more unit does (the limiter's wait), each next one a unit's interval of the
 * limit later. A batch's Retry-After, the longest, is then the wait for all its refused items.
 */
function admit<A> (items: IngestItem[], admission: Admission, limitPerMinute: number): Verdict<A>[] {
  const interval = 60_000 / limitPerMinute
  return items.map((_, i): Verdict<A> => (i < admission.admitted
    ? undefined
    : { kind: 'rate_limited', error: rateLimited((admission.retryAfterMs + (i - admission.admitted) * interval) / 1000) }))
}
