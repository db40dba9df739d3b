import type { Redis, Result } from 'ioredis'

/**
 * GCRA in one Redis round trip, using Redis' clock so that every instance agrees. `limit` units
 * fit in a burst; after that they refill at `limit` per window (a minute unless told otherwise).
 * Asking for n units admits as many as fit (0..n) and says when the next one will.
 */
const GCRA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2]) * interval
local n = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local room = math.floor((capacity - (tat - now)) / interval)
if room < 0 then room = 0 end
local admitted = math.min(n, room)
if admitted > 0 then
  tat = tat + admitted * interval
  redis.call('SET', KEYS[1], tostring(tat), 'PX', math.ceil(tat - now) + 1000)
end
local retry = 0
if admitted < n then retry = math.ceil(tat + interval - capacity - now) end
return {admitted, retry}
`

/** Gives n units back to a GCRA bucket (never before now): tokens leased and not used. */
const GCRA_REFUND = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat <= now then return 0 end
tat = math.max(now, tat - n * interval)
redis.call('SET', KEYS[1], tostring(tat), 'PX', math.ceil(tat - now) + 1000)
return 1
`

export interface Admission {
  admitted: number
  /** Milliseconds until one more unit would be admitted (0 when all were admitted). */
  retryAfterMs: number
}

declare module 'ioredis' {
  interface RedisCommander<Context> {
    gcra(key: string, intervalMs: number, limit: number, n: number): Result<[number, number], Context>
    gcraRefund(key: string, intervalMs: number, n: number): Result<number, Context>
  }
}

export class RateLimiter {
  constructor (private readonly redis: Redis, private readonly prefix: string) {
    redis.defineCommand('gcra', { numberOfKeys: 1, lua: GCRA })
    redis.defineCommand('gcraRefund', { numberOfKeys: 1, lua: GCRA_REFUND })
  }

  /** Takes up to n units from `bucket`, whose limit is `limit` units per `windowMs`. */
  async take (bucket: string, limit: number, n = 1, windowMs = 60_000): Promise<Admission> {
    const [admitted, retryAfterMs] = await this.redis.gcra(`${this.prefix}rl:${bucket}`, windowMs / limit, limit, n)
    return { admitted: Number(admitted), retryAfterMs: Number(retryAfterMs) }
  }

  /** Gives back n units taken from `bucket` and not used (the same limit and window as the take). */
  async refund (bucket: string, limit: number, n: number, windowMs = 60_000): Promise<void> {
    if (n > 0) await this.redis.gcraRefund(`${this.prefix}rl:${bucket}`, windowMs / limit, n)
  }
}
