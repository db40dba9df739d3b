import fp from 'fastify-plugin'
import type { Config } from '../config.ts'
import { ActivityRecorder } from './activity-recorder.ts'
import { EventShipper } from './shipper.ts'
import type { IngestLog } from './log/ingest-log.ts'
import { DiskIngestLog } from './log/disk-ingest-log.ts'
import { LeasedLimiter } from './leased-limiter.ts'
import { AgentResolver } from '../cache/agent-resolver.ts'
import { ModelPriceResolver } from '../cache/model-price-resolver.ts'
import { IngestionService } from './ingestion-service.ts'
import { PipelineRunner } from './pipeline.ts'
import { RowThread } from './row-thread.ts'
import { BestEffortRedis } from './best-effort-redis.ts'
import { SpanMemory } from './span-memory.ts'
import { IdempotencyStore } from './idempotency.ts'
import { LogThrottle } from '../log-lines.ts'
import { ScoreConfigResolver, ScoreIngestionService } from './score-ingestion.ts'

declare module 'fastify' {
  interface FastifyInstance {
    ingestion: IngestionService
    /** Scores through the same pipeline steps, log and shipper as events (src/ingest/score-ingestion.ts). */
    scoreIngestion: ScoreIngestionService
    ingestLog: IngestLog
    shipper: EventShipper
    /** Builds the rows of large requests off the main thread. */
    rowThread: RowThread
    activity: ActivityRecorder
    /** Which OTLP spans any instance accepted within IDEMPOTENCY_WINDOW_HOURS. */
    spanMemory: SpanMemory
    /** The records of Idempotency-Key requests, shared by every instance. */
    idempotency: IdempotencyStore
    /**
     * Drops cached agent resolutions of one owner (after a rename or delete of its agent), or of every
     * owner when none is named, here, in Redis and on every other instance. Never throws.
     */
    forgetAgents: (ownerId?: string) => Promise<void>
    /** Drops one user's cached model prices here, in Redis and on every other instance (after a change). Never throws. */
    forgetModelPrices: (userId: string) => Promise<void>
  }
}

/**
 * How long a request under way holds the spans or the Idempotency-Key it claimed. Longer than a
 * request takes to be answered (the stores its steps wait on time out within seconds: Redis 1 s,
 * Postgres 6 s), and short, because after a crash its retries are held off until then (409, or 503
 * for a re-sent export, which exporters retry).
 */
const RETRY_IN_FLIGHT_MS = 10_000

interface IngestionOptions { cacheTtlMs: number; sharedCacheTtlSeconds: number; activityFlushMs: number; burstLeaseMs: number; ingest: Config['ingest'] }

/**
 * The ingestion pipeline, this instance's ingest log and the shipper that moves it to ClickHouse,
 * and the coalesced side effects. On close: wait for ingestion calls under way, ship what the log
 * holds (for at most INGEST_DRAIN_TIMEOUT_MS; the rest ships at the next start), then close the log.
 */
export default fp(async function ingestion (app, opts: IngestionOptions) {
  const commitFailures = new LogThrottle(10_000)
  const log: IngestLog = DiskIngestLog.open({
    dir: opts.ingest.logDir,
    maxBytes: opts.ingest.logMaxBytes,
    onDamaged: ({ position, bytes }) => app.log.error({ position, bytes, dir: opts.ingest.logDir },
      'a damaged ingest log entry was moved to the quarantine; the rest of the log ships'),
    onUnfinishedWrite: ({ bytes }) => app.log.warn({ bytes, dir: opts.ingest.logDir },
      'cut an unfinished write off the ingest log: the process stopped during it, so none of its events was acknowledged'),
    onCommitFailed: (err) => {
      // A full disk fails every commit: one line every 10 s, counting the others.
      const held = commitFailures.pass()
      if (held !== null) {
        app.log.error({ err, dir: opts.ingest.logDir, alsoFailed: held },
          'the ingest log could not be written (disk full?); its events were refused with 503 and nothing acknowledged is lost (this line at most every 10 s)')
      }
    },
  })
  const backlog = log.stats()
  if (backlog.rows > 0 || backlog.quarantined > 0) {
    app.log.info({ rows: backlog.rows, bytes: backlog.bytes, quarantined: backlog.quarantined, dir: opts.ingest.logDir }, 'ingest log opened with a backlog; shipping it')
  }
  const shipper = new EventShipper(log, (body, token, rows) => app.events.insertBlock(body, token, rows), {
    maxRows: opts.ingest.batchMaxRows,
    maxBytes: opts.ingest.batchMaxBytes,
    minIntervalMs: opts.ingest.shipMinIntervalMs,
  }, app.log, (body, token) => app.scores.insertBlock(body, token))
  shipper.start()

  const activity = new ActivityRecorder(app.keys, app.agents, app.users, app.log, opts.activityFlushMs)
  activity.start()
  const caches = { ...app.sharedCacheBase, localTtlMs: opts.cacheTtlMs, sharedTtlSeconds: opts.sharedCacheTtlSeconds }
  const resolver = new AgentResolver(app.agents, caches)
  const prices = new ModelPriceResolver(app.modelPrices, caches)
  // The burst limit from tokens leased out of Redis in slices, unless leasing is off (BURST_LEASE_MS=0).
  const leased = opts.burstLeaseMs > 0 ? new LeasedLimiter(app.rateLimiter, { leaseMs: opts.burstLeaseMs, maxShare: 0.05 }) : null
  const rows = new RowThread({
    minEvents: opts.ingest.rowThreadMinEvents,
    onFailure: (err) => app.log.error({ err }, 'the row thread failed; rows are built on the main thread until it restarts'),
  })
  const service = new IngestionService({
    agents: resolver,
    ingestLog: log,
    shipper,
    limiter: leased ?? app.rateLimiter,
    activity,
    pipeline: new PipelineRunner(app.log),
    onAgentActive: app.agentActive,
    rows,
    prices,
  })
  const configs = new ScoreConfigResolver(app.scoreConfigs, caches)
  // Scores ingested after a config change are checked by it, on every instance.
  app.scoreConfigs.onChanged((change) => configs.forget(change.userId))
  const scoreService = new ScoreIngestionService({
    agents: resolver,
    configs,
    ingestLog: log,
    shipper,
    limiter: leased ?? app.rateLimiter,
    activity,
    pipeline: service.pipeline,
    inFlight: service.inFlight,
  })
  app.decorate('scoreIngestion', scoreService)
  // What Redis remembers of retries: ingestion goes on without it while Redis is out of reach.
  const memory = new BestEffortRedis(app.redis, app.log)
  const retries = { prefix: app.redisPrefix, windowMs: opts.ingest.retryWindowHours * 3_600_000, inFlightMs: RETRY_IN_FLIGHT_MS }
  app.decorate('spanMemory', new SpanMemory(memory, retries))
  app.decorate('idempotency', new IdempotencyStore(memory, retries))
  app.decorate('activity', activity)
  app.decorate('ingestion', service)
  app.decorate('ingestLog', log)
  app.decorate('shipper', shipper)
  app.decorate('rowThread', rows)
  app.decorate('forgetAgents', async (ownerId?: string) => {
    await (ownerId === undefined ? resolver.forgetAll() : resolver.forgetOwner(ownerId))
  })
  app.decorate('forgetModelPrices', async (userId: string) => {
    await prices.forget(userId)
  })
  // onClose hooks run in reverse registration order: this one runs before the stores close.
  app.addHook('onClose', async () => {
    // The thread first: jobs it holds are finished here, so no request waits on it.
    await rows.close()
    await service.idle()
    const drained = await shipper.drain(opts.ingest.drainTimeoutMs)
    // A stop that gives up on an insert under way logs so itself; the shipper then writes nothing
    // more, so the log can be closed under the insert.
    const stopped = await shipper.stop(5_000)
    const left = log.stats()
    if (stopped && !drained && left.rows > 0) app.log.warn({ rows: left.rows, bytes: left.bytes }, 'ingest log not fully shipped at shutdown; the rest ships at the next start')
    await log.close()
    await leased?.close()
    await activity.close()
  })
}, { name: 'ingestion', dependencies: ['postgres', 'clickhouse', 'redis', 'anomaly'] })
