import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { Config } from './config.ts'
import { sharedSchemas } from './schemas.ts'
import { rateLimited } from './errors.ts'
import errors from './plugins/errors.ts'
import postgres from './plugins/postgres.ts'
import clickhouse from './plugins/clickhouse.ts'
import redis from './plugins/redis.ts'
import userAuth from './plugins/user-auth.ts'
import apiKeyAuth from './plugins/api-key-auth.ts'
import ingestion from './plugins/ingestion.ts'
import queues from './plugins/queues.ts'
import meAlerts from './routes/me/alerts.ts'
import cors from './plugins/cors.ts'
import publicData from './plugins/public-data.ts'
import health from './routes/health.ts'
import publicRegistry from './routes/public/registry.ts'
import publicX402 from './routes/public/x402.ts'
import publicWaitlist from './routes/public/waitlist.ts'
import ingest from './routes/ingest.ts'
import meUser from './routes/me/user.ts'
import meKeys from './routes/me/keys.ts'
import meAgents from './routes/me/agents.ts'
import meEvents from './routes/me/events.ts'
import meErrors from './routes/me/errors.ts'
import meSpend from './routes/me/spend.ts'
import meTestEvent from './routes/me/test-event.ts'
import dashboardData from './plugins/dashboard-data.ts'

export interface BuildOptions {
  logger?: FastifyServerOptions['logger']
}

/** Builds the whole service from its plugins; main.ts listens on it, tests inject into it. */
export async function buildApp(config: Config, options: BuildOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? { level: config.logLevel },
    bodyLimit: config.bodyLimit,
    trustProxy: config.trustProxy,
    // A log line per request is too much at ingestion rates: request lines appear at LOG_LEVEL=debug;
    // errors, refusals of the stores and start/stop are logged at every level.
    logController: new LogController({ disableRequestLogging: !['debug', 'trace'].includes(config.logLevel) }),
    return503OnClosing: true,
  })
  for (const schema of sharedSchemas) app.addSchema(schema)

  await app.register(errors)
  await app.register(cors, { origins: config.corsOrigins })
  await app.register(redis, { url: config.redisUrl, prefix: config.redisPrefix })
  await app.register(postgres, { databaseUrl: config.databaseUrl })
  await app.register(clickhouse, {
    url: config.clickhouseUrl,
    dataDir: config.dataDir,
    writerMaxRows: config.writerMaxRows,
    writerMaxBytes: config.writerMaxBytes,
  })
  await app.register(queues, { redisUrl: config.redisUrl, prefix: config.redisPrefix, worker: config.roles.worker, everyMs: config.anomalyEveryMs })
  await app.register(ingestion, { cacheTtlMs: config.cacheTtlMs, activityFlushMs: config.activityFlushMs })
  await app.register(apiKeyAuth, { cacheTtlMs: config.cacheTtlMs })
  await app.register(userAuth, { auth: config.auth, dataDir: config.dataDir, cacheTtlMs: config.cacheTtlMs })

  await app.register(publicData, { x402: config.x402 })
  await app.register(dashboardData)

  await app.register(health)
  await app.register(publicRegistry({ statsCacheSeconds: config.statsCacheSeconds, explorerCacheSeconds: config.explorerCacheSeconds }))
  await app.register(publicX402)
  await app.register(publicWaitlist)
  await app.register(ingest({ bodyLimit: config.bodyLimit, batchBodyLimit: config.batchBodyLimit }))
  await app.register(async function me(scope) {
    scope.addHook('onRequest', scope.authenticateUser)
    scope.addHook('onRequest', async (request) => {
      const write = request.method !== 'GET' && request.method !== 'HEAD'
      const limit = write ? config.meLimits.writesPerMinute : config.meLimits.readsPerMinute
      const route = `${request.method} ${request.routeOptions.url ?? request.url}`
      const { admitted, retryAfterMs } = await scope.rateLimiter.take(`me:${request.user.id}:${route}`, limit)
      if (admitted === 0) throw rateLimited(retryAfterMs / 1000)
    })
    await scope.register(meUser)
    await scope.register(meKeys)
    await scope.register(meAgents)
    await scope.register(meEvents)
    await scope.register(meErrors)
    await scope.register(meSpend)
    await scope.register(meTestEvent)
    await scope.register(meAlerts)
  })
  return app
}
