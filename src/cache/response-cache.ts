import type { Redis } from 'ioredis'
import { SingleFlight } from './single-flight.ts'

/**
 * Short-lived response caches in Redis, shared by every instance. A miss computes the value and
 * stores it for `ttlSeconds`; concurrent misses on one instance share one computation.
 */
export class ResponseCache {
  private readonly flights = new SingleFlight<unknown>()

  constructor (private readonly redis: Redis, private readonly prefix: string) {}

  /**
   * The cached value of `name`, else `compute()`'s, stored for `ttlSeconds`. A Redis failure fails
   * the call, unless `computeWhenRedisFails`: then the value is computed (and not stored) as if there
   * were no cache. A failure of `compute` itself always fails the call.
   */
  async get<T>(name: string, ttlSeconds: number, compute: () => Promise<T>, opts: { computeWhenRedisFails?: boolean } = {}): Promise<T> {
    const key = `${this.prefix}cache:${name}`
    let hit: string | null
    try {
      hit = await this.redis.get(key)
    } catch (err) {
      if (opts.computeWhenRedisFails) return compute()
      throw err
    }
    if (hit !== null) return JSON.parse(hit) as T
    return this.flights.run(key, async () => {
      const value = await compute()
      try {
        await this.redis.set(key, JSON.stringify(value), 'EX', ttlSeconds)
      } catch (err) {
        if (!opts.computeWhenRedisFails) throw err
      }
      return value
    }) as Promise<T>
  }

  /** Drops cached responses, so the next read computes them afresh. */
  async forget (...names: string[]): Promise<void> {
    await this.redis.del(...names.map((name) => `${this.prefix}cache:${name}`))
  }

  async getRaw (name: string): Promise<string | null> {
    return this.redis.get(`${this.prefix}cache:${name}`)
  }

  async setRaw (name: string, value: string, ttlSeconds: number): Promise<void> {
    await this.redis.set(`${this.prefix}cache:${name}`, value, 'EX', ttlSeconds)
  }
}
