import type { FastifyPluginAsync } from 'fastify'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import pkg from '../../package.json' with { type: 'json' }

export const SERVICE_NAME = 'agent-telemetry'

const stepFigures = {
  type: 'object',
  properties: { calls: { type: 'integer' }, events: { type: 'integer' }, totalMs: { type: 'number' }, usPerEvent: { type: 'number' } },
}

/**
 * GET /health: unauthenticated liveness with the running version and the ingest backlog. `status`
 * is `degraded` (still 200: the instance keeps accepting events) when the oldest event waiting in the
 * ingest log is older than INGEST_DEGRADED_AFTER_MS, i.e. ClickHouse is down or falling behind.
 */
const health = (opts: { degradedAfterMs: number }): FastifyPluginAsync => async (app) => {
  // Event-loop delay since the previous /health: how long ready work waited for the JS thread. The
  // histogram records each 10 ms timer's whole interval, so the resolution is taken off every figure.
  const RESOLUTION_MS = 10
  const loopDelay = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
  loopDelay.enable()
  app.addHook('onClose', async () => loopDelay.disable())
  app.get('/health', {
    schema: {
      response: {
        200: {
          type: 'object',
          required: ['status', 'service', 'uptime', 'version', 'ingest'],
          properties: {
            status: { enum: ['ok', 'degraded'] },
            service: { type: 'string' },
            uptime: { type: 'number' },
            version: { type: 'string' },
            eventLoopDelayMs: {
              type: 'object',
              description: 'event-loop delay since the previous /health',
              properties: { p50: { type: 'number' }, p99: { type: 'number' }, max: { type: 'number' } },
            },
            ingest: {
              type: 'object',
              properties: {
                backlogRows: { type: 'integer', description: 'events acknowledged and not yet in ClickHouse' },
                backlogBytes: { type: 'integer', description: 'size of the ingest log entries still held' },
                oldestAgeMs: { type: ['integer', 'null'], description: 'age of the oldest event waiting, null when none' },
                quarantinedRows: { type: 'integer', description: 'rows ClickHouse refused, kept in the log\'s quarantine' },
                insertsFailing: {
                  type: ['object', 'null'],
                  description: 'while ClickHouse inserts fail; the full error is in the log, not here (this route is public)',
                  properties: { sinceMs: { type: 'integer' }, attempts: { type: 'integer' }, code: { type: 'string' } },
                },
                steps: { type: 'object', additionalProperties: stepFigures, description: 'time per pipeline step since start' },
              },
            },
          },
        },
      },
    },
  }, async () => {
    const stats = app.ingestLog.stats()
    const now = Date.now()
    const oldestAgeMs = stats.oldestAppendedAt === null ? null : Math.max(0, Math.round(now - stats.oldestAppendedAt))
    const retrying = app.shipper.status.retrying
    const ms = (ns: number) => Math.max(0, Math.round(ns / 1e4) / 100 - RESOLUTION_MS)
    const eventLoopDelayMs = { p50: ms(loopDelay.percentile(50)), p99: ms(loopDelay.percentile(99)), max: ms(loopDelay.max) }
    loopDelay.reset()
    return {
      status: oldestAgeMs !== null && oldestAgeMs > opts.degradedAfterMs ? 'degraded' : 'ok',
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
