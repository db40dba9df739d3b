/* eslint-disable no-new -- prom-client metrics register themselves with the registry they are given */
import fp from 'fastify-plugin'
import { timingSafeEqual, createHash } from 'node:crypto'
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { unauthorized } from '../http-error.ts'
import { bearerToken } from '../auth/bearer.ts'

interface MetricsOptions {
  /** Bearer token required by GET /metrics; undefined: the route does not exist (404). */
  token: string | undefined
}

/** Longest wait for BullMQ's job counts during a scrape; a slow Redis must not hold the scrape. */
const QUEUE_COUNT_TIMEOUT_MS = 1000
const PREFIX = 'agent_telemetry_'

function sameToken (expected: string, presented: string): boolean {
  return timingSafeEqual(createHash('sha256').update(expected).digest(), createHash('sha256').update(presented).digest())
}

/**
 * GET /metrics in Prometheus' text format (prom-client), behind its own bearer token (METRICS_TOKEN):
 * HTTP latency per route, ingest responses by status and accepted events, the ingest log's backlog,
 * shipper batch sizes, insert latency and ClickHouse insert errors, BullMQ queue depth and failed jobs,
 * and the process metrics (CPU, memory, handles, event-loop delay, GC). Gauges are read at scrape
 * time from the components' own stats, so nothing is counted twice.
 */
export default fp(async function metrics (app, opts: MetricsOptions) {
  // Without a token nothing can read the metrics: collect none (no hook on every response).
  if (!opts.token) return
  const registry = new Registry()
  collectDefaultMetrics({ register: registry, prefix: PREFIX, eventLoopMonitoringPrecision: 10 })

  const httpDuration = new Histogram({
    name: `${PREFIX}http_request_duration_seconds`,
    help: 'HTTP request latency by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  })
  const ingestResponses = new Counter({
    name: `${PREFIX}ingest_responses_total`,
    help: 'Answers of the ingestion routes by route and status (202 accepted; 4xx refused; 429 rate limited; 503 log full or unavailable)',
    labelNames: ['route', 'status'] as const,
    registers: [registry],
  })
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched'
    const status = String(reply.statusCode)
    httpDuration.observe({ route, method: request.method, status }, reply.elapsedTime / 1000)
    if (request.method === 'POST' && (route.startsWith('/v1/events') || route === '/v1/traces')) ingestResponses.inc({ route, status })
  })

  // The shipper inserts through the events repository, which reports each block it inserts.
  const batchRows = new Histogram({
    name: `${PREFIX}shipper_batch_rows`,
    help: 'Rows per ClickHouse insert made by the shipper',
    buckets: [1, 10, 50, 100, 500, 1000, 5000, 10000, 20000],
    registers: [registry],
  })
  const insertSeconds = new Histogram({
    name: `${PREFIX}shipper_insert_duration_seconds`,
    help: 'Duration of each ClickHouse insert made by the shipper, successful or not',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  })
  const clickhouseErrors = new Counter({
    name: `${PREFIX}clickhouse_errors_total`,
    help: 'Failed ClickHouse inserts of the shipper, by ClickHouse error code or socket error code',
    labelNames: ['operation', 'code'] as const,
    registers: [registry],
  })
  app.events.onInsert(({ durationMs, rows, error }) => {
    insertSeconds.observe(durationMs / 1000)
    if (error === undefined) batchRows.observe(rows)
    else clickhouseErrors.inc({ operation: 'insert', code: String((error as { code?: unknown })?.code ?? 'unknown') })
  })

  new Gauge({
    name: `${PREFIX}events_accepted_total`,
    help: 'Events written to the ingest log (acknowledged with 202) since start',
    registers: [registry],
    collect () { this.set(app.ingestion.pipeline.timings.snapshot().log?.events ?? 0) },
  })
  const backlog = (pick: (s: ReturnType<typeof app.ingestLog.stats>) => number) => function (this: Gauge) {
    this.set(pick(app.ingestLog.stats()))
  }
  new Gauge({ name: `${PREFIX}ingest_log_backlog_rows`, help: 'Events acknowledged and not yet in ClickHouse', registers: [registry], collect: backlog((s) => s.rows) })
  new Gauge({ name: `${PREFIX}ingest_log_backlog_bytes`, help: 'Size of the ingest log entries still held', registers: [registry], collect: backlog((s) => s.bytes) })
  new Gauge({
    name: `${PREFIX}ingest_log_oldest_age_seconds`,
    help: 'Age of the oldest event waiting in the ingest log (0 when none)',
    registers: [registry],
    collect: backlog((s) => (s.oldestAppendedAt === null ? 0 : Math.max(0, Date.now() - s.oldestAppendedAt) / 1000)),
  })
  new Gauge({ name: `${PREFIX}ingest_log_quarantined_rows`, help: 'Rows ClickHouse refused, kept in the quarantine', registers: [registry], collect: backlog((s) => s.quarantined) })
  new Gauge({
    name: `${PREFIX}shipper_inserts_failing`,
    help: '1 while the shipper retries a failing ClickHouse insert',
    registers: [registry],
    collect () { this.set(app.shipper.status.retrying ? 1 : 0) },
  })

  new Gauge({
    name: `${PREFIX}queue_jobs`,
    help: 'BullMQ jobs by queue and state (failed: failed jobs kept, the last 100-1000)',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect () {
      this.reset()
      // The queues at once: with Redis down each count waits out its timeout, and one wait is enough.
      const all = await Promise.all(app.queues.all.map(async (queue) => ({
        queue,
        counts: await Promise.race([
          queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed'),
          new Promise<null>((resolve) => { setTimeout(() => resolve(null), QUEUE_COUNT_TIMEOUT_MS) }),
        ]).catch(() => null),
      })))
      for (const { queue, counts } of all) {
        if (!counts) continue
        for (const [state, n] of Object.entries(counts)) this.set({ queue: queue.name, state }, n)
      }
    },
  })

  const token = opts.token
  app.get('/metrics', async (request, reply) => {
    if (!sameToken(token, bearerToken(request.headers.authorization))) throw unauthorized('invalid_token')
    reply.header('content-type', registry.contentType)
    return registry.metrics()
  })
}, { name: 'metrics', dependencies: ['repositories', 'queues'] })
