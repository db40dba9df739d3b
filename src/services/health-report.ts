import { monitorEventLoopDelay } from 'node:perf_hooks'
import pkg from '../../package.json' with { type: 'json' }
import type { IngestLog } from '../ingest/log/ingest-log.ts'
import type { EventShipper } from '../ingest/shipper.ts'
import type { StepTimings } from '../ingest/steps.ts'

export const SERVICE_NAME = 'agent-telemetry'

/** How recent an ingest log refusal makes the instance `refusing`. */
const REFUSING_WINDOW_MS = 10_000

/**
 * What GET /health reports: the running version and the ingest backlog. `status` is `refusing` when
 * the ingest log refused an append in the last 10 s (the log full, or a disk that cannot be written:
 * events are answered 503), else `degraded` (the instance keeps accepting events) when the oldest
 * event waiting in the ingest log is older than `degradedAfterMs`, i.e. ClickHouse is down or
 * falling behind, else `ok`. Always a 200: the body says which.
 */
export class HealthReport {
  // Event-loop delay since the previous report: how long ready work waited for the JS thread. The
  // histogram records each 10 ms timer's whole interval, so the resolution is taken off every figure.
  private static readonly RESOLUTION_MS = 10
  private readonly loopDelay = monitorEventLoopDelay({ resolution: HealthReport.RESOLUTION_MS })

  constructor (
    private readonly log: Pick<IngestLog, 'stats'>,
    private readonly shipper: Pick<EventShipper, 'status'>,
    private readonly steps: Pick<StepTimings, 'snapshot'>,
    private readonly degradedAfterMs: number,
  ) {
    this.loopDelay.enable()
  }

  close (): void {
    this.loopDelay.disable()
  }

  now () {
    const stats = this.log.stats()
    const now = Date.now()
    const oldestAgeMs = stats.oldestAppendedAt === null ? null : Math.max(0, Math.round(now - stats.oldestAppendedAt))
    const retrying = this.shipper.status.retrying
    const ms = (ns: number) => Math.max(0, Math.round(ns / 1e4) / 100 - HealthReport.RESOLUTION_MS)
    const eventLoopDelayMs = { p50: ms(this.loopDelay.percentile(50)), p99: ms(this.loopDelay.percentile(99)), max: ms(this.loopDelay.max) }
    this.loopDelay.reset()
    const refused = stats.lastRefusal !== null && now - stats.lastRefusal.at < REFUSING_WINDOW_MS ? stats.lastRefusal : null
    const status = refused ? 'refusing' as const : oldestAgeMs !== null && oldestAgeMs > this.degradedAfterMs ? 'degraded' as const : 'ok' as const
    return {
      status,
      service: SERVICE_NAME,
      uptime: process.uptime(),
      version: pkg.version,
      eventLoopDelayMs,
      ingest: {
        backlogRows: stats.rows,
        backlogBytes: stats.bytes,
        oldestAgeMs,
        quarantinedRows: stats.quarantined,
        refusing: refused && { reason: refused.reason, agoMs: Math.max(0, now - refused.at) },
        insertsFailing: retrying && { sinceMs: now - retrying.since, attempts: retrying.attempts, code: retrying.code },
        steps: this.steps.snapshot(),
      },
    }
  }
}
