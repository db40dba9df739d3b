import type { ClickHouseClient } from '@clickhouse/client'
import { pageOf, type Page, type PageStart } from '../domain/cursor.ts'
import { isoFromMs as iso } from './timestamps.ts'
import { BY_SKIP_INDEX } from './clickhouse-client.ts'
import { DAY_MS } from '../domain/dashboard.ts'
import type { DashboardEvent } from '../domain/dashboard-event.ts'
import {
  combineGroups, groupSummary, spendBreakdown, spendDays, spendRow,
  type GroupFigures, type SessionSummary, type SpendFigures, type SpendRow, type SpendSet, type TraceSummary, type WindowFigures,
} from '../domain/dashboard-figures.ts'
import { WindowHints, widening } from './window-hints.ts'
import { EVENT_COLUMNS, SPAN_END, TOKEN_SUMS, newestEventUpTo, orNull, toEvent, tokensOf } from './event-rows.ts'

export { tokensOf }

export type { DashboardEvent } from '../domain/dashboard-event.ts'
export type { SessionSummary, SpendRow, TraceSummary, WindowFigures } from '../domain/dashboard-figures.ts'

/** An event's span end in SQL, as spanEndMs (src/domain/dashboard.ts) and group_totals.last_end compute it. */

/** Who is reading: the user, and their soft-deleted agents whose events every read hides. */
export interface Reader { userId: string; hidden: string[] }

/** A row of a spend rollup read (cost as decimal text, sums of events, errors, unpriced events and tokens). */
function spendFigures (x: Record<string, any>, key: string = x.key): SpendFigures {
  return {
    key, cost: x.cost, events: Number(x.n), errors: Number(x.errors), unpricedEvents: Number(x.unpriced),
    t_in: Number(x.t_in), t_cw: Number(x.t_cw), t_cr: Number(x.t_cr), t_out: Number(x.t_out),
  }
}

/** A row of a group's totals (an hour of group_totals, or a recount from events). */
function groupFigures (x: Record<string, any>): GroupFigures {
  return {
    id: x.id, start_ms: Number(x.start_ms), last_ms: Number(x.last_ms), end_ms: Number(x.end_ms), n: Number(x.n), agents: x.agents,
    t_in: Number(x.t_in), t_cw: Number(x.t_cw), t_cr: Number(x.t_cr), t_out: Number(x.t_out), cost: x.cost, errors: Number(x.errors),
  }
}

/**
 * Events, cost and errors per agent of `scope` since an instant (any instant, not only a whole
 * hour), in two parts to sum: the whole hours from the hourly rollup, and the part of an hour before
 * the first of them from the events. Its parameters are `windowParams`.
 */
function windowParts (scope: string): string {
  return `SELECT agent_id, sum(events) AS n, sum(cost_usd) AS cost, sum(errors) AS errors FROM agent_hourly
    WHERE ${scope} AND hour >= toDateTime({edgeS:UInt32}, 'UTC')
    GROUP BY agent_id
    UNION ALL
    SELECT agent_id, count() AS n, sum(toDecimal128(cost_usd, 9)) AS cost, countIf(error_fingerprint != '') AS errors FROM events
    WHERE ${scope} AND ts >= fromUnixTimestamp64Milli({since:Int64}) AND ts < fromUnixTimestamp64Milli({edge:Int64})
    GROUP BY agent_id`
}

function windowParams (sinceMs: number): { since: number; edge: number; edgeS: number } {
  const hourMs = 3_600_000
  const edge = Math.ceil(sinceMs / hourMs) * hourMs
  return { since: sinceMs, edge, edgeS: edge / 1000 }
}

export interface ClusterAggregate {
  fingerprint: string; count: number; firstSeen: string; lastSeen: string; lastSeenMs: number
  sampleMessage: string | null; agents: string[]; tools: string[]
}

/**
 * Dashboard reads over ClickHouse. Every query is bounded to one user (the leading column of the
 * sort key) and drops the user's soft-deleted agents.
 */
/**
 * Of `clusters` (fingerprint and latest event time), the resolved ones (`resolved`: fingerprint →
 * resolvedAt, unix ms) with an event dated *and received* after their resolution: an event dated
 * ahead of the clock (a skewed host), stored before the resolution, does not reopen a cluster (nor
 * keep one from being resolved) until an event arrives after it. Only the clusters whose latest event
 * is dated after their resolution are candidates (few); their events dated after the earliest
 * resolution are read by the fingerprint's bloom filter.
 */
export async function reopenedClusters (ch: ClickHouseClient, reader: Reader, clusters: { fingerprint: string; lastSeenMs: number }[], resolved: Map<string, number>): Promise<Set<string>> {
  const candidates = new Map<string, number>()
  for (const c of clusters) {
    const at = resolved.get(c.fingerprint)
    if (at !== undefined && c.lastSeenMs > at) candidates.set(c.fingerprint, at)
  }
  if (candidates.size === 0) return new Set()
  const fps = [...candidates.keys()]
  const at = fps.map((fp) => candidates.get(fp)!)
  const rs = await ch.query({
    query: `/* svc:clusters_reopened */ SELECT DISTINCT error_fingerprint AS fp FROM events
      WHERE user_id = {u:String} AND error_fingerprint IN {fps:Array(String)} AND agent_id NOT IN {hidden:Array(String)}
        AND ts > fromUnixTimestamp64Milli({earliest:Int64})
        AND ts > fromUnixTimestamp64Milli({at:Array(Int64)}[indexOf({fps:Array(String)}, error_fingerprint)])
        AND received_at > fromUnixTimestamp64Milli({at:Array(Int64)}[indexOf({fps:Array(String)}, error_fingerprint)])
      ${BY_SKIP_INDEX}`,
    query_params: { u: reader.userId, hidden: reader.hidden, fps, at, earliest: Math.min(...at) },
    format: 'JSONEachRow',
  })
  return new Set((await rs.json<{ fp: string }>()).map((r) => r.fp))
}

export class DashboardRepository {
  private readonly hints = new WindowHints()

  constructor (private readonly ch: ClickHouseClient) {}

  /** reopenedClusters of these clusters, given when each was resolved (the unresolved left out). */
  async reopened (r: Reader, clusters: { fingerprint: string; lastSeenMs: number }[], resolved: Map<string, number>): Promise<Set<string>> {
    return reopenedClusters(this.ch, r, clusters, resolved)
  }

  private async rows<T = Record<string, any>>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const rs = await this.ch.query({ query, query_params: params, format: 'JSONEachRow' })
    return rs.json<T>()
  }

  /**
   * A page of the newest events, looked for in a widening window (`widening`) below the reader's
   * newest event at or below the page's start, so that the common case reads only recent granules,
   * also when the last hours before the start hold no event (a fleet that paused overnight). Only
   * events received by `asOf` count, so a walk over pages reads one fixed history.
   */
  async events (r: Reader, opts: { limit: number; sinceMs: number; agentId?: string | undefined; start: PageStart }): Promise<Page<DashboardEvent>> {
    const { asOf, after } = opts.start
    const top = after ? after.ms : asOf
    // The newest event at or below the start (hidden agents' too: it only places the window).
    const newest = newestEventUpTo('fromUnixTimestamp64Milli({top:Int64})', opts.agentId ? 'AND agent_id = {agent:String}' : '')
    let rows: Record<string, any>[] = []
    for (const window of widening(opts.agentId)) {
      const from = window === Infinity ? 'fromUnixTimestamp64Milli({since:Int64})' : `${newest} - toIntervalMillisecond(${window})`
      rows = await this.rows(
        `/* svc:me_events */ SELECT ${EVENT_COLUMNS} FROM events
         WHERE user_id = {u:String} AND agent_id NOT IN {hidden:Array(String)} AND ts >= fromUnixTimestamp64Milli({since:Int64})
           AND ts >= ${from} AND received_at <= fromUnixTimestamp64Milli({asOf:Int64})
           ${after ? 'AND (ts, event_id) < (fromUnixTimestamp64Milli({afterMs:Int64}), {afterId:String})' : ''}
           ${opts.agentId ? 'AND agent_id = {agent:String}' : ''}
         ORDER BY ts DESC, event_id DESC LIMIT {limit:UInt32}`,
        { u: r.userId, hidden: r.hidden, since: opts.sinceMs, top, asOf, afterMs: after?.ms ?? 0, afterId: after?.id ?? '', agent: opts.agentId ?? '', limit: opts.limit + 1 },
      )
      // A window that reaches `since` from the start reaches it from the newest event too: the last.
      if (rows.length > opts.limit || window === Infinity || top - window <= opts.sinceMs) break
    }
    return pageOf('events', asOf, rows.map(toEvent), opts.limit, (e) => ({ ms: Date.parse(e.timestamp), id: e.eventId }))
  }

  /**
   * A page of the sessions or traces with the latest activity, aggregated over all their events
   * received by `asOf`. The ids are found first in a widening window below the page's start
   * (`widening`): every group active in a window ends later than every group
   * that is not, so once a window yields enough ids they are the next ones, and only those groups are
   * aggregated in full. Groups are ordered by their last event (`last_ms`), then id; a group's end
   * (`end_ms`) is its latest span end, which may be later and is not the order.
   */
  private async grouped (r: Reader, column: 'session_id' | 'trace_id', opts: { limit: number; sinceMs: number; agentId?: string | undefined; start: PageStart }) {
    const name = column === 'session_id' ? 'sessions' : 'traces'
    const { asOf, after } = opts.start
    const scope = `user_id = {u:String} AND ${column} != '' AND agent_id NOT IN {hidden:Array(String)}
      AND ts >= fromUnixTimestamp64Milli({since:Int64}) AND received_at <= fromUnixTimestamp64Milli({asOf:Int64})
      ${opts.agentId ? 'AND agent_id = {agent:String}' : ''}`
    const params = {
      u: r.userId, hidden: r.hidden, since: opts.sinceMs, asOf, agent: opts.agentId ?? '', limit: opts.limit + 1,
      afterMs: after?.ms ?? 0, afterId: after?.id ?? '',
    }
    const below = after
      ? 'HAVING max(ts) < fromUnixTimestamp64Milli({afterMs:Int64}) OR (max(ts) = fromUnixTimestamp64Milli({afterMs:Int64}) AND id > {afterId:String})'
      : ''
    const top = after ? after.ms : asOf
    const hint = `${r.userId} ${column} ${opts.agentId ?? ''}`
    let found: { id: string; last_ms: string }[] = []
    for (const window of this.hints.windows(hint, opts.agentId)) {
      const from = window === Infinity ? opts.sinceMs : Math.max(opts.sinceMs, top - window)
      found = await this.rows<{ id: string; last_ms: string }>(
        `/* svc:me_${name}_latest */ SELECT ${column} AS id, toUnixTimestamp64Milli(max(ts)) AS last_ms FROM events
         WHERE ${scope} AND ts >= fromUnixTimestamp64Milli({from:Int64})
         GROUP BY id ${below} ORDER BY max(ts) DESC, id LIMIT {limit:UInt32}`,
        { ...params, from },
      )
      if (found.length > opts.limit || from === opts.sinceMs) break
    }
    // A full page: how far below its start the page's groups reach (the one after it included).
    this.hints.learn(hint, found.length > opts.limit ? Math.max(0, top - Number(found.at(-1)!.last_ms)) : undefined)
    const ids = found.map((x) => x.id)
    if (ids.length === 0) return { rows: [] as GroupFigures[], asOf }
    // The groups' totals per hour from their rollup rows: a few rows per group, found by the sort key.
    const kind = column === 'session_id' ? 'session' : 'trace'
    const hours = await this.rows(
      `/* svc:me_${name}_totals */ SELECT group_id AS id, toUnixTimestamp(hour) * 1000 AS hour_ms,
         toUnixTimestamp64Milli(min(first_ts)) AS start_ms, toUnixTimestamp64Milli(max(last_ts)) AS last_ms,
         toUnixTimestamp64Milli(max(last_end)) AS end_ms, toUnixTimestamp64Milli(max(last_received)) AS received_ms, sum(events) AS n, groupUniqArray(agent_id) AS agents,
         ${TOKEN_SUMS}, toString(sum(cost_usd)) AS cost, sum(errors) AS errors
       FROM group_totals
       WHERE user_id = {u:String} AND kind = {kind:String} AND group_id IN {ids:Array(String)} AND agent_id NOT IN {hidden:Array(String)}
         AND hour >= toStartOfHour(fromUnixTimestamp64Milli({since:Int64})) ${opts.agentId ? 'AND agent_id = {agent:String}' : ''}
       GROUP BY id, hour`,
      { ...params, kind, ids },
    )
    // An hour that the list's window cuts through, or with events received after the page's
    // snapshot, is summed from its events instead; every other hour counts as its rollup says.
    const clean = hours.filter((x) => Number(x.hour_ms) >= opts.sinceMs && Number(x.received_ms) <= asOf)
    const dirty = hours.filter((x) => !clean.includes(x))
    // Totals summed from the events themselves, of the groups and hours `where` picks.
    const recount = (where: string, extra: Record<string, unknown>) => this.rows(
      `/* svc:me_${name}_recount */ SELECT ${column} AS id,
         toUnixTimestamp64Milli(min(ts)) AS start_ms, toUnixTimestamp64Milli(max(ts)) AS last_ms,
         toUnixTimestamp64Milli(max(${SPAN_END})) AS end_ms, count() AS n,
         groupUniqArray(agent_id) AS agents, ${TOKEN_SUMS}, toString(sum(cost_usd)) AS cost, countIf(error_fingerprint != '') AS errors
       FROM events WHERE ${scope} AND ${where}
       GROUP BY id ${BY_SKIP_INDEX}`,
      { ...params, ...extra },
    )
    const dirtyHours = dirty.map((x) => Number(x.hour_ms))
    const recountDirty = () => recount(
      `${column} IN {dirtyIds:Array(String)}
       AND ts >= fromUnixTimestamp64Milli({lo:Int64}) AND ts < fromUnixTimestamp64Milli({hi:Int64})
       AND concat(${column}, ' ', toString(toUnixTimestamp(toStartOfHour(ts)) * 1000)) IN {pairs:Array(String)}`,
      {
        dirtyIds: [...new Set(dirty.map((x) => x.id as string))],
        lo: Math.max(opts.sinceMs, Math.min(...dirtyHours)),
        hi: Math.max(...dirtyHours) + 3_600_000,
        pairs: dirty.map((x) => `${x.id} ${Number(x.hour_ms)}`),
      },
    )
    // A group found in events but not (yet) in its rollup, whose view's insert is still under way or
    // failed and is being retried, is summed from its events whole.
    const missing = ids.filter((id) => !hours.some((x) => x.id === id))
    const recounted = (await Promise.all([
      dirty.length > 0 ? recountDirty() : [],
      missing.length > 0 ? recount(`${column} IN {missing:Array(String)}`, { missing }) : [],
    ])).flat()
    const rows = combineGroups([...clean, ...recounted].map(groupFigures))
    return { rows, asOf }
  }

  /** Sessions with the latest activity first: ordered (and paged) by their last event, ending at their latest span end. */
  async sessions (r: Reader, opts: { limit: number; agentId?: string; start: PageStart }): Promise<Page<SessionSummary>> {
    const { rows, asOf } = await this.grouped(r, 'session_id', { ...opts, sinceMs: 0 })
    const page = pageOf('sessions', asOf, rows, opts.limit, (x) => ({ ms: x.last_ms, id: x.id }))
    const items = page.items.map((x) => ({ sessionId: x.id, ...groupSummary(x) }))
    return { items, nextCursor: page.nextCursor }
  }

  /** Traces with the latest activity first: ordered (and paged) by their last event, ending at their latest span end. */
  async traces (r: Reader, opts: { limit: number; sinceMs: number; start: PageStart }): Promise<Page<TraceSummary>> {
    const { rows, asOf } = await this.grouped(r, 'trace_id', opts)
    const page = pageOf('traces', asOf, rows, opts.limit, (x) => ({ ms: x.last_ms, id: x.id }))
    const items = page.items.map((x) => ({ traceId: x.id, ...groupSummary(x) }))
    return { items, nextCursor: page.nextCursor }
  }

  /** The first `limit` events of one session or trace of the user, in time order (empty when it is not theirs). */
  async eventsOf (r: Reader, column: 'session_id' | 'trace_id', id: string, limit = 10_000): Promise<DashboardEvent[]> {
    const rows = await this.rows(
      `/* svc:me_${column === 'session_id' ? 'session' : 'trace'}_events */ SELECT ${EVENT_COLUMNS} FROM events
       WHERE user_id = {u:String} AND ${column} = {id:String} AND agent_id NOT IN {hidden:Array(String)}
       ORDER BY ts, event_id LIMIT {limit:UInt32} ${BY_SKIP_INDEX}`,
      { u: r.userId, id, hidden: r.hidden, limit },
    )
    return rows.map(toEvent)
  }

  /**
   * Error clusters from the rollups: `since` is rounded down to the hour, so a window may include up
   * to an hour more than asked. Whole days come from the daily rollup, the hours before the first of
   * them from the hourly one; one cluster (a fingerprint) is read from the hourly rollup, whose sort
   * key starts with it. First/last seen are exact event times.
   */
  async clusters (r: Reader, opts: { sinceMs: number; fingerprint?: string; agentId?: string; limit: number }): Promise<ClusterAggregate[]> {
    const hourMs = 3_600_000
    const from = Math.floor(opts.sinceMs / hourMs) * hourMs
    const dayEdge = Math.ceil(from / DAY_MS) * DAY_MS
    const filters = `user_id = {u:String} AND agent_id NOT IN {hidden:Array(String)}
      ${opts.fingerprint ? 'AND error_fingerprint = {fp:String}' : ''} ${opts.agentId ? 'AND agent_id = {agent:String}' : ''}`
    const columns = 'error_fingerprint, agent_id, events, first_ts, last_ts, sample, tools'
    const source = opts.fingerprint
      ? `SELECT ${columns} FROM error_clusters_hourly WHERE ${filters} AND hour >= toDateTime({fromS:UInt32}, 'UTC')`
      : `SELECT ${columns} FROM error_clusters_daily WHERE ${filters} AND day >= toDate(toDateTime({dayS:UInt32}, 'UTC'))
         UNION ALL
         SELECT ${columns} FROM error_clusters_hourly WHERE ${filters}
           AND hour >= toDateTime({fromS:UInt32}, 'UTC') AND hour < toDateTime({dayS:UInt32}, 'UTC')`
    const rows = await this.rows(
      `/* svc:me_errors */ SELECT error_fingerprint AS fp, sum(events) AS n,
         toUnixTimestamp64Milli(min(first_ts)) AS first_ms, toUnixTimestamp64Milli(max(last_ts)) AS last_ms,
         argMaxMerge(sample) AS sample, groupUniqArray(agent_id) AS agents, groupUniqArrayArray(tools) AS tools
       FROM (${source})
       GROUP BY fp ORDER BY last_ms DESC, fp LIMIT {limit:UInt32}`,
      { u: r.userId, hidden: r.hidden, fromS: from / 1000, dayS: dayEdge / 1000, fp: opts.fingerprint ?? '', agent: opts.agentId ?? '', limit: opts.limit },
    )
    return rows.map((x) => ({
      fingerprint: x.fp, count: Number(x.n), firstSeen: iso(x.first_ms), lastSeen: iso(x.last_ms), lastSeenMs: Number(x.last_ms),
      sampleMessage: orNull(x.sample), agents: [...x.agents].sort(), tools: [...x.tools].filter(Boolean).sort(),
    }))
  }

  /**
   * The spend summary's four breakdowns since a day (UTC, inclusive) in one read of the rollup: the
   * total, and by agent, model and day (ordered as `spend` orders them).
   */
  async spendBreakdown (r: Reader, fromDay: string): Promise<Record<'total' | 'agent_id' | 'model' | 'day', SpendRow[]>> {
    const rows = await this.rows(
      `/* svc:me_spend_summary */ SELECT grouping(agent_id) = 0 AS by_agent, grouping(model) = 0 AS by_model, grouping(day) = 0 AS by_day,
              agent_id, model, toString(day) AS d, toString(sum(cost_usd)) AS cost, sum(events) AS n, sum(errors) AS errors,
              sum(unpriced_events) AS unpriced, ${TOKEN_SUMS}
       FROM spend_daily
       WHERE user_id = {u:String} AND day >= {from:Date} AND agent_id NOT IN {hidden:Array(String)}
       GROUP BY GROUPING SETS ((), (agent_id), (model), (day))`,
      { u: r.userId, from: fromDay, hidden: r.hidden },
    )
    return spendBreakdown(rows.map((x) => {
      const set: SpendSet = Number(x.by_agent) ? 'agent_id' : Number(x.by_model) ? 'model' : Number(x.by_day) ? 'day' : 'total'
      const key = set === 'agent_id' ? x.agent_id : set === 'model' ? x.model : set === 'day' ? x.d : ''
      return { set, figures: spendFigures(x, key) }
    }))
  }

  /** Spend rollup grouped by agent, model or day since a day (UTC, inclusive). */
  async spend (r: Reader, by: 'agent_id' | 'model' | 'day', fromDay: string): Promise<SpendRow[]> {
    const key = by === 'day' ? 'toString(day)' : by
    const rows = await this.rows(
      `/* svc:me_spend_by_${by} */ SELECT ${key} AS key, toString(sum(cost_usd)) AS cost, sum(events) AS n, sum(errors) AS errors,
              sum(unpriced_events) AS unpriced, ${TOKEN_SUMS}
       FROM spend_daily
       WHERE user_id = {u:String} AND day >= {from:Date} AND agent_id NOT IN {hidden:Array(String)}
       GROUP BY key ORDER BY ${by === 'day' ? 'key' : 'sum(cost_usd) DESC, key'}`,
      { u: r.userId, from: fromDay, hidden: r.hidden },
    )
    return rows.map((x) => spendRow(spendFigures(x)))
  }

  /**
   * One agent's figures in one read: its events, cost and errors since a time (as `agentWindow`
   * counts them) and its spend per day since a day (UTC, inclusive; as `spend` by day), with their total.
   */
  async agentFigures (r: Reader, agentId: string, sinceMs: number, fromDay: string): Promise<{ window: WindowFigures; days: SpendRow[]; total: SpendRow }> {
    const scope = 'user_id = {u:String} AND agent_id = {agent:String} AND agent_id NOT IN {hidden:Array(String)}'
    const rows = await this.rows(
      `/* svc:me_agent_figures */ SELECT 'day' AS part, toString(day) AS key, toString(sum(cost_usd)) AS cost, sum(events) AS n, sum(errors) AS errors,
              sum(unpriced_events) AS unpriced, ${TOKEN_SUMS}
       FROM spend_daily WHERE ${scope} AND day >= {from:Date}
       GROUP BY day
       UNION ALL
       SELECT 'window', '', toString(sum(cost)), sum(n), sum(errors), 0, 0, 0, 0, 0 FROM (${windowParts(scope)})`,
      { u: r.userId, agent: agentId, hidden: r.hidden, from: fromDay, ...windowParams(sinceMs) },
    )
    const window = rows.find((x) => x.part === 'window')
    const { days, total } = spendDays(rows.filter((x) => x.part === 'day').map((x) => spendFigures(x)))
    return {
      window: { events: Number(window?.n ?? 0), costUsd: Number(window?.cost ?? 0), errors: Number(window?.errors ?? 0) },
      days,
      total,
    }
  }

  /** Events, cost and errors per agent since a time (see `windowParts`). */
  async agentWindow (r: Reader, sinceMs: number): Promise<Map<string, WindowFigures>> {
    const rows = await this.rows(
      `/* svc:me_agents_window */ SELECT agent_id, sum(n) AS n, toString(sum(cost)) AS cost, sum(errors) AS errors
       FROM (${windowParts('user_id = {u:String}')}) GROUP BY agent_id`,
      { u: r.userId, ...windowParams(sinceMs) },
    )
    return new Map(rows.map((x) => [x.agent_id, { events: Number(x.n), costUsd: Number(x.cost), errors: Number(x.errors) }]))
  }
}
