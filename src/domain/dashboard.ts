import { traceTree } from './trace-tree.ts'
import type { DashboardEvent, TokenTotals } from './dashboard-event.ts'
/**
 * The dashboard's rules, as pure functions over what the stores return: cluster status, agent KPIs,
 * the 30-day calendar, session and trace totals, a trace's spans. No I/O.
 */

export type Tokens = TokenTotals
export interface AgentName { id: string; displayName: string | null }

export const DAY_MS = 86_400_000
export const CALENDAR_DAYS = 30

export const zeroTokens = (): Tokens => ({ inputBase: 0, cacheCreation: 0, cacheRead: 0, output: 0, total: 0 })

/** The UTC day (YYYY-MM-DD) holding an instant. */
export function utcDay (ms: number): string {
  return new Date(ms).toISOString().slice(0, 10)
}

/**
 * A cluster is resolved only while none of its events is later than its resolvedAt, both dated and
 * received after it (`reopened`, read only for the clusters whose latest event is dated after it):
 * a regression shows as open on the very next read, before any job runs; an event dated ahead of
 * the clock and stored before the resolution does not hold the cluster open.
 */
export function clusterStatus (lastSeenMs: number, resolvedAtMs: number | undefined | null, reopened: boolean): 'open' | 'resolved' {
  if (resolvedAtMs == null) return 'open'
  return lastSeenMs <= resolvedAtMs || !reopened ? 'resolved' : 'open'
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

/**
 * The longest run a span's end counts (100 years): `durationMs` may be up to 2^53-1, and an end past
 * year 9999 has no ISO form. ClickHouse's span ends (group_totals.last_end, clickhouse/017) use the
 * same bound.
 */
export const MAX_SPAN_MS = 3_155_760_000_000

/** When an event's span ended: its timestamp (the start) plus its `durationMs`, if any. */
export function spanEndMs (startMs: number, durationMs: number | null | undefined): number {
  return startMs + Math.min(durationMs ?? 0, MAX_SPAN_MS)
}

/** What the totals of a session or trace read of each event. */
type GroupEvent = Pick<DashboardEvent, 'agentId' | 'timestamp' | 'durationMs' | 'tokens' | 'costUsd' | 'errorFingerprint'>

/**
 * Totals of a session's or trace's events (in time order): span, count, agents, errors, tokens, exact
 * cost. It starts at the first event and ends when the last span to finish does (the latest
 * timestamp + durationMs), which is not always the last one to start: a root span outlasts its
 * children, a long tool call the quick ones started after it.
 */
export function groupTotals (list: GroupEvent[], names: ReadonlyMap<string, string>) {
  const tokens = zeroTokens()
  let nano = 0
  let endMs = -Infinity
  for (const e of list) {
    for (const k of Object.keys(tokens) as (keyof Tokens)[]) tokens[k] += e.tokens[k]
    nano += Math.round(e.costUsd * 1e9)
    endMs = Math.max(endMs, spanEndMs(Date.parse(e.timestamp), e.durationMs))
  }
  const startMs = Date.parse(list[0]!.timestamp)
  return {
    start: list[0]!.timestamp,
    end: new Date(endMs).toISOString(),
    durationMs: endMs - startMs,
    eventCount: list.length,
    agents: [...new Set(list.map((e) => e.agentId))].sort().map((id) => agentOf(names, id)),
    errors: list.filter((e) => e.errorFingerprint).length,
    tokens,
    costUsd: nano / 1e9,
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

/** The first value of a metadata key among the events (git, cwd), null when none carries it. */
export function firstContext (list: { metadata: unknown }[], key: string): unknown {
  for (const e of list) {
    const value = isRecord(e.metadata) ? e.metadata[key] : undefined
    if (value !== undefined && value !== '') return value
  }
  return null
}

/**
 * A trace's event as GET /v1/me/traces/:traceId reads it back (see {@link traceSpans}). `spanId` and
 * `parentSpanId` absent or null: the event is not linked into a span tree.
 */
export type SpanEvent = GroupEvent & Pick<DashboardEvent,
  'eventId' | 'type' | 'outcome' | 'model' | 'toolExecuted' | 'toolsConsidered' | 'input' | 'reasoning' | 'transaction' | 'amount' |
  'errorMessage' | 'metadata' | 'sessionId' | 'privacyChip' | 'costStatus'> & Partial<Pick<DashboardEvent, 'spanId' | 'parentSpanId'>>

/** Metadata keys every span shows as fields of its own (or, traceId, the trace does). */
const LIFTED_KEYS = new Set(['traceId', 'spanId', 'parentSpanId', 'sessionId', 'privacyLevel'])
/** tokensBreakdown keys the span's `tokens` carries; any other (reasoning) stays in metadata. */
const COUNTED_KEYS = new Set(['inputBase', 'cacheCreation', 'cacheRead', 'output'])

function without (o: Record<string, unknown>, keys: Set<string>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => !keys.has(k)))
}

/** The metadata (always an object when sent) a span does not already show elsewhere; undefined when nothing is left. */
function ownMetadata (metadata: unknown): Record<string, unknown> | undefined {
  if (!isRecord(metadata)) return undefined
  const rest = without(metadata, LIFTED_KEYS)
  if (isRecord(rest.tokensBreakdown)) {
    const uncounted = without(rest.tokensBreakdown, COUNTED_KEYS)
    if (Object.keys(uncounted).length > 0) rest.tokensBreakdown = uncounted
    else delete rest.tokensBreakdown
  }
  return Object.keys(rest).length > 0 ? rest : undefined
}

/** The object without its members that hold no value (null, undefined, an empty list). */
function withValues<T extends Record<string, unknown>> (o: T): { [K in keyof T]?: Exclude<T[K], null> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0))) as { [K in keyof T]?: Exclude<T[K], null> }
}

/**
 * A trace's events (in time order) as its spans: each event once, linked into the span tree by
 * positions in the list (`parent`, `children`, `roots`), timed from the trace start (`offsetMs`).
 * Every fact appears once: the trace id, the agent's name, the lifted metadata keys and the parent's
 * span id are left out where the span or the trace already says them, and so are members without a
 * value: a span weighs its own content plus about 500 bytes, so a long run can be read back whole.
 */
export function traceSpans (list: SpanEvent[]) {
  const start = Date.parse(list[0]!.timestamp)
  const tree = traceTree(list)
  const spans = list.map((e, i) => ({
    eventId: e.eventId,
    agentId: e.agentId,
    offsetMs: Date.parse(e.timestamp) - start,
    type: e.type,
    parent: tree.parent[i]!,
    depth: tree.depth[i]!,
    ...withValues({
      children: tree.children[i],
      durationMs: e.durationMs,
      outcome: e.outcome,
      model: e.model,
      toolExecuted: e.toolExecuted,
      toolsConsidered: e.toolsConsidered,
      input: e.input,
      reasoning: e.reasoning,
      transaction: e.transaction,
      amount: e.amount,
      errorMessage: e.errorMessage,
      errorFingerprint: e.errorFingerprint,
      sessionId: e.sessionId,
      spanId: e.spanId,
      // Only a link the tree could not follow: otherwise it is the parent's spanId.
      parentSpanId: tree.parent[i] === null ? e.parentSpanId : null,
      privacyChip: e.privacyChip,
      tokens: e.tokens.total > 0 ? e.tokens : null,
      metadata: ownMetadata(e.metadata),
    }),
    costUsd: e.costUsd,
    costStatus: e.costStatus,
  }))
  return { roots: tree.roots, spans }
}
