import fp from 'fastify-plugin'
import { RegistryRepository } from '../storage/registry-repository.ts'
import { PublicEventsRepository } from '../storage/events-repository.ts'
import { ResponseCache } from '../storage/response-cache.ts'
import { X402Service } from '../services/x402-service.ts'
import type { Config } from '../config.ts'

declare module 'fastify' {
  interface FastifyInstance {
    registry: RegistryRepository
    publicEvents: PublicEventsRepository
    responseCache: ResponseCache
    x402: X402Service
  }
}

/** What the public surface reads: the registry (Postgres), public aggregates (ClickHouse), caches. */
export default fp(async function publicData(app, opts: { x402: Config['x402'] }) {
  const cache = new ResponseCache(app.redis, app.redisPrefix)
  app.decorate('registry', new RegistryRepository(app.db))
  app.decorate('publicEvents', new PublicEventsRepository(app.clickhouse))
  app.decorate('responseCache', cache)
  app.decorate('x402', new X402Service(opts.x402.upstreams, cache, opts.x402, app.log))
}, { name: 'public-data', dependencies: ['postgres', 'clickhouse', 'redis'] })
