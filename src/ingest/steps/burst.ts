import { burstLimit } from '../../domain/tiers.ts'
import { rateLimited } from '../../http-error.ts'
import type { Admission } from '../../storage/rate-limiter.ts'
import type { IngestionStep, IngestItem, IngestVerdict } from './ingest-run.ts'

/** The burst limiter the `burst` step takes tokens from (src/storage/rate-limiter.ts, or leased from it). */
export interface BurstLimiter {
  take(bucket: string, limit: number, n: number): Promise<Admission>
  /** Admits all n from what this instance holds, without waiting, or answers undefined (then take). */
  tryTake?(bucket: string, limit: number, n: number): Admission | undefined
}

/**
 * `burst`: the caller's user's limit (src/domain/tiers.ts), from tokens this instance holds when it
 * can (no promise), else leasing more. The first events of the request that fit go on; the others
 * are refused with 429 and the wait the limiter gave.
 */
export function burstStep (parts: { limiter: BurstLimiter }): IngestionStep {
  const { limiter } = parts
  return {
    name: 'burst',
    run: ({ caller }, items) => {
      const bucket = `user:${caller.userId}`
      const limit = burstLimit(caller)
      const held = limiter.tryTake?.(bucket, limit, items.length)
      if (held) return admit(items, held)
      return limiter.take(bucket, limit, items.length).then((admission) => admit(items, admission))
    },
  }
}

/** The first `admitted` items go on; the others are over the limit. */
function admit (items: IngestItem[], admission: Admission): IngestVerdict[] {
  return items.map((_, i): IngestVerdict => (i < admission.admitted ? undefined : { kind: 'rate_limited', error: rateLimited(admission.retryAfterMs / 1000) }))
}
