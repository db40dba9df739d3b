import fp from 'fastify-plugin'
import type { FastifyBaseLogger } from 'fastify'
import { Redis } from 'ioredis'
import { InvalidationBus } from '../cache/invalidation-bus.ts'
import { RateLimiter } from '../storage/rate-limiter.ts'
import { RedisOutageLog } from '../storage/redis-outage.ts'

declare module 'fastify' {
  interface FastifyInstance {
    redis: Redis
    redisPrefix: string
    bus: InvalidationBus
    rateLimiter: RateLimiter
    /** How this instance's Redis connections report an outage: one warning, then one line when it is over. */
    redisOutage: RedisOutageLog
    /** What every shared (LRU → Redis) cache of this instance is built on. */
    sharedCacheBase: { redis: Redis; prefix: string; bus: InvalidationBus; log: FastifyBaseLogger }
  }
}

/** Redis: one command connection (auto-pipelined), one subscriber for cache invalidation. */
export default fp(async function redis (app, opts: { url: string; prefix: string; commandTimeoutMs: number }) {
  // A command timeout, so a stalled Redis fails requests (503) instead of holding them.
  const client = new Redis(opts.url, { enableAutoPipelining: true, maxRetriesPerRequest: 2, commandTimeout: opts.commandTimeoutMs, lazyConnect: true })
  const subscriber = new Redis(opts.url, { lazyConnect: true })
  // A first connection that fails is reported once, by the start-up error; later failures are logged.
  let connected = false
  // What the first connection ran into (`ENOTFOUND` for a host that does not resolve): ioredis rejects
  // connect() with its own "Connection is closed" once it gives up, which says neither.
  let firstError: unknown
  const outage = new RedisOutageLog(app.log, RedisOutageLog.serverOf(opts.url))
  for (const [c, source] of [[client, 'commands'], [subscriber, 'cache invalidation']] as const) {
    c.on('error', (err) => {
      if (connected) outage.failed(source, err)
      else firstError ??= err
    })
    c.on('ready', () => outage.ready())
  }
  try {
    await client.connect()
    await subscriber.connect()
  } catch (err) {
    if (firstError !== undefined && err instanceof Error && !err.cause) err.cause = firstError
    throw err
  }
  connected = true
  const bus = new InvalidationBus(client, subscriber, opts.prefix, app.log)
  await bus.start()
  app.decorate('redis', client)
  app.decorate('redisPrefix', opts.prefix)
  app.decorate('redisOutage', outage)
  app.decorate('bus', bus)
  app.decorate('rateLimiter', new RateLimiter(client, opts.prefix))
  app.decorate('sharedCacheBase', { redis: client, prefix: opts.prefix, bus, log: app.log })
  app.addHook('onClose', async () => {
    subscriber.disconnect()
    // quit() waits for pending replies; with Redis gone there are none to wait for.
    await client.quit().catch(() => client.disconnect())
  })
}, { name: 'redis' })
