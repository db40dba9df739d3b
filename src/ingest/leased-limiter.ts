import type { Admission, RateLimiter } from '../storage/rate-limiter.ts'

export interface LeaseOptions {
  /** Tokens held by an instance and not used within this time go back to Redis (ms). */
  leaseMs: number
  /** The most an instance leases beyond what a request needs, as a share of the limit. */
  maxShare: number
  /** The clock (ms) that leases and refusals are timed on; default Date.now. */
  now?: () => number
}

interface Pool {
  limit: number
  tokens: number
  leasedAt: number
  /** Units of requests waiting here for tokens, and units served since the last lease: how much to lease next. */
  waiting: number
  served: number
  /** Redis said no until then: refuse locally without asking again. */
  refusedUntil: number
  /** A background lease failed: none is tried before then. */
  prefetchPausedUntil: number
  leasing: Promise<void> | null
}

const PREFETCH_PAUSE_MS = 1000

/**
 * The ingestion burst limit without a Redis round trip per request: an instance leases tokens from
 * the shared GCRA bucket in slices sized by recent demand (at most `maxShare` of the limit beyond
 * what a request needs), serves requests from them, and gives unused tokens back after `leaseMs`.
 *
 * Tolerance: every admitted event was taken from the shared bucket, so the limit is never exceeded
 * across instances. An instance may hold up to maxShare × limit tokens for up to leaseMs, which other
 * instances cannot use meanwhile: with k instances, a caller can be refused up to
 * (k - 1) × maxShare × limit events early, for at most leaseMs. After Redis refuses, the instance
 * refuses locally until the retry time Redis gave.
 */
export class LeasedLimiter {
  private readonly pools = new Map<string, Pool>()
  private readonly sweeper: NodeJS.Timeout
  private readonly now: () => number

  constructor (private readonly shared: RateLimiter, private readonly opts: LeaseOptions) {
    this.now = opts.now ?? Date.now
    this.sweeper = setInterval(() => void this.returnStale(this.now() - opts.leaseMs), Math.max(50, opts.leaseMs / 2))
    this.sweeper.unref()
  }

  /**
   * Takes all n units from the tokens this instance holds for `bucket`, without waiting; undefined
   * when it holds too few (then `take`, which leases more).
   */
  tryTake (bucket: string, limit: number, n: number): Admission | undefined {
    const pool = this.pools.get(bucket)
    if (!pool || pool.limit !== limit || pool.tokens < n) return undefined
    pool.tokens -= n
    pool.served += n
    // Fewer left than were served since the last lease: lease the next slice now, in the background,
    // so that requests do not wait for Redis when these run out.
    if (pool.tokens < pool.served && !pool.leasing) this.prefetch(pool, bucket, limit)
    return { admitted: n, retryAfterMs: 0 }
  }

  private prefetch (pool: Pool, bucket: string, limit: number): void {
    const now = this.now()
    if (pool.refusedUntil > now || pool.prefetchPausedUntil > now) return
    // Twice what was served since the last lease (slices grow with demand), keeping what this
    // instance holds within maxShare × limit.
    const want = Math.min(2 * pool.served, Math.floor(limit * this.opts.maxShare) - pool.tokens)
    if (want <= 0) return
    const servedBefore = pool.served
    const lease = this.shared.take(bucket, limit, want).then((got) => {
      if (this.pools.get(bucket) !== pool) {
        // The pool was replaced meanwhile (the limit changed): its tokens go back at once.
        void this.shared.refund(bucket, limit, got.admitted).catch(() => {})
        return
      }
      pool.tokens += got.admitted
      pool.leasedAt = this.now()
      pool.served -= servedBefore // what was served during the lease counts toward the next one
      if (got.admitted < want) pool.refusedUntil = this.now() + got.retryAfterMs
    }, (err: unknown) => {
      // Redis is slow or down: requests lease for themselves (and answer its failure); no
      // background lease for a while, so a failing Redis is not asked again on every request.
      pool.prefetchPausedUntil = this.now() + PREFETCH_PAUSE_MS
      throw err
    })
    pool.leasing = lease.finally(() => { pool.leasing = null })
    pool.leasing.catch(() => {})
  }

  /** Takes up to n units from `bucket` (limit per minute); admits as many as fit, in order. */
  async take (bucket: string, limit: number, n: number): Promise<Admission> {
    let pool = this.pools.get(bucket)
    if (!pool || pool.limit !== limit) {
      if (pool) void this.giveBack(bucket, pool)
      pool = { limit, tokens: 0, leasedAt: 0, waiting: 0, served: 0, refusedUntil: 0, prefetchPausedUntil: 0, leasing: null }
      this.pools.set(bucket, pool)
    }
    pool.waiting += n
    try {
      return await this.takeFrom(pool, bucket, limit, n)
    } finally {
      pool.waiting -= n
    }
  }

  private async takeFrom (pool: Pool, bucket: string, limit: number, n: number): Promise<Admission> {
    for (;;) {
      if (pool.tokens >= n) {
        pool.tokens -= n
        pool.served += n
        return { admitted: n, retryAfterMs: 0 }
      }
      const now = this.now()
      if (pool.refusedUntil > now) {
        const admitted = pool.tokens
        pool.tokens = 0
        return { admitted, retryAfterMs: pool.refusedUntil - now }
      }
      if (pool.leasing) {
        await pool.leasing
        continue
      }
      // What this instance holds and what the lease brings are this request's from now on, not the
      // pool's: other requests take from the pool synchronously (tryTake), and one whose Redis answer
      // arrived in the same read as this lease's runs between the lease landing and this request
      // going on. Left in the pool, its tokens could be taken, and the request refused with Redis
      // far from its limit.
      const held = pool.tokens
      pool.tokens = 0
      const missing = n - held
      // Beyond this request: what other requests wait for, plus what was served since the last lease.
      const extra = Math.min(Math.floor(limit * this.opts.maxShare), pool.waiting - n + pool.served)
      let mine = 0
      let retryAfterMs = 0
      const lease = this.shared.take(bucket, limit, missing + extra).then((got) => {
        mine = Math.min(missing, got.admitted)
        const rest = got.admitted - mine
        if (this.pools.get(bucket) !== pool) {
          // The pool was replaced meanwhile (the limit changed): what this request does not use goes back.
          void this.shared.refund(bucket, limit, rest).catch(() => {})
        } else {
          pool.tokens += rest
        }
        pool.leasedAt = this.now()
        pool.served = 0
        if (got.admitted < missing + extra) {
          retryAfterMs = got.retryAfterMs
          pool.refusedUntil = this.now() + got.retryAfterMs
        }
      })
      pool.leasing = lease.finally(() => { pool.leasing = null })
      try {
        await pool.leasing
      } catch (err) {
        pool.tokens += held
        throw err
      }
      if (mine === missing) {
        pool.served += n
        return { admitted: n, retryAfterMs: 0 }
      }
      // Redis gave less than this request needs: admit what there is, refuse the rest.
      return { admitted: held + mine, retryAfterMs: Math.max(1, retryAfterMs) }
    }
  }

  /** Gives every held token back (at shutdown), after the leases under way have landed. */
  async close (): Promise<void> {
    clearInterval(this.sweeper)
    await Promise.allSettled([...this.pools.values()].map((pool) => pool.leasing))
    await this.returnStale(Infinity)
  }

  private async returnStale (leasedBefore: number): Promise<void> {
    const returns: Promise<void>[] = []
    for (const [bucket, pool] of this.pools) {
      if (pool.leasing || pool.leasedAt > leasedBefore) continue
      returns.push(this.giveBack(bucket, pool))
      this.pools.delete(bucket)
    }
    await Promise.all(returns)
  }

  private async giveBack (bucket: string, pool: Pool): Promise<void> {
    const unused = pool.tokens
    pool.tokens = 0
    // A refund that fails leaves tokens spent: the caller is limited a little early, never late.
    await this.shared.refund(bucket, pool.limit, unused).catch(() => {})
  }
}
