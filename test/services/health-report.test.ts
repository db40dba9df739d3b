import t from 'tap'
import { HealthReport, SERVICE_NAME } from '../../src/services/health-report.ts'
import { StepTimings } from '../../src/ingest/steps.ts'
import type { LogStats } from '../../src/ingest/log/ingest-log.ts'
import type { ShipperStatus } from '../../src/ingest/shipper.ts'
import pkg from '../../package.json' with { type: 'json' }

const DEGRADED_AFTER_MS = 10_000

/** A report over a fake log (its stats as set) and a fake shipper (its status as set). */
function report (stats: Partial<LogStats>, status: ShipperStatus = { retrying: null }) {
  const log = { stats: (): LogStats => ({ rows: 0, bytes: 0, oldestAppendedAt: null, quarantined: 0, lastRefusal: null, ...stats }) }
  const steps = new StepTimings()
  steps.record('schema', 4, 2)
  const health = new HealthReport(log, { status }, steps, DEGRADED_AFTER_MS)
  t.teardown(() => health.close())
  return health
}

t.test('ok with nothing waiting: the backlog, the version and the steps\' figures', async (t) => {
  const body = report({ quarantined: 2 }).now()
  t.equal(body.status, 'ok')
  t.equal(body.service, SERVICE_NAME)
  t.equal(body.version, pkg.version)
  t.match(body.ingest, { backlogRows: 0, backlogBytes: 0, oldestAgeMs: null, quarantinedRows: 2, insertsFailing: null })
  t.match(body.ingest.steps.schema, { calls: 1, events: 4, totalMs: 2, usPerEvent: 500 })
  t.match(body.eventLoopDelayMs, { p50: Number, p99: Number, max: Number })
})

t.test('degraded once the oldest waiting row is older than INGEST_DEGRADED_AFTER_MS, still ok before', async (t) => {
  const old = report({ rows: 5, bytes: 900, oldestAppendedAt: Date.now() - 60_000 }).now()
  t.equal(old.status, 'degraded')
  t.ok(old.ingest.oldestAgeMs! >= 60_000, `${old.ingest.oldestAgeMs} ms`)
  t.match(old.ingest, { backlogRows: 5, backlogBytes: 900 })
  const recent = report({ rows: 5, oldestAppendedAt: Date.now() + 60_000 }).now()
  t.equal(recent.status, 'ok', 'a young backlog is not degraded')
  t.equal(recent.ingest.oldestAgeMs, 0, 'an age is never negative (a clock step back)')
})

t.test('refusing while the log refused an append in the last 10 s (full, or a full disk); ok again after', async (t) => {
  const full = report({ lastRefusal: { reason: 'ingest_log_full', at: Date.now() - 2_000 } }).now()
  t.equal(full.status, 'refusing')
  t.match(full.ingest.refusing, { reason: 'ingest_log_full', agoMs: Number })
  const disk = report({ rows: 5, oldestAppendedAt: Date.now() - 60_000, lastRefusal: { reason: 'ingest_log_unavailable', at: Date.now() } }).now()
  t.equal(disk.status, 'refusing', 'refusing outranks degraded')
  const past = report({ lastRefusal: { reason: 'ingest_log_full', at: Date.now() - 11_000 } }).now()
  t.equal(past.status, 'ok', 'a refusal 11 s ago is over')
  t.equal(past.ingest.refusing, null)
})

t.test('failing inserts: since when, how many attempts and the code, never the message', async (t) => {
  const since = Date.now() - 5_000
  const body = report({}, { retrying: { since, attempts: 3, error: 'connect ECONNREFUSED 10.0.0.1:8123', code: 'ECONNREFUSED' } }).now()
  t.match(body.ingest.insertsFailing, { attempts: 3, code: 'ECONNREFUSED' })
  t.ok((body.ingest.insertsFailing as { sinceMs: number }).sinceMs >= 5_000)
  t.notOk(JSON.stringify(body).includes('10.0.0.1'), 'the error message stays in the log')
})
