import t from 'tap'
import { agentKpis, calendar, clusterStatus, groupTotals, MAX_SPAN_MS, traceSpans, zeroTokens, type SpanEvent } from '../../src/domain/dashboard.ts'
import { DEFAULT_THRESHOLDS } from '../../src/domain/anomaly-rules.ts'
import { alertSettingsBody } from '../../schemas/alert.ts'

t.test('cluster status: resolved only while no event is later than resolvedAt, dated and received', async (t) => {
  t.equal(clusterStatus(100, undefined, false), 'open')
  t.equal(clusterStatus(100, null, false), 'open')
  t.equal(clusterStatus(100, 100, false), 'resolved')
  t.equal(clusterStatus(101, 100, true), 'open')
  t.equal(clusterStatus(101, 100, false), 'resolved', 'dated after, received before: an event from a clock ahead')
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

t.test('group totals name agents', async (t) => {
  const base = { tokens: { ...zeroTokens(), output: 1, total: 1 }, costUsd: 0.1, errorFingerprint: null, durationMs: null }
  const list = [
    { ...base, agentId: 'b', timestamp: '2026-05-01T00:00:00.000Z' },
    { ...base, agentId: 'a', timestamp: '2026-05-01T00:00:01.500Z', errorFingerprint: 'f' },
  ]
  const totals = groupTotals(list, new Map([['a', 'alpha']]))
  t.match(totals, { durationMs: 1500, eventCount: 2, errors: 1, costUsd: 0.2, tokens: { output: 2, total: 2 } })
  t.same(totals.agents, [{ id: 'a', displayName: 'alpha' }, { id: 'b', displayName: null }])
})

t.test('group totals end when the last span to finish does, not when the last one starts', async (t) => {
  const at = (ms: number) => new Date(Date.parse('2026-05-01T00:00:00.000Z') + ms).toISOString()
  const span = (startMs: number, durationMs: number | null) =>
    ({ agentId: 'a', timestamp: at(startMs), durationMs, tokens: zeroTokens(), costUsd: 0, errorFingerprint: null })
  // A root that ran 437 ms, its children done by 408 ms.
  t.match(groupTotals([span(0, 437), span(10, 100), span(408, null)], new Map()), { start: at(0), end: at(437), durationMs: 437 })
  // A child that ran 2.6 s, started before quick ones that end at 95 ms.
  t.match(groupTotals([span(0, 20), span(5, 2600), span(60, 35)], new Map()), { end: at(2605), durationMs: 2605 })
  t.match(groupTotals([span(0, null), span(1000, 0)], new Map()), { end: at(1000), durationMs: 1000 }, 'without durations: the last start')
  t.match(groupTotals([span(0, Number.MAX_SAFE_INTEGER)], new Map()), { durationMs: MAX_SPAN_MS }, 'an absurd duration is bounded, the end still an instant')
})

t.test('trace spans: each event once, linked by positions, timed from the start, without repeated or empty members', async (t) => {
  const event = (over: Partial<SpanEvent>): SpanEvent => ({
    eventId: 'e', agentId: 'a', timestamp: '2026-05-01T00:00:00.000Z', type: 'tool', outcome: null, model: null, toolExecuted: null,
    toolsConsidered: [], durationMs: null, input: null, reasoning: null, transaction: null, amount: null, errorMessage: null,
    errorFingerprint: null, metadata: null, sessionId: null, spanId: null, parentSpanId: null, privacyChip: null,
    tokens: zeroTokens(), costUsd: 0, costStatus: 'no_model', ...over,
  })
  const { roots, spans } = traceSpans([
    event({
      eventId: 'root', spanId: 'r', model: 'gpt-4o', sessionId: 's', privacyChip: 'STD', costUsd: 0.5, costStatus: 'priced',
      tokens: { ...zeroTokens(), inputBase: 10, output: 5, total: 15 },
      metadata: { traceId: 't', spanId: 'r', sessionId: 's', privacyLevel: 'standard', tokensBreakdown: { inputBase: 10, output: 5, reasoning: 2 }, denial: { tool: 'rm' } },
    }),
    event({ eventId: 'child', timestamp: '2026-05-01T00:00:01.250Z', spanId: 'c', parentSpanId: 'r', durationMs: 40, metadata: { traceId: 't', spanId: 'c', parentSpanId: 'r', wakeup: 'cron' } }),
    event({ eventId: 'orphan', timestamp: '2026-05-01T00:00:02.000Z', spanId: 'o', parentSpanId: 'gone', toolsConsidered: ['a', 'b'], metadata: { traceId: 't', spanId: 'o', parentSpanId: 'gone' } }),
  ])
  t.same(roots, [0, 2])
  t.same(spans[0], {
    eventId: 'root', agentId: 'a', offsetMs: 0, type: 'tool', parent: null, depth: 0, children: [1], model: 'gpt-4o', sessionId: 's', spanId: 'r',
    privacyChip: 'STD', tokens: { inputBase: 10, cacheCreation: 0, cacheRead: 0, output: 5, total: 15 },
    metadata: { tokensBreakdown: { reasoning: 2 }, denial: { tool: 'rm' } }, costUsd: 0.5, costStatus: 'priced',
  }, 'metadata keeps only what no field shows (reasoning tokens, denial)')
  t.same(spans[1], {
    eventId: 'child', agentId: 'a', offsetMs: 1250, type: 'tool', parent: 0, depth: 1, durationMs: 40, spanId: 'c', metadata: { wakeup: 'cron' },
    costUsd: 0, costStatus: 'no_model',
  }, 'a linked parent is a position, not a repeated span id; no tokens, no nulls')
  t.match(spans[2], { parent: null, parentSpanId: 'gone', toolsConsidered: ['a', 'b'] }, 'a parent that is not in the trace keeps its span id')
  t.notOk('metadata' in spans[2]!, 'metadata with nothing left is left out')
})

t.test('the alert-settings schema offers exactly the fields of the default thresholds', async (t) => {
  const rules = alertSettingsBody.properties as Record<string, { properties: Record<string, unknown> }>
  t.same(Object.keys(rules).sort(), Object.keys(DEFAULT_THRESHOLDS).sort())
  for (const [rule, fields] of Object.entries(DEFAULT_THRESHOLDS)) t.same(Object.keys(rules[rule]!.properties).sort(), Object.keys(fields).sort(), rule)
})
