import t from 'tap'
import { DEFAULT_THRESHOLDS, errorRate, evaluateAgent, latencySpike, mergeThresholds, silence, spendSpike, type AgentAggregates } from '../../src/domain/anomaly-rules.ts'

const quiet: AgentAggregates = {
  agentId: 'a', recentTotal: 100, recentFailed: 1, lastHourCost: 0.5, trailingDayCost: 12, recentP95: 400, recentDurations: 50,
  baselineP95: 380, activeHours: 20, previousEvents: 500, silenceWindowEvents: 30,
}

t.test('a steady agent raises nothing', async (t) => {
  t.same(evaluateAgent(quiet, DEFAULT_THRESHOLDS), [])
})

t.test('error rate: needs both the count and the share', async (t) => {
  const d = DEFAULT_THRESHOLDS.error_rate
  t.equal(errorRate({ ...quiet, recentTotal: 18, recentFailed: 9 }, d), null, '9 failures is under the count')
  t.equal(errorRate({ ...quiet, recentTotal: 30, recentFailed: 14 }, d), null, '47 % is under the share')
  const f = errorRate({ ...quiet, recentTotal: 20, recentFailed: 10 }, d)
  t.match(f, { rule: 'error_rate', severity: 'warning', figures: { failed: 10, total: 20, rate: 0.5 } })
  t.equal(errorRate({ ...quiet, recentTotal: 10, recentFailed: 10 }, d)?.severity, 'critical')
  t.equal(errorRate({ ...quiet, recentTotal: 10, recentFailed: 10 }, { ...d, enabled: false }), null)
})

t.test('spend spike: several times the trailing hourly average, and above the floor', async (t) => {
  const d = DEFAULT_THRESHOLDS.spend_spike
  t.equal(spendSpike({ ...quiet, lastHourCost: 4.9, trailingDayCost: 24 }, d), null, '4.9 × the average')
  t.match(spendSpike({ ...quiet, lastHourCost: 5, trailingDayCost: 24 }, d), { rule: 'spend_spike', figures: { hourlyAverageUsd: 1 } })
  t.equal(spendSpike({ ...quiet, lastHourCost: 0.9, trailingDayCost: 0 }, d), null, 'below the $1 floor')
  t.match(spendSpike({ ...quiet, lastHourCost: 3, trailingDayCost: 0 }, d), { severity: 'warning' }, 'no history: the floor alone')
  t.match(spendSpike({ ...quiet, lastHourCost: 10_000, trailingDayCost: 0 }, d), { severity: 'warning' }, 'no history: a warning whatever the amount (docs/api.md)')
  t.equal(spendSpike({ ...quiet, lastHourCost: 10, trailingDayCost: 24 }, d)?.severity, 'critical')
  t.equal(spendSpike({ ...quiet, lastHourCost: 28_500, trailingDayCost: 24_000 }, d)?.message, 'spent $28,500.00 in the last hour against an hourly average of $1,000.00',
    'amounts written as the dashboard writes them')
})

t.test('latency spike: p95 against the baseline, with enough events and above a floor', async (t) => {
  const d = DEFAULT_THRESHOLDS.latency_spike
  t.match(latencySpike({ ...quiet, recentP95: 3000, baselineP95: 900 }, d), { rule: 'latency_spike', figures: { p95Ms: 3000, baselineP95Ms: 900 } })
  t.equal(latencySpike({ ...quiet, recentP95: 2600, baselineP95: 900 }, d), null, 'under 3 ×')
  t.equal(latencySpike({ ...quiet, recentP95: 3000, baselineP95: 900, recentDurations: 19 }, d), null, 'too few events')
  t.equal(latencySpike({ ...quiet, recentP95: 900, baselineP95: 100 }, d), null, 'under the 1 s floor')
  t.equal(latencySpike({ ...quiet, recentP95: null, recentDurations: 0 }, d), null)
})

t.test('silence: an agent that streamed steadily and stopped', async (t) => {
  const d = DEFAULT_THRESHOLDS.silence
  t.match(silence({ ...quiet, silenceWindowEvents: 0 }, d), { rule: 'silence', figures: { previousEvents: 500, activeHours: 20 } })
  t.equal(silence({ ...quiet, silenceWindowEvents: 0, activeHours: 5 }, d), null, 'not steady enough')
  t.equal(silence({ ...quiet, silenceWindowEvents: 0, previousEvents: 49 }, d), null)
  t.equal(silence({ ...quiet, silenceWindowEvents: 1 }, d), null)
})

t.test('user overrides lay over the defaults field by field', async (t) => {
  const m = mergeThresholds({ error_rate: { minFailed: 3 }, silence: { enabled: false } })
  t.equal(m.error_rate.minFailed, 3)
  t.equal(m.error_rate.minRate, DEFAULT_THRESHOLDS.error_rate.minRate)
  t.equal(m.silence.enabled, false)
  t.equal(DEFAULT_THRESHOLDS.error_rate.minFailed, 10, 'the defaults are not mutated')
})
