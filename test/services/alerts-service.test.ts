import t, { type Test } from 'tap'
import { AlertsService, refusal, type AlertStore } from '../../src/services/alerts-service.ts'
import type { Alert, AlertStatus } from '../../src/storage/alerts-repository.ts'
import { encodeCursor } from '../../src/domain/cursor.ts'
import { DEFAULT_THRESHOLDS } from '../../src/domain/anomaly-rules.ts'
import { HttpError } from '../../src/http-error.ts'

const SETTLED = Date.parse('2026-05-02T00:00:00.000Z')

function alert (n: number, over: Partial<Alert> = {}): Alert {
  const createdAt = new Date(SETTLED - n * 60_000).toISOString()
  return {
    id: `alr_${n}`, agentId: 'c' + 'a'.repeat(24), agent: { id: 'c' + 'a'.repeat(24), displayName: 'alpha' }, agentDeleted: false,
    rule: 'error_rate', severity: 'warning', message: 'm', figures: {}, status: 'active', snoozedUntil: null, triggerCount: 1,
    createdAt, updatedAt: createdAt, lastTriggeredAt: createdAt, lastSeenFiringAt: createdAt, acknowledgedAt: null, clearedAt: null, ...over,
  }
}

/** A fake alerts repository over an in-memory list, recording each call. */
function fakeAlerts (rows: Alert[] = []) {
  const calls: { name: string; args: unknown[] }[] = []
  let thresholds: Record<string, Record<string, unknown>> = {}
  const store: AlertStore = {
    async list (...args) {
      calls.push({ name: 'list', args })
      const [, status, limit, after] = args
      return rows
        .filter((a) => status === 'all' || a.status === status)
        .filter((a) => !after || Date.parse(a.createdAt) < after.ms)
        .slice(0, limit)
    },
    async counts (...args) {
      calls.push({ name: 'counts', args })
      return { active: 1, acknowledged: 2, snoozed: 3, total: 6 }
    },
    async transition (...args) {
      calls.push({ name: 'transition', args })
      const [, id, from, to] = args
      const found = rows.find((a) => a.id === id)
      if (!found) return null
      if (!from.includes(found.status)) return { alert: found, changed: false }
      found.status = to
      return { alert: found, changed: true }
    },
    async thresholds (...args) {
      calls.push({ name: 'thresholds', args })
      return thresholds
    },
    async setThresholds (...args) {
      calls.push({ name: 'setThresholds', args })
      thresholds = args[1] as typeof thresholds
    },
  }
  return { store, calls }
}

async function rejectsWith (t: Test, p: Promise<unknown>, status: number, code: string, extra: Record<string, unknown> = {}) {
  const err = await p.then(() => null, (e: unknown) => e)
  t.ok(err instanceof HttpError, 'an HTTP error')
  t.match(err, { statusCode: status, code, extra })
}

t.test('list: pages newest first with a cursor that walks from the request\'s snapshot', async (t) => {
  const { store, calls } = fakeAlerts([alert(1), alert(2), alert(3)])
  const service = new AlertsService(store)
  const first = await service.list('u1', SETTLED, { status: 'all', count: false, limit: 2 })
  t.same(first.alerts.map((a) => a.id), ['alr_1', 'alr_2'])
  t.equal(calls[0]!.args[2], 3, 'asks one more row than the page, to know whether another follows')
  t.equal(first.nextCursor, encodeCursor('alerts', SETTLED, { ms: Date.parse(alert(2).createdAt), id: 'alr_2' }))
  t.notOk('counts' in first, 'no counts unless asked')

  const second = await service.list('u1', SETTLED + 60_000, { status: 'all', count: false, limit: 2, cursor: first.nextCursor! })
  t.same(second.alerts.map((a) => a.id), ['alr_3'])
  t.same(calls[1]!.args[3], { ms: Date.parse(alert(2).createdAt), id: 'alr_2' }, 'the next page starts after the last row')
  t.equal(second.nextCursor, null, 'the last page')
})

t.test('list: count adds the counts per status; a cursor of another list is a 400', async (t) => {
  const { store, calls } = fakeAlerts([alert(1, { status: 'snoozed' }), alert(2)])
  const service = new AlertsService(store)
  const res = await service.list('u1', SETTLED, { status: 'snoozed', count: true, limit: 10 })
  t.same(res.alerts.map((a) => a.id), ['alr_1'])
  t.same(calls.find((c) => c.name === 'list')!.args.slice(0, 2), ['u1', 'snoozed'])
  t.same((res as { counts?: unknown }).counts, { active: 1, acknowledged: 2, snoozed: 3, total: 6 })
  t.same(calls.find((c) => c.name === 'counts')!.args, ['u1'])

  const foreign = encodeCursor('events', SETTLED, { ms: 1, id: 'x' })
  await rejectsWith(t, service.list('u1', SETTLED, { status: 'all', count: false, limit: 10, cursor: foreign }), 400, 'invalid_cursor')
  await rejectsWith(t, service.list('u1', SETTLED, { status: 'all', count: false, limit: 10, cursor: 'not a cursor' }), 400, 'invalid_cursor')
})

t.test('transition: each action moves from its statuses to its own, with the snooze hours', async (t) => {
  const { store, calls } = fakeAlerts([alert(1), alert(2, { status: 'acknowledged' })])
  const service = new AlertsService(store)
  t.equal((await service.transition('u1', 'alr_1', 'snooze', 4)).status, 'snoozed')
  t.same(calls.at(-1)!.args, ['u1', 'alr_1', ['active', 'snoozed'], 'snoozed', 4])
  t.equal((await service.transition('u1', 'alr_1', 'acknowledge')).status, 'acknowledged')
  t.same(calls.at(-1)!.args, ['u1', 'alr_1', ['active', 'snoozed'], 'acknowledged', undefined])
  t.equal((await service.transition('u1', 'alr_2', 'unacknowledge')).status, 'active')
  t.same(calls.at(-1)!.args.slice(2, 4), [['acknowledged'], 'active'])
})

t.test('transition: repeating one that holds answers the alert; a refused one is a 409 saying why; unknown is a 404', async (t) => {
  const { store } = fakeAlerts([alert(1, { status: 'acknowledged' }), alert(2, { status: 'snoozed' }), alert(3)])
  const service = new AlertsService(store)
  t.equal((await service.transition('u1', 'alr_1', 'acknowledge')).status, 'acknowledged', 'acknowledging an acknowledged alert')

  await rejectsWith(t, service.transition('u1', 'alr_1', 'snooze', 1), 409, 'conflict',
    { reason: 'invalid_transition', message: refusal('snooze', { id: 'alr_1', status: 'acknowledged' }) })
  t.equal(refusal('snooze', { id: 'alr_1', status: 'acknowledged' }),
    'alert alr_1 is acknowledged; only an active or snoozed alert can be snoozed (unacknowledge it first)')
  t.equal(refusal('unacknowledge', { id: 'alr_2', status: 'snoozed' }), 'alert alr_2 is snoozed; only an acknowledged alert can be unacknowledged')
  await rejectsWith(t, service.transition('u1', 'alr_2', 'unacknowledge'), 409, 'conflict', { reason: 'invalid_transition' })
  t.equal((await service.transition('u1', 'alr_3', 'unacknowledge')).status, 'active', 'unacknowledging an active alert: it already holds')
  await rejectsWith(t, service.transition('u1', 'alr_9', 'acknowledge'), 404, 'not_found')
})

t.test('settings: the overrides laid over the defaults, field by field; replacing stores the overrides alone', async (t) => {
  const { store, calls } = fakeAlerts()
  const service = new AlertsService(store)
  const before = await service.settings('u1')
  t.same(before, { thresholds: DEFAULT_THRESHOLDS, overrides: {} })

  const overrides = { error_rate: { minRate: 0.2 }, silence: { enabled: false } }
  const replaced = await service.replaceSettings('u1', overrides)
  t.same(calls.find((c) => c.name === 'setThresholds')!.args, ['u1', overrides])
  t.same(replaced.overrides, overrides)
  t.same(replaced.thresholds.error_rate, { ...DEFAULT_THRESHOLDS.error_rate, minRate: 0.2 })
  t.same(replaced.thresholds.silence, { ...DEFAULT_THRESHOLDS.silence, enabled: false })
  t.same(replaced.thresholds.spend_spike, DEFAULT_THRESHOLDS.spend_spike)
  t.same(await service.settings('u1'), replaced, 'read back as answered')
  t.same(DEFAULT_THRESHOLDS.error_rate.minRate, 0.5, 'the defaults themselves are left alone')
})

// Statuses the fake knows, so that a new one fails to compile here until the tests say what it does.
const _statuses: Record<AlertStatus, true> = { active: true, acknowledged: true, snoozed: true }
void _statuses
