import type pg from 'pg'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import type { Config } from '../config.ts'
import { AgentResolver } from '../cache/agent-resolver.ts'
import { AgentsRepository } from '../storage/agents-repository.ts'
import { InvalidationBus } from '../cache/invalidation-bus.ts'
import { KeyResolver } from '../cache/key-resolver.ts'
import { KeysRepository } from '../storage/keys-repository.ts'

export interface CliCaches {
  keys: KeyResolver
  agents: AgentResolver
  /** Says on stderr that Redis could not be told, and how long running instances may lag. */
  warnUntold(): void
  /**
   * Says on stderr when no running instance listens for invalidations under this REDIS_PREFIX:
   * instances run with another prefix (or another Redis) were not told, and may serve the old data
   * until their cache entries expire. Nothing when Redis cannot be reached (warnUntold says it).
   */
  warnIfUnheard(): Promise<void>
  close(): void
}

/**
 * The shared caches of the running instances, for a command that changed what they hold in Postgres
 * and must invalidate it. If Redis cannot be reached the invalidations answer false (see warnUntold).
 */
export async function openCaches (config: Config, pool: pg.Pool): Promise<CliCaches> {
  const log = pino({ level: 'warn' }, pino.destination({ dest: 2, sync: true }))
  // No reconnection: a command does not wait for Redis; the change holds anyway once entries expire.
  const redis = new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null })
  redis.on('error', () => {})
  await redis.connect().catch(() => {})
  // Publish only: this process never subscribes, so one connection serves as both ends.
  const bus = new InvalidationBus(redis, redis, config.redisPrefix, log)
  const cache = { redis, prefix: config.redisPrefix, bus, log, localTtlMs: config.cacheTtlMs, sharedTtlSeconds: config.sharedCacheTtlSeconds }
  return {
    keys: new KeyResolver(new KeysRepository(pool), cache),
    agents: new AgentResolver(new AgentsRepository(pool), cache),
    warnUntold: () => console.error(`warning: could not reach Redis: running instances may serve the old data for up to ${config.sharedCacheTtlSeconds} s`),
    async warnIfUnheard () {
      const counts = await redis.pubsub('NUMSUB', `${config.redisPrefix}invalidate`).catch(() => null) as [string, number] | null
      if (!counts || Number(counts[1]) > 0) return
      console.error(`warning: no running instance listens on Redis ${redis.options.host}:${redis.options.port} under REDIS_PREFIX "${config.redisPrefix}": ` +
        `if the service runs with another REDIS_PREFIX or REDIS_URL, run this command with the service's, or its instances may serve the old data for up to ${config.sharedCacheTtlSeconds} s`)
    },
    close: () => redis.disconnect(),
  }
}
