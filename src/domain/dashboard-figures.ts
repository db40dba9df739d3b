import { decimalNanos, nanosText, sumDecimals } from './decimal.ts'
import type { TokenTotals } from './dashboard-event.ts'

/**
 * Arithmetic on the dashboard's aggregate rows and the shapes they are answered in: token totals,
 * exact cost sums of decimal texts, the figures of a session or trace summed over its hours, the
 * spend breakdowns' order. Pure: the repository reads the rows, this combines them. No I/O.
 */

/** Token totals from the four counts (`total` is their sum). */
export function tokenTotals (inputBase: number, cacheCreation: number, cacheRead: number, output: number): TokenTotals {
  return { inputBase, cacheCreation, cacheRead, output, total: inputBase + cacheCreation + cacheRead + output }
}

/** Events, cost and errors of an agent in a window. */
export interface WindowFigures { events: number; costUsd: number; errors: number }

export interface SpendRow {
  key: string; costUsd: number; events: number; errors: number; tokens: TokenTotals
  /** Events whose model the price catalogue does not know (their cost counts as 0). */
  unpricedEvents: number
}

/**
 * A spend row as read, its cost still the exact decimal text ClickHouse wrote (`cost`), so rows can
 * be summed and ordered exactly before the cost becomes a double.
 */
export interface SpendFigures {
  key: string; cost: string; events: number; errors: number; unpricedEvents: number
  t_in: number; t_cw: number; t_cr: number; t_out: number
}

/** A spend row as answered. */
export function spendRow (x: SpendFigures): SpendRow {
  return { key: x.key, costUsd: Number(x.cost), events: x.events, errors: x.errors, tokens: tokenTotals(x.t_in, x.t_cw, x.t_cr, x.t_out), unpricedEvents: x.unpricedEvents }
}

/** The figures of days (or any rows) summed into one, under the empty key; the cost summed exactly. */
export function spendTotal (rows: SpendFigures[]): SpendFigures {
  const sum = (name: 'events' | 'errors' | 'unpricedEvents' | 't_in' | 't_cw' | 't_cr' | 't_out') => rows.reduce((n, x) => n + x[name], 0)
  return {
    key: '', cost: sumDecimals(rows.map((x) => x.cost)), events: sum('events'), errors: sum('errors'), unpricedEvents: sum('unpricedEvents'),
    t_in: sum('t_in'), t_cw: sum('t_cw'), t_cr: sum('t_cr'), t_out: sum('t_out'),
  }
}

const byKey = (a: { key: string }, b: { key: string }) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)

/** Highest cost first, by the exact decimal (two sums a nano-dollar apart may be one double), then key. */
export function byCostThenKey (a: SpendFigures, b: SpendFigures): number {
  const d = decimalNanos(b.cost) - decimalNanos(a.cost)
  return d > 0n ? 1 : d < 0n ? -1 : byKey(a, b)
}

/** Oldest day first (keys are YYYY-MM-DD). */
export function byDay (a: { key: string }, b: { key: string }): number {
  return a.key < b.key ? -1 : 1
}

export type SpendSet = 'total' | 'agent_id' | 'model' | 'day'

/**
 * The spend summary's four breakdowns from the rows of one read with grouping sets, each row tagged
 * with its set: the total (left empty when no event counts: the empty grouping set still answers one
 * row of zeros), by agent and by model highest cost first, by day oldest first.
 */
export function spendBreakdown (rows: { set: SpendSet; figures: SpendFigures }[]): Record<SpendSet, SpendRow[]> {
  const sets: Record<SpendSet, SpendFigures[]> = { total: [], agent_id: [], model: [], day: [] }
  for (const { set, figures } of rows) {
    if (set === 'total' && figures.events === 0) continue
    sets[set].push(figures)
  }
  sets.agent_id.sort(byCostThenKey)
  sets.model.sort(byCostThenKey)
  sets.day.sort(byDay)
  return { total: sets.total.map(spendRow), agent_id: sets.agent_id.map(spendRow), model: sets.model.map(spendRow), day: sets.day.map(spendRow) }
}

/** One agent's spend per day (oldest first) and their total, from its rows of the daily rollup. */
export function spendDays (rows: SpendFigures[]): { days: SpendRow[]; total: SpendRow } {
  const days = [...rows].sort(byDay)
  return { days: days.map(spendRow), total: spendRow(spendTotal(days)) }
}

/**
 * A session's or trace's figures over some of its rows (hours of the rollup, or a recount from
 * events): `last_ms` is its last event's time (the list's order), `end_ms` its latest span end
 * (start + duration), `cost` the exact decimal text.
 */
export interface GroupFigures {
  id: string; start_ms: number; last_ms: number; end_ms: number; n: number; agents: string[]
  t_in: number; t_cw: number; t_cr: number; t_out: number; cost: string; errors: number
}

/**
 * The rows of each group combined into one: earliest start, latest last event and end, the counts
 * and the exact cost summed, the agents united. Ordered as the lists are: latest last event first,
 * then id.
 */
export function combineGroups (rows: GroupFigures[]): GroupFigures[] {
  const groups = new Map<string, GroupFigures & { nanos: bigint }>()
  for (const x of rows) {
    const g = groups.get(x.id)
    if (!g) {
      groups.set(x.id, { ...x, agents: [...x.agents], nanos: decimalNanos(x.cost) })
      continue
    }
    g.start_ms = Math.min(g.start_ms, x.start_ms)
    g.last_ms = Math.max(g.last_ms, x.last_ms)
    g.end_ms = Math.max(g.end_ms, x.end_ms)
    g.n += x.n
    g.agents = [...new Set([...g.agents, ...x.agents])]
    g.t_in += x.t_in
    g.t_cw += x.t_cw
    g.t_cr += x.t_cr
    g.t_out += x.t_out
    g.errors += x.errors
    g.nanos += decimalNanos(x.cost)
  }
  return [...groups.values()]
    .map(({ nanos, ...g }) => ({ ...g, cost: nanosText(nanos) }))
    .sort((a, b) => b.last_ms - a.last_ms || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/** A session's or trace's summary as the lists answer it (without its id). */
export function groupSummary (x: GroupFigures) {
  return {
    start: new Date(x.start_ms).toISOString(),
    end: new Date(x.end_ms).toISOString(),
    durationMs: x.end_ms - x.start_ms,
    events: x.n,
    agents: [...x.agents].sort(),
    tokens: tokenTotals(x.t_in, x.t_cw, x.t_cr, x.t_out),
    costUsd: Number(x.cost),
    errors: x.errors,
  }
}

export type GroupSummary = ReturnType<typeof groupSummary>
export type SessionSummary = { sessionId: string } & GroupSummary
export type TraceSummary = { traceId: string } & GroupSummary
