import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import pkg from '../../package.json' with { type: 'json' }
import { health as schema } from '../../schemas/public-routes.ts'

export const SERVICE_NAME = 'agent-telemetry'

/**
 * GET /health: unauthenticated liveness with the running version and the ingest backlog. `status`
 * is `degraded` (still 200: the instance keeps accepting events) when the oldest event waiting in the
 * ingest log is older than INGEST_DEGRADED_AFTER_MS, i.e. ClickHouse is down or falling behind.
 */
const health = (opts: { degradedAfterMs: number }): FastifyPluginAsyncJsonSchemaToTs => async (app) => {
  // Event-loop delay since the previous /health: how long ready work waited for the JS thread. The
  // histogram records each 10 ms timer's whole interval, so the resolution is taken off every figure.
  const RESOLUTION_MS = 10
  const loopDelay = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
  loopDelay.enable()
  app.addHook('onClose', async () => loopDelay.disable())
  app.get('/health', { schema }, async () => {
    const stats = app.ingestLog.stats()
    const now = Date.now()
    const oldestAgeMs = stats.oldestAppendedAt === null ? null : Math.max(0, Math.round(now - stats.oldestAppendedAt))
    const retrying = app.shipper.status.retrying
    const ms = (ns: number) => Math.max(0, Math.round(ns / 1e4) / 100 - RESOLUTION_MS)
    const eventLoopDelayMs = { p50: ms(loopDelay.percentile(50)), p99: ms(loopDelay.percentile(99)), max: ms(loopDelay.max) }
    loopDelay.reset()
    return {
      status: oldestAgeMs !== null && oldestAgeMs > opts.degradedAfterMs ? 'degraded' as const : 'ok' as const,
      service: SERVICE_NAME,
      uptime: process.uptime(),
      version: pkg.version,
      eventLoopDelayMs,
      ingest: {
        backlogRows: stats.rows,
        backlogBytes: stats.bytes,
        oldestAgeMs,
        quarantinedRows: stats.quarantined,
        insertsFailing: retrying && { sinceMs: now - retrying.since, attempts: retrying.attempts, code: retrying.code },
        steps: app.ingestion.steps.snapshot(),
      },
    }
  })
}

export default health
