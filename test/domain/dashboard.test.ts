import t from 'tap'
import { agentKpis, calendar, clusterStatus, groupTotals, timeline, zeroTokens } from '../../src/domain/dashboard.ts'
import { DEFAULT_THRESHOLDS } from '../../src/domain/anomaly-rules.ts'
import { alertSettingsBody } from '../../schemas/alert.ts'

t.test('cluster status: resolved only while no event is later than resolvedAt', async (t) => {
  t.equal(clusterStatus(100, undefined), 'open')
  t.equal(clusterStatus(100, null), 'open')
  t.equal(clusterStatus(100, 100), 'resolved')
  t.equal(clusterStatus(101, 100), 'open')
})

t.test('KPIs: zero without figures, an error rate from the 30-day figures', async (t) => {
  t.same(agentKpis(undefined, undefined), { events24h: 0, cost24h: 0, events30d: 0, cost30d: 0, errors30d: 0, errorRate30d: 0 })
  t.match(agentKpis({ events: 1, costUsd: 0.5, errors: 0 }, { events: 4, costUsd: 2, errors: 1 }), { events24h: 1, events30d: 4, errorRate30d: 0.25 })
})

t.test('calendar: 30 UTC days ending today, oldest first, zero-filled with a tokens object', async (t) => {
  const now = Date.parse('2026-05-31T12:00:00Z')
  const days = calendar(now, new Map([['2026-05-30', { events: 3, costUsd: 1, errors: 1, tokens: { ...zeroTokens(), output: 7, total: 7 } }]]))
  t.equal(days.length, 30)
  t.equal(days[0]!.day, '2026-05-02')
  t.same(days[29], { day: '2026-05-31', eventCount: 0, errors: 0, costUsd: 0, tokens: zeroTokens() })
  t.match(days[28], { day: '2026-05-30', eventCount: 3, tokens: { output: 7, total: 7 } })
})

t.test('group totals and the timeline name agents and carry denial and wakeup', async (t) => {
  const base = { tokens: { ...zeroTokens(), output: 1, total: 1 }, costUsd: 0.1, errorFingerprint: null, type: 'tool', toolExecuted: null, outcome: null, durationMs: null, privacyChip: null }
  const list = [
    { ...base, eventId: 'e1', agentId: 'b', timestamp: '2026-05-01T00:00:00.000Z', metadata: { denial: { tool: 'rm' } } },
    { ...base, eventId: 'e2', agentId: 'a', timestamp: '2026-05-01T00:00:01.500Z', metadata: { wakeup: 'cron' }, errorFingerprint: 'f' },
  ]
  const names = new Map([['a', 'alpha']])
  const totals = groupTotals(list, names)
  t.match(totals, { durationMs: 1500, eventCount: 2, errors: 1, costUsd: 0.2, tokens: { output: 2, total: 2 } })
  t.same(totals.agents, [{ id: 'a', displayName: 'alpha' }, { id: 'b', displayName: null }])
  const line = timeline(list, names)
  t.match(line, [{ offsetMs: 0, denial: { tool: 'rm' }, wakeup: null }, { offsetMs: 1500, denial: null, wakeup: 'cron', agent: { id: 'a', displayName: 'alpha' } }])
})

t.test('the alert-settings schema offers exactly the fields of the default thresholds', async (t) => {
  const rules = alertSettingsBody.properties as Record<string, { properties: Record<string, unknown> }>
  t.same(Object.keys(rules).sort(), Object.keys(DEFAULT_THRESHOLDS).sort())
  for (const [rule, fields] of Object.entries(DEFAULT_THRESHOLDS)) t.same(Object.keys(rules[rule]!.properties).sort(), Object.keys(fields).sort(), rule)
})
