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
    warnUntold: () => log.warn(`could not reach Redis: running instances may serve the old data for up to ${config.sharedCacheTtlSeconds} s`),
    close: () => redis.disconnect(),
  }
}
