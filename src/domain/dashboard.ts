import { traceTree } from './trace-tree.ts'
/**
 * The dashboard's rules, as pure functions over what the stores return: cluster status, agent KPIs,
 * the 30-day calendar, session and trace totals, the trace timeline. No I/O.
 */

export interface Tokens { inputBase: number; cacheCreation: number; cacheRead: number; output: number; total: number }
export interface AgentName { id: string; displayName: string | null }

export const DAY_MS = 86_400_000
export const CALENDAR_DAYS = 30

export const zeroTokens = (): Tokens => ({ inputBase: 0, cacheCreation: 0, cacheRead: 0, output: 0, total: 0 })

/** The UTC day (YYYY-MM-DD) holding an instant. */
export function utcDay (ms: number): string {
  return new Date(ms).toISOString().slice(0, 10)
}

/**
 * A cluster is resolved only while none of its events is later than its resolvedAt: a regression
 * shows as open on the very next read, before any job runs.
 */
export function clusterStatus (lastSeenMs: number, resolvedAtMs: number | undefined | null): 'open' | 'resolved' {
  return resolvedAtMs != null && lastSeenMs <= resolvedAtMs ? 'resolved' : 'open'
}

export interface Figures { events: number; costUsd: number; errors: number }

/** An agent's KPIs from its last 24 h (raw events) and its last 30 days (daily rollup). */
export function agentKpis (day: Figures | undefined, month: Figures | undefined) {
  return {
    events24h: day?.events ?? 0,
    cost24h: day?.costUsd ?? 0,
    events30d: month?.events ?? 0,
    cost30d: month?.costUsd ?? 0,
    errors30d: month?.errors ?? 0,
    errorRate30d: month && month.events > 0 ? month.errors / month.events : 0,
  }
}

/** The first day of the `days`-day window ending today (UTC). */
export function windowStart (now: number, days: number): string {
  return utcDay(now - (days - 1) * DAY_MS)
}

/** The 30 days ending today, oldest first, zero-filled where the rollup has no row. */
export function calendar (now: number, byDay: Map<string, Figures & { tokens: Tokens }>) {
  return Array.from({ length: CALENDAR_DAYS }, (_, i) => {
    const day = utcDay(now - (CALENDAR_DAYS - 1 - i) * DAY_MS)
    const d = byDay.get(day)
    return { day, eventCount: d?.events ?? 0, errors: d?.errors ?? 0, costUsd: d?.costUsd ?? 0, tokens: d?.tokens ?? zeroTokens() }
  })
}

/** The agent reference shown wherever a record names an agent. */
export function agentOf (names: ReadonlyMap<string, string>, id: string): AgentName {
  return { id, displayName: names.get(id) ?? null }
}

interface GroupEvent {
  agentId: string
  timestamp: string
  tokens: Tokens
  costUsd: number
  errorFingerprint: string | null
}

/** Totals of a session's or trace's events (in time order): span, count, agents, errors, tokens, exact cost. */
export function groupTotals (list: GroupEvent[], names: ReadonlyMap<string, string>) {
  const tokens = zeroTokens()
  let nano = 0
  for (const e of list) {
    for (const k of Object.keys(tokens) as (keyof Tokens)[]) tokens[k] += e.tokens[k]
    nano += Math.round(e.costUsd * 1e9)
  }
  const first = list[0]!.timestamp
  const last = list[list.length - 1]!.timestamp
  return {
    start: first,
    end: last,
    durationMs: Date.parse(last) - Date.parse(first),
    eventCount: list.length,
    agents: [...new Set(list.map((e) => e.agentId))].sort().map((id) => agentOf(names, id)),
    errors: list.filter((e) => e.errorFingerprint).length,
    tokens,
    costUsd: nano / 1e9,
  }
}

interface TimelineEvent extends GroupEvent {
  eventId: string
  type: string
  toolExecuted: string | null
  outcome: string | null
  durationMs: number | null
  privacyChip: 'MIN' | 'STD' | 'FULL' | null
  /** Absent or null: the event is not linked into a span tree. */
  spanId?: string | null
  parentSpanId?: string | null
  metadata: unknown
}

const metadataValue = (e: { metadata: unknown }, key: string): unknown => {
  const m = e.metadata
  return m !== null && typeof m === 'object' && !Array.isArray(m) ? (m as Record<string, unknown>)[key] : undefined
}

/** The first value of a metadata key among the events (git, cwd), null when none carries it. */
export function firstContext (list: { metadata: unknown }[], key: string): unknown {
  for (const e of list) {
    const value = metadataValue(e, key)
    if (value !== undefined && value !== '') return value
  }
  return null
}

/** The trace timeline: each event's offset from the trace start, with its denial and wakeup as sent. */
export function timeline (list: TimelineEvent[], names: ReadonlyMap<string, string>) {
  const start = Date.parse(list[0]!.timestamp)
  const { links } = traceTree(list)
  return list.map((e) => ({
    eventId: e.eventId,
    agentId: e.agentId,
    agent: agentOf(names, e.agentId),
    type: e.type,
    toolExecuted: e.toolExecuted,
    outcome: e.outcome,
    offsetMs: Date.parse(e.timestamp) - start,
    durationMs: e.durationMs,
    privacyChip: e.privacyChip,
    denial: metadataValue(e, 'denial') ?? null,
    wakeup: metadataValue(e, 'wakeup') ?? null,
    spanId: e.spanId ?? null,
    parentSpanId: e.parentSpanId ?? null,
    ...links.get(e.eventId)!,
  }))
}

/** Event ids of a trace's root spans (every event, for a trace without span links). */
export function timelineRoots (list: TimelineEvent[]): string[] {
  return traceTree(list).roots
}
