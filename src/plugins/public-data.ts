import fp from 'fastify-plugin'
import { ResponseCache } from '../cache/response-cache.ts'
import { X402Service } from '../services/x402-service.ts'
import { PublicService } from '../services/public-service.ts'
import type { Config } from '../config.ts'

declare module 'fastify' {
  interface FastifyInstance {
    publicService: PublicService
    responseCache: ResponseCache
    x402: X402Service
  }
}

/** What the public surface reads: the registry (Postgres), public aggregates (ClickHouse), caches. */
export default fp(async function publicData (app, opts: { x402: Config['x402']; statsCacheSeconds: number; explorerCacheSeconds: number; profileKpisCacheSeconds: number }) {
  const cache = new ResponseCache(app.redis, app.redisPrefix)
  app.decorate('responseCache', cache)
  app.decorate('publicService', new PublicService(app.registry, app.publicEvents, cache, opts))
  app.decorate('x402', new X402Service(opts.x402.upstreams, cache, opts.x402, app.log))
}, { name: 'public-data', dependencies: ['repositories', 'redis'] })
