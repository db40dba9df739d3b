/**
 * Anomaly rules: pure functions from an agent's recent aggregates and the user's thresholds to a
 * finding (or none). No I/O; the figures come from ClickHouse, the thresholds from alert settings.
 */

const USD = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 2 })
/** An amount as the dashboard writes it: `$28,500.00`. */
const dollars = (usd: number) => USD.format(usd)

/** What the evaluation reads for one agent at time `now` (windows relative to it). */
export interface AgentAggregates {
  agentId: string
  /** Events and failed events (type error or outcome failed) in the error window. */
  recentTotal: number
  recentFailed: number
  /** Cost in USD in the last hour, and in the 24 hours before it. */
  lastHourCost: number
  trailingDayCost: number
  /** p95 of durationMs in the latency window (null without durations) and how many durations. */
  recentP95: number | null
  recentDurations: number
  /** p95 of durationMs over the 24 hours before the latency window. */
  baselineP95: number | null
  /** Distinct hours with events, and events, in the 24 hours before the silence window. */
  activeHours: number
  previousEvents: number
  /** Events in the silence window. */
  silenceWindowEvents: number
}

export type RuleName = 'error_rate' | 'spend_spike' | 'latency_spike' | 'silence'
type Severity = 'warning' | 'critical'

export interface Finding {
  rule: RuleName
  severity: Severity
  message: string
  /** The figures that crossed the threshold, and the thresholds themselves. */
  figures: Record<string, number | null>
}

export interface Thresholds {
  error_rate: { enabled: boolean; windowMinutes: number; minFailed: number; minRate: number }
  spend_spike: { enabled: boolean; multiplier: number; floorUsd: number }
  latency_spike: { enabled: boolean; windowMinutes: number; multiplier: number; minP95Ms: number; minEvents: number }
  silence: { enabled: boolean; silenceMinutes: number; minActiveHours: number; minEvents: number }
}

/** Defaults; each user can override any of them (PUT /v1/me/alert-settings). */
export const DEFAULT_THRESHOLDS: Thresholds = {
  error_rate: { enabled: true, windowMinutes: 15, minFailed: 10, minRate: 0.5 },
  spend_spike: { enabled: true, multiplier: 5, floorUsd: 1 },
  latency_spike: { enabled: true, windowMinutes: 15, multiplier: 3, minP95Ms: 1000, minEvents: 20 },
  silence: { enabled: true, silenceMinutes: 60, minActiveHours: 12, minEvents: 50 },
}

/** The user's settings laid over the defaults, rule by rule and field by field. */
export function mergeThresholds (overrides: Partial<Record<RuleName, Record<string, unknown>>> | null | undefined): Thresholds {
  const merged = structuredClone(DEFAULT_THRESHOLDS) as unknown as Record<string, Record<string, unknown>>
  for (const [rule, values] of Object.entries(overrides ?? {})) {
    if (merged[rule] && values) Object.assign(merged[rule]!, values)
  }
  return merged as unknown as Thresholds
}

const round = (n: number, places = 4) => Math.round(n * 10 ** places) / 10 ** places

export function errorRate (a: AgentAggregates, t: Thresholds['error_rate']): Finding | null {
  if (!t.enabled || a.recentTotal === 0) return null
  const rate = a.recentFailed / a.recentTotal
  if (a.recentFailed < t.minFailed || rate < t.minRate) return null
  return {
    rule: 'error_rate',
    severity: rate >= 0.8 ? 'critical' : 'warning',
    message: `${a.recentFailed} of ${a.recentTotal} events failed in the last ${t.windowMinutes} min (${Math.round(rate * 100)} %)`,
    figures: { failed: a.recentFailed, total: a.recentTotal, rate: round(rate), minFailed: t.minFailed, minRate: t.minRate },
  }
}

export function spendSpike (a: AgentAggregates, t: Thresholds['spend_spike']): Finding | null {
  if (!t.enabled) return null
  const hourlyAverage = a.trailingDayCost / 24
  if (a.lastHourCost < t.floorUsd || a.lastHourCost < t.multiplier * hourlyAverage) return null
  return {
    rule: 'spend_spike',
    severity: hourlyAverage > 0 && a.lastHourCost >= 2 * t.multiplier * hourlyAverage ? 'critical' : 'warning',
    message: `spent ${dollars(a.lastHourCost)} in the last hour against an hourly average of ${dollars(hourlyAverage)}`,
    figures: { lastHourUsd: round(a.lastHourCost, 6), hourlyAverageUsd: round(hourlyAverage, 6), multiplier: t.multiplier, floorUsd: t.floorUsd },
  }
}

export function latencySpike (a: AgentAggregates, t: Thresholds['latency_spike']): Finding | null {
  if (!t.enabled || a.recentP95 === null || a.recentDurations < t.minEvents || a.recentP95 < t.minP95Ms) return null
  if (a.baselineP95 !== null && a.recentP95 < t.multiplier * a.baselineP95) return null
  return {
    rule: 'latency_spike',
    severity: a.baselineP95 !== null && a.recentP95 >= 2 * t.multiplier * a.baselineP95 ? 'critical' : 'warning',
    message: `p95 duration ${Math.round(a.recentP95)} ms in the last ${t.windowMinutes} min` +
      (a.baselineP95 === null ? '' : ` against ${Math.round(a.baselineP95)} ms before`),
    figures: { p95Ms: a.recentP95, baselineP95Ms: a.baselineP95, events: a.recentDurations, multiplier: t.multiplier, minP95Ms: t.minP95Ms },
  }
}

export function silence (a: AgentAggregates, t: Thresholds['silence']): Finding | null {
  if (!t.enabled || a.silenceWindowEvents > 0) return null
  if (a.activeHours < t.minActiveHours || a.previousEvents < t.minEvents) return null
  return {
    rule: 'silence',
    severity: 'warning',
    message: `no events for ${t.silenceMinutes} min after ${a.previousEvents} events over ${a.activeHours} hours`,
    figures: { silentMinutes: t.silenceMinutes, previousEvents: a.previousEvents, activeHours: a.activeHours },
  }
}

/** Every finding for one agent. */
export function evaluateAgent (a: AgentAggregates, t: Thresholds): Finding[] {
  return [errorRate(a, t.error_rate), spendSpike(a, t.spend_spike), latencySpike(a, t.latency_spike), silence(a, t.silence)]
    .filter((f): f is Finding => f !== null)
}
