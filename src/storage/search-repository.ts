import type { ClickHouseClient } from '@clickhouse/client'
import { pageOf, type Page, type PageStart } from '../domain/cursor.ts'
import type { SearchFilters } from '../domain/search-filters.ts'
import { likePattern } from '../domain/search-text.ts'
import { latestWrites } from './scores-repository.ts'
import { isoFromMs as iso } from './timestamps.ts'
import { EVENT_COLUMNS, SPAN_END, orNull, toEvent, tokensOf } from './event-rows.ts'
import { type DashboardEvent, type Reader, type SessionSummary, type TraceSummary } from './dashboard-repository.ts'

/**
 * Filtered reads of events (docs/api.md#search): the lists of events, sessions and traces under the
 * search filters, and the facet counts. Every query starts with the reader's user (the leading
 * column of the sort key) and drops their soft-deleted agents; the filters only narrow that.
 *
 * The conditions are exact: the full-text terms are LIKE over `search_text` and the metadata
 * filters look at `metadata_flat` (clickhouse/018_search.sql); the bigram index of `search_text`
 * only lets a read skip granules, so an answer never depends on it.
 */

/** Metadata keys the facets leave out: ids and figures the service keeps in columns of their own. */
export const FACET_HIDDEN_KEYS = ['traceId', 'sessionId', 'spanId', 'parentSpanId', 'dedupKey', 'privacyLevel', 'tokensBreakdown']

/** How many values a facet lists, how many metadata keys and how many values of each. */
export const FACET_TOP = 20
export const FACET_META_KEYS = 10
export const FACET_META_VALUES = 5

/** The window and snapshot every filtered read has: events at or after `sinceMs`, received by `asOf`. */
export interface SearchWindow { sinceMs: number; asOf: number }

export type FacetName = 'type' | 'outcome' | 'model' | 'tool' | 'agentId' | 'costStatus'
export type FacetValue = { value: string | null; count: number }
export type MetaFacet = { key: string; count: number; values: FacetValue[] }
export type Facets = { total: number; facets: Record<FacetName, FacetValue[]>; metadata: MetaFacet[] }

/** Columns of the list filters: each `IN` one parameter array. */
const LIST_COLUMNS: [keyof SearchFilters, string][] = [
  ['types', 'type'], ['outcomes', 'outcome'], ['models', 'model'], ['tools', 'tool_executed'], ['agentIds', 'agent_id'],
  ['sessionIds', 'session_id'], ['traceIds', 'trace_id'], ['fingerprints', 'error_fingerprint'],
  ['privacyLevels', 'privacy_level'], ['costStatuses', 'cost_status'],
]

/**
 * The bounds of the filters, each a condition on its own parameter (named after its field). A NULL
 * duration compares to NULL, which WHERE treats as false: events without one never match a bound.
 */
const BOUND_CONDITIONS: [keyof SearchFilters & ('fromMs' | 'toMs' | 'minCostUsd' | 'maxCostUsd' | 'minDurationMs' | 'maxDurationMs'), string][] = [
  ['fromMs', 'ts >= fromUnixTimestamp64Milli({fromMs:Int64})'],
  ['toMs', 'ts < fromUnixTimestamp64Milli({toMs:Int64})'],
  ['minCostUsd', 'cost_usd >= toDecimal128({minCostUsd:String}, 9)'],
  ['maxCostUsd', 'cost_usd <= toDecimal128({maxCostUsd:String}, 9)'],
  ['minDurationMs', 'duration_ms >= {minDurationMs:UInt64}'],
  ['maxDurationMs', 'duration_ms <= {maxDurationMs:UInt64}'],
]

/**
 * The WHERE clause of a filtered read and its parameters: the user, their hidden agents, the
 * window and the snapshot first, then every filter.
 */
export function searchWhere (r: Reader, w: SearchWindow, f: SearchFilters): { where: string; params: Record<string, unknown> } {
  const params: Record<string, unknown> = { u: r.userId, hidden: r.hidden, since: w.sinceMs, asOf: w.asOf }
  const conds = [
    'user_id = {u:String}',
    'agent_id NOT IN {hidden:Array(String)}',
    'ts >= fromUnixTimestamp64Milli({since:Int64})',
    'received_at <= fromUnixTimestamp64Milli({asOf:Int64})',
  ]
  for (const [field, column] of LIST_COLUMNS) {
    const values = f[field] as string[]
    if (values.length === 0) continue
    params[`f_${field}`] = values
    conds.push(`${column} IN {f_${field}:Array(String)}`)
  }
  for (const [field, condition] of BOUND_CONDITIONS) {
    if (f[field] === undefined) continue
    params[field] = f[field]
    conds.push(condition)
  }
  f.meta.forEach((m, i) => {
    params[`mk${i}`] = m.path
    params[`mv${i}`] = m.values
    // hasAny is implied by the exact condition after it; it is there for the bloom filter of the
    // values (idx_metadata_values, clickhouse/019), which lets a read skip granules without the value.
    conds.push(`hasAny(mapValues(metadata_flat), {mv${i}:Array(String)})`)
    conds.push(`arrayExists((k, v) -> k = {mk${i}:String} AND v IN {mv${i}:Array(String)}, metadata_flat.keys, metadata_flat.values)`)
  })
  f.hasMeta.forEach((path, i) => {
    params[`hk${i}`] = path
    params[`hp${i}`] = `${path}.`
    conds.push(`arrayExists(k -> k = {hk${i}:String} OR startsWith(k, {hp${i}:String}), metadata_flat.keys)`)
  })
  f.terms.forEach((term, i) => {
    params[`qt${i}`] = likePattern(term.text)
    conds.push(`search_text LIKE lowerUTF8({qt${i}:String})`)
  })
  f.scores.forEach((score, i) => {
    params[`sn${i}`] = score.name
    params[`sl${i}`] = score.labels
    const values = [`label IN {sl${i}:Array(String)}`]
    // The bounds as the numbers' shortest texts, which read back as the same doubles.
    score.ranges.forEach((range, j) => {
      const ends: string[] = []
      if (range.min !== undefined) { params[`slo${i}_${j}`] = String(range.min); ends.push(`value >= {slo${i}_${j}:Float64}`) }
      if (range.max !== undefined) { params[`shi${i}_${j}`] = String(range.max); ends.push(`value <= {shi${i}_${j}:Float64}`) }
      values.push(`(${ends.join(' AND ')})`)
    })
    // What each matching score (its latest write) is of, as (kind, id, span), asked of the event's
    // four targets: an event has the scores of itself, its span, its whole trace and its session
    // (docs/api.md#scores-in-the-search). An empty id is never a score's target, so an event without
    // a span, trace or session matches none through it. Scores are read as they are now, not as of
    // the walk's instant: a write replaced after that instant is gone once the parts merge, so a
    // snapshot would drop the score altogether (test/routes/search-scores.test.ts shows it).
    const targets = `SELECT multiIf(event_id != '', 'e', session_id != '', 's', span_id != '', 'p', 't') AS kind,
        multiIf(kind = 'e', event_id, kind = 's', session_id, trace_id) AS target, if(kind = 'p', span_id, '') AS span
      FROM (${latestWrites(`name = {sn${i}:String}`, false)})
      WHERE name = {sn${i}:String} AND agent_id NOT IN {hidden:Array(String)} AND (${values.join(' OR ')})`
    conds.push(`(('e', event_id, '') IN (${targets}) OR ('p', trace_id, span_id) IN (${targets})
      OR ('t', trace_id, '') IN (${targets}) OR ('s', session_id, '') IN (${targets}))`)
  })
  return { where: conds.join('\n AND '), params }
}

export class SearchRepository {
  constructor (private readonly ch: ClickHouseClient) {}

  private async rows<T = Record<string, any>>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const rs = await this.ch.query({ query, query_params: params, format: 'JSONEachRow' })
    return rs.json<T>()
  }

  /** A page of the matching events, newest first (time, then id, descending), as GET /v1/me/events pages. */
  async events (r: Reader, w: SearchWindow, f: SearchFilters, opts: { limit: number; start: PageStart }): Promise<Page<DashboardEvent>> {
    const { where, params } = searchWhere(r, w, f)
    const { after } = opts.start
    const rows = await this.rows(
      `/* svc:search_events */ SELECT ${EVENT_COLUMNS} FROM events
       WHERE ${where}
         ${after ? 'AND (ts, event_id) < (fromUnixTimestamp64Milli({afterMs:Int64}), {afterId:String})' : ''}
       ORDER BY ts DESC, event_id DESC LIMIT {limit:UInt32}`,
      { ...params, afterMs: after?.ms ?? 0, afterId: after?.id ?? '', limit: opts.limit + 1 },
    )
    return pageOf('events', w.asOf, rows.map(toEvent), opts.limit, (e) => ({ ms: Date.parse(e.timestamp), id: e.eventId }))
  }

  /**
   * A page of the sessions or traces with a matching event, by latest activity as the plain lists
   * order them (their last event in the window, then id). A group's figures are those of all its
   * events in the window and snapshot, not only of the matching ones.
   */
  private async grouped (r: Reader, column: 'session_id' | 'trace_id', w: SearchWindow, f: SearchFilters, opts: { limit: number; start: PageStart }) {
    const name = column === 'session_id' ? 'sessions' : 'traces'
    const matching = searchWhere(r, w, f)
    const { after } = opts.start
    const below = after
      ? 'HAVING max(ts) < fromUnixTimestamp64Milli({afterMs:Int64}) OR (max(ts) = fromUnixTimestamp64Milli({afterMs:Int64}) AND id > {afterId:String})'
      : ''
    const rows = await this.rows(
      `/* svc:search_${name} */ SELECT ${column} AS id,
         toUnixTimestamp64Milli(min(ts)) AS start_ms, toUnixTimestamp64Milli(max(ts)) AS last_ms,
         toUnixTimestamp64Milli(max(${SPAN_END})) AS end_ms, count() AS n, groupUniqArray(agent_id) AS agents,
         sum(tokens_input_base) AS t_in, sum(tokens_cache_creation) AS t_cw, sum(tokens_cache_read) AS t_cr, sum(tokens_output) AS t_out,
         toString(sum(toDecimal128(cost_usd, 9))) AS cost, countIf(error_fingerprint != '') AS errors
       FROM events
       WHERE user_id = {u:String} AND agent_id NOT IN {hidden:Array(String)} AND ${column} != ''
         AND ts >= fromUnixTimestamp64Milli({since:Int64}) AND received_at <= fromUnixTimestamp64Milli({asOf:Int64})
         ${f.fromMs !== undefined ? 'AND ts >= fromUnixTimestamp64Milli({fromMs:Int64})' : ''}
         ${f.toMs !== undefined ? 'AND ts < fromUnixTimestamp64Milli({toMs:Int64})' : ''}
         AND ${column} IN (SELECT ${column} FROM events WHERE ${matching.where} AND ${column} != '')
       GROUP BY id ${below}
       ORDER BY max(ts) DESC, id LIMIT {limit:UInt32}`,
      { ...matching.params, afterMs: after?.ms ?? 0, afterId: after?.id ?? '', limit: opts.limit + 1 },
    )
    const page = pageOf(name, w.asOf, rows, opts.limit, (x) => ({ ms: Number(x.last_ms), id: x.id as string }))
    const items = page.items.map((x) => ({
      id: x.id as string,
      start: iso(Number(x.start_ms)),
      end: iso(Number(x.end_ms)),
      durationMs: Number(x.end_ms) - Number(x.start_ms),
      events: Number(x.n),
      agents: [...x.agents as string[]].sort(),
      tokens: tokensOf(x),
      costUsd: Number(x.cost),
      errors: Number(x.errors),
    }))
    return { items, nextCursor: page.nextCursor }
  }

  async sessions (r: Reader, w: SearchWindow, f: SearchFilters, opts: { limit: number; start: PageStart }): Promise<Page<SessionSummary>> {
    const page = await this.grouped(r, 'session_id', w, f, opts)
    return { items: page.items.map(({ id, ...rest }) => ({ sessionId: id, ...rest })), nextCursor: page.nextCursor }
  }

  async traces (r: Reader, w: SearchWindow, f: SearchFilters, opts: { limit: number; start: PageStart }): Promise<Page<TraceSummary>> {
    const page = await this.grouped(r, 'trace_id', w, f, opts)
    return { items: page.items.map(({ id, ...rest }) => ({ traceId: id, ...rest })), nextCursor: page.nextCursor }
  }

  /**
   * Counts of the matching events: the total, per value of each facet (the FACET_TOP most frequent,
   * then by value), and the FACET_META_KEYS most frequent metadata keys (an event counts once per
   * key) with their FACET_META_VALUES most frequent values.
   */
  async facets (r: Reader, w: SearchWindow, f: SearchFilters): Promise<Facets> {
    const { where, params } = searchWhere(r, w, f)
    // A key is left out when its first segment is a hidden key: the key itself or one under it.
    const shown = "mapFilter((k, v) -> extract(k, '^[^.]*') NOT IN {hiddenKeys:Array(String)}, metadata_flat)"
    // Two reads side by side, each one pass over the matching events: the plain facets, and the
    // metadata paths with their values (a path's count is the sum of its values' counts: an event
    // holds one value per path).
    const [plain, meta] = await Promise.all([
      this.rows(
        `/* svc:search_facets */ SELECT
           multiIf(grouping(type) = 0, 'type', grouping(outcome) = 0, 'outcome', grouping(model) = 0, 'model',
                   grouping(tool_executed) = 0, 'tool', grouping(agent_id) = 0, 'agentId', grouping(cost_status) = 0, 'costStatus', 'total') AS facet,
           toString(multiIf(grouping(type) = 0, toString(type), grouping(outcome) = 0, toString(outcome), grouping(model) = 0, toString(model),
                   grouping(tool_executed) = 0, toString(tool_executed), grouping(agent_id) = 0, agent_id, grouping(cost_status) = 0, toString(cost_status), '')) AS value,
           count() AS n
         FROM events WHERE ${where}
         GROUP BY GROUPING SETS ((), (type), (outcome), (model), (tool_executed), (agent_id), (cost_status))
         ORDER BY facet, n DESC, value
         LIMIT ${FACET_TOP} BY facet`,
        params,
      ),
      this.rows<{ k: string; kn: string; v: string; n: string }>(
        `/* svc:search_facet_metadata */ SELECT k, kn, v, n FROM (
           SELECT k, v, n, sum(n) OVER (PARTITION BY k) AS kn FROM (
             SELECT kv.1 AS k, kv.2 AS v, count() AS n
             FROM (SELECT ${shown} AS shown FROM events WHERE ${where})
             ARRAY JOIN arrayDistinct(arrayZip(shown.keys, shown.values)) AS kv
             GROUP BY k, v))
         ORDER BY kn DESC, k, n DESC, v
         LIMIT ${FACET_META_VALUES} BY k
         LIMIT ${FACET_META_KEYS * FACET_META_VALUES}`,
        { ...params, hiddenKeys: FACET_HIDDEN_KEYS },
      ),
    ])
    const keys = [...new Map(meta.map((x) => [x.k, x.kn])).entries()].slice(0, FACET_META_KEYS).map(([k, n]) => ({ k, n }))
    const values = meta
    const out: Facets = { total: 0, facets: { type: [], outcome: [], model: [], tool: [], agentId: [], costStatus: [] }, metadata: [] }
    for (const x of plain) {
      if (x.facet === 'total') out.total = Number(x.n)
      else out.facets[x.facet as FacetName].push({ value: orNull(x.value), count: Number(x.n) })
    }
    out.metadata = keys.map((x) => ({
      key: x.k,
      count: Number(x.n),
      values: values.filter((v) => v.k === x.k).map((v) => ({ value: v.v, count: Number(v.n) })),
    }))
    return out
  }
}
