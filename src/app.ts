import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions, type RouteOptions } from 'fastify'
import type { Config } from './config.ts'
import { prepareDataDir, warnOfFileSystem } from './data-dir.ts'
import { sharedSchemas } from './validation.ts'
import errors, { clientErrorHandler, frameworkErrors } from './plugins/error-handler.ts'
import { lazySerializers } from './lazy-serializers.ts'
import jsonBody from './plugins/json-body.ts'
import postgres from './plugins/postgres.ts'
import secrets from './plugins/secrets.ts'
import clickhouse from './plugins/clickhouse.ts'
import analyticsSql from './analytics-sql/plugin.ts'
import redis from './plugins/redis.ts'
import userAuth from './plugins/user-auth.ts'
import apiKeyAuth from './plugins/api-key-auth.ts'
import ingestion from './ingest/plugin.ts'
import live from './live/plugin.ts'
import queues from './plugins/queues.ts'
import anomaly from './plugins/anomaly.ts'
import maintenance from './plugins/maintenance.ts'
import notifications from './plugins/notifications.ts'
import metrics from './plugins/metrics.ts'
import cors from './plugins/cors.ts'
import requestDeadline from './plugins/request-deadline.ts'
import cacheInvalidation from './plugins/cache-invalidation.ts'
import openapi from './plugins/openapi.ts'
import repositories from './plugins/repositories.ts'
import services from './plugins/services.ts'
import webUi from './plugins/web-ui.ts'
import routes from './plugins/routes.ts'

// Session and trace ids are up to 200 characters (schemas/event.ts), i.e. up to 400 UTF-16 units once
// decoded: the detail routes must route every id ingestion accepts (Fastify's default is 100).
const MAX_PARAM_LENGTH = 400
// A connection that makes no progress for this long (a client that stopped reading its answer) is closed.
const SOCKET_IDLE_TIMEOUT_MS = 60_000
// How long one plugin may take to start (Fastify's default is 10 s).
const PLUGIN_START_TIMEOUT_MS = 120_000

export interface BuildOptions {
  logger?: FastifyServerOptions['logger']
  /** Called for every route as it is added (tests walk the routes with it). */
  onRoute?: (route: RouteOptions) => void
}

/**
 * Fastify's request lines at the level they are shown at: `debug`, not `info` (only LOG_LEVEL=debug
 * shows them, so a filter by level finds them there). A request that failed stays an `error`.
 */
class DebugRequestLogs extends LogController {
  override incomingRequest (request: FastifyRequest): void {
    if (!this.isLogDisabled(request)) request.log.debug({ req: request }, 'incoming request')
  }

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return
    if (error) reply.log.error({ res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored')
    else reply.log.debug({ res: reply, responseTime: reply.elapsedTime }, 'request completed')
  }
}

/** How long a start that failed waits for what it started to close before it gives the failure up. */
const FAILED_START_CLOSE_MS = 5_000

/** Builds the whole service from its plugins; main.ts listens on it, tests inject into it. */
export async function buildApp (config: Config, options: BuildOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? { level: config.logLevel },
    bodyLimit: config.bodyLimit,
    trustProxy: config.trustProxy,
    // A log line per request is too much at ingestion rates: request lines appear at LOG_LEVEL=debug;
    // errors, refusals of the stores and start/stop are logged at every level.
    logController: new DebugRequestLogs({ disableRequestLogging: !['debug', 'trace'].includes(config.logLevel) }),
    // Requests that reach a closing instance on kept-alive connections are served (and told to close the
    // connection); the ingest log refuses with its own 503 + Retry-After once it is closed.
    return503OnClosing: false,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // A plugin's start may take long for good reasons: the ClickHouse migrations of one instance while
    // the others wait for its lock, the embedded engine opening a large store on a busy machine.
    // Fastify's 10 s would end such a start; the stores' own connect timeouts still fail a dead one.
    pluginTimeout: PLUGIN_START_TIMEOUT_MS,
    frameworkErrors,
    clientErrorHandler,
    schemaController: { compilersFactory: { buildSerializer: lazySerializers } },
    // A client must send its whole request (headers and body) within requestTimeout, else 408 and
    // close, so slow or stalled uploads neither pile up nor hold a graceful shutdown.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    connectionTimeout: SOCKET_IDLE_TIMEOUT_MS,
    // Node checks those timeouts only every connectionsCheckingInterval (30 s by default).
    http: { headersTimeout: config.requestTimeoutMs, connectionsCheckingInterval: Math.min(1000, config.requestTimeoutMs) },
  })
  try {
    if (options.onRoute) app.addHook('onRoute', options.onRoute)
    for (const schema of sharedSchemas) app.addSchema(schema)

    prepareDataDir(config.dataDir, app.log)
    if (!config.clickhouseUrl) warnOfFileSystem(config.dataDir, app.log)
    await app.register(errors)
    await app.register(requestDeadline, { requestTimeoutMs: config.requestTimeoutMs })
    await app.register(jsonBody)
    await app.register(cors, { origins: config.corsOrigins })
    await app.register(openapi)
    // First of the stores' plugins: a missing SECRETS_KEY fails the start before any connection is made.
    await app.register(secrets, { dataDir: config.dataDir, key: config.secrets.key, previousKeys: config.secrets.previousKeys, required: Boolean(config.clickhouseUrl) })
    await app.register(redis, { url: config.redisUrl, prefix: config.redisPrefix, commandTimeoutMs: config.redisCommandTimeoutMs })
    await app.register(postgres, { databaseUrl: config.databaseUrl, timeouts: config.postgresTimeouts })
    await app.register(clickhouse, {
      url: config.clickhouseUrl,
      dataDir: config.dataDir,
      cluster: config.clickhouseCluster,
    })
    await app.register(analyticsSql, {
      enabled: !config.clickhouseUrl && config.analytics.port !== null,
      port: config.analytics.port ?? 0,
      host: config.analytics.host,
      dataDir: config.dataDir,
      password: config.analytics.password,
      caps: config.analytics.caps,
    })
    await app.register(repositories)
    await app.register(queues, { redisUrl: config.redisUrl, prefix: config.redisPrefix, worker: config.roles.worker })
    await app.register(notifications, config.notify)
    await app.register(anomaly, { everyMs: config.anomalyEveryMs, shipIntervalMs: config.ingest.shipMinIntervalMs })
    await app.register(maintenance, { namesEveryMs: config.namesSyncEveryMs, retention: config.retention })
    await app.register(metrics, { token: config.metricsToken })
    const caches = { cacheTtlMs: config.cacheTtlMs, sharedCacheTtlSeconds: config.sharedCacheTtlSeconds }
    await app.register(ingestion, { ...caches, activityFlushMs: config.activityFlushMs, burstLeaseMs: config.burstLeaseMs, ingest: config.ingest })
    await app.register(live, { redisUrl: config.redisUrl, live: config.live })
    await app.register(apiKeyAuth, caches)
    await app.register(userAuth, { auth: config.auth, dataDir: config.dataDir, cacheTtlMs: config.cacheTtlMs })

    await app.register(services, {
      x402: config.x402,
      statsCacheSeconds: config.statsCacheSeconds,
      explorerCacheSeconds: config.explorerCacheSeconds,
      profileKpisCacheSeconds: config.profileKpisCacheSeconds,
      degradedAfterMs: config.ingest.degradedAfterMs,
    })
    await app.register(cacheInvalidation)

    await app.register(webUi)
    await app.register(routes, {
      bodyLimit: config.bodyLimit,
      batchBodyLimit: config.batchBodyLimit,
      meLimits: config.meLimits,
      readYourWritesTimeoutMs: config.ingest.readYourWritesTimeoutMs,
    })
  } catch (err) {
    // The plugins started before the failure are closed, the embedded engine first among them: a
    // process that exits with the engine still open can hang in its exit for good.
    await Promise.race([app.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, FAILED_START_CLOSE_MS).unref())])
    throw err
  }
  return app
}
