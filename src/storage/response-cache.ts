import type { Redis } from 'ioredis'

/**
 * Short-lived response caches in Redis, shared by every instance. A miss computes the value and
 * stores it for `ttlSeconds`; concurrent misses on one instance share one computation.
 */
export class ResponseCache {
  private readonly inflight = new Map<string, Promise<unknown>>()

  constructor(private readonly redis: Redis, private readonly prefix: string) {}

  async get<T>(name: string, ttlSeconds: number, compute: () => Promise<T>): Promise<T> {
    const key = `${this.prefix}cache:${name}`
    const hit = await this.redis.get(key)
    if (hit !== null) return JSON.parse(hit) as T
    let pending = this.inflight.get(key) as Promise<T> | undefined
    if (!pending) {
      pending = compute().then(async (value) => {
        await this.redis.set(key, JSON.stringify(value), 'EX', ttlSeconds)
        return value
      }).finally(() => this.inflight.delete(key))
      this.inflight.set(key, pending)
    }
    return pending
  }

  async getRaw(name: string): Promise<string | null> {
    return this.redis.get(`${this.prefix}cache:${name}`)
  }

  async setRaw(name: string, value: string, ttlSeconds: number): Promise<void> {
    await this.redis.set(`${this.prefix}cache:${name}`, value, 'EX', ttlSeconds)
  }
}
