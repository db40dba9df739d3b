import fp from 'fastify-plugin'
import type { Config } from '../config.ts'
import { ResponseCache } from '../cache/response-cache.ts'
import { OtlpService } from '../ingest/otlp-service.ts'
import { ScoreService } from '../services/score-service.ts'
import { AlertsService } from '../services/alerts-service.ts'
import { DashboardService } from '../services/dashboard-service.ts'
import { HealthReport } from '../services/health-report.ts'
import { ModelPricesService } from '../services/model-prices-service.ts'
import { PublicService } from '../services/public-service.ts'
import { SearchService } from '../services/search-service.ts'
import { X402Service } from '../services/x402-service.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** GET /health: version, ingest backlog, event-loop delay. */
    healthReport: HealthReport
    /** The public surface's reads (registry, public aggregates), cached in Redis. */
    publicService: PublicService
    /** Third-party payment data, with stale fallback. */
    x402: X402Service
    /** Short-lived responses in Redis, shared by the public reads. */
    responseCache: ResponseCache
    /** The /v1/me dashboard reads over the ClickHouse aggregates and the Postgres state. */
    dashboardService: DashboardService
    /** The /v1/me lists under search filters; without a filter, the dashboard's plain lists. */
    searchService: SearchService
    alertsService: AlertsService
    /** The prices a user sets for models, with the models still unpriced. */
    modelPricesService: ModelPricesService
    /** POST /v1/traces: OTLP spans through the ingestion pipeline. */
    otlp: OtlpService
    /** Score configs, score reads and the scores people give from the dashboard. */
    scoreService: ScoreService
  }
}

export interface ServicesOptions {
  x402: Config['x402']
  statsCacheSeconds: number
  explorerCacheSeconds: number
  profileKpisCacheSeconds: number
  /** GET /health says `degraded` past this backlog age (INGEST_DEGRADED_AFTER_MS). */
  degradedAfterMs: number
}

/**
 * Every service the routes call, built once here over the repositories, caches and ingestion (as
 * plugins/repositories.ts builds every repository); routes take them from the instance. The services
 * that live with their queues (notifications, anomaly) are built by their plugins.
 */
export default fp(async function services (app, opts: ServicesOptions) {
  const health = new HealthReport(app.ingestLog, app.shipper, app.ingestion.pipeline.timings, opts.degradedAfterMs)
  app.addHook('onClose', async () => health.close())
  app.decorate('healthReport', health)

  const cache = new ResponseCache(app.redis, app.redisPrefix)
  app.decorate('responseCache', cache)
  app.decorate('publicService', new PublicService(app.registry, app.publicEvents, cache, opts))
  app.decorate('x402', new X402Service(opts.x402.upstreams, cache, opts.x402, app.log))

  const dashboard = new DashboardService(app.dashboard, app.agents, app.errorClusters, app.alerts, app.scores)
  app.decorate('dashboardService', dashboard)
  app.decorate('searchService', new SearchService(app.eventSearch, dashboard))
  app.decorate('alertsService', new AlertsService(app.alerts))
  app.decorate('modelPricesService', new ModelPricesService(app.modelPrices, app.dashboard))

  app.decorate('otlp', new OtlpService(app.ingestion, app.spanMemory, app.scoreIngestion))
  app.decorate('scoreService', new ScoreService(app.scores, app.scoreConfigs, app.dashboard, app.scoreIngestion))
}, { name: 'services', dependencies: ['repositories', 'redis', 'ingestion'] })
