import type { ClickHouseClient } from '@clickhouse/client'
import { encodeCursor, pageOf, type Page, type PageStart } from '../domain/cursor.ts'
import { MAX_META_PATH, MAX_META_VALUE, metaPathProblem, metaValueProblem, parseSearchFilters, type SearchFilters } from '../domain/search-filters.ts'
import { likePattern, termForms } from '../domain/search-text.ts'
import { isoFromMs as iso } from './timestamps.ts'
import { CONTENT_PREFIXES, PER_SPAN_ATTRIBUTES } from '../domain/otlp-mapping.ts'
import { EVENT_COLUMNS, SPAN_END, TOKEN_SUMS, newestEventUpTo, orNull, toEvent, tokensOf } from './event-rows.ts'
import { BY_SKIP_INDEX } from './clickhouse-client.ts'
import { type DashboardEvent, type Reader, type SessionSummary, type TraceSummary } from './dashboard-repository.ts'

/**
 * Filtered reads of events (docs/api.md#search): the lists of events, sessions and traces under the
 * search filters, and the facet counts. Every query starts with the reader's user (the leading
 * column of the sort key) and drops their soft-deleted agents; the filters only narrow that.
 *
 * The conditions are exact: the full-text terms are LIKE over `search_text` and the metadata
 * filters look at `metadata_flat` (clickhouse/018_search.sql); the bigram index of `search_text`
 * only lets a read skip granules, and the index of the metadata pairs (024) answers exactly what
 * the expression it indexes computes, so an answer never depends on an index.
 */

/** Metadata keys the facets leave out: ids and figures the service keeps in columns of their own. */
export const FACET_HIDDEN_KEYS = ['traceId', 'sessionId', 'spanId', 'parentSpanId', 'dedupKey', 'privacyLevel', 'tokensBreakdown']

/** Dotted names as an RE2 alternation that matches each name literally. */
function anyOf (names: string[]): string {
  return names.map((name) => name.replace(/\./g, '\\.')).join('|')
}

/** An RE2 pattern (no quote in it) as a ClickHouse string literal. */
function sqlPattern (pattern: string): string {
  return `'${pattern.replace(/\\/g, '\\\\')}'`
}

/**
 * Paths of an OTLP span's metadata (`otel.attributes.<name>`, src/domain/otlp-mapping.ts) the facets
 * leave out, as an RE2 pattern: the attributes unique to a span or measuring it, and the content
 * attributes (prompts, completions, tool arguments and results). Each of these would put a row per
 * span into an hour's counts (`search_facets_hourly`), and no value of one is shared by enough
 * events to be worth a click. The view counting them (clickhouse/028_search_facets_sessions.sql) holds
 * this pattern as a literal: a change here is a new migration there.
 */
export const FACET_HIDDEN_OTEL = `^otel\\.attributes\\.(${anyOf([...PER_SPAN_ATTRIBUTES, ...CONTENT_PREFIXES])})(\\.|$)`

/** The pattern as a ClickHouse string literal. */
export const FACET_HIDDEN_OTEL_SQL = sqlPattern(FACET_HIDDEN_OTEL)

/**
 * Metadata paths that say again what the event's fields say, as an RE2 pattern: `tool` and
 * `provider` (each kept in a column of its own; an OTLP span's mapping sets them from its scope and
 * its provider attribute), and of an OTLP span's metadata its kind, operation, scope and status and
 * the attributes its mapping reads the model, provider, agent, tool and privacy level from. The
 * facets rank them after every other path (FACET_KEY_TIER): a span holds each of them, so by count
 * alone they would fill the list ahead of the paths a client chose to send.
 */
export const FACET_RESTATED = `^(tool|provider)$|^otel\\.(kind|operation|scope\\..*|status\\..*|(attributes|resource)\\.(${anyOf([
  'gen_ai.operation.name', 'gen_ai.agent.name', 'gen_ai.agent.id', 'gen_ai.request.model', 'gen_ai.response.model',
  'gen_ai.provider.name', 'gen_ai.system', 'gen_ai.tool.name', 'agent_telemetry.privacy_level', 'llm.request.type',
  'traceloop.span.kind', 'traceloop.entity.name', 'ai.operationId', 'ai.model.id', 'ai.model.provider', 'ai.toolCall.name',
])}))$`
const FACET_RESTATED_SQL = sqlPattern(FACET_RESTATED)

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

/**
 * An event's metadata (path, value) pairs as the text index of clickhouse/024 has them, each one
 * string that no other pair spells: the path's length in bytes, ':', the path, the value. Written
 * exactly as the index's expression, so that the engine answers `hasAny` of it from the index.
 */
const META_PAIRS = "arrayMap((k, v) -> concat(toString(length(k)), ':', k, v), mapKeys(metadata_flat), mapValues(metadata_flat))"

/** A (path, value) pair as META_PAIRS writes it. */
export function metaPair (path: string, value: string): string {
  return `${Buffer.byteLength(path)}:${path}${value}`
}

/** What a score is of: an event, a span of a trace, a whole trace, a session. */
export type ScoreKind = 'e' | 'p' | 't' | 's'
const SCORE_KINDS: ScoreKind[] = ['e', 'p', 't', 's']
/** The event's column(s) a score of each kind names. */
const SCORE_KIND_COLUMNS: Record<ScoreKind, string> = { e: 'event_id', p: '(trace_id, span_id)', t: 'trace_id', s: 'session_id' }

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
export function searchWhere (r: Reader, w: SearchWindow, f: SearchFilters, kinds?: ScoreKind[][]): { where: string; params: Record<string, unknown>; scoreTargets: string[] } {
  const scoreTargets: string[] = []
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
    params[`mp${i}`] = m.values.map((value) => metaPair(m.path, value))
    conds.push(`hasAny(${META_PAIRS}, {mp${i}:Array(String)})`)
  })
  f.hasMeta.forEach((path, i) => {
    params[`hk${i}`] = path
    params[`hp${i}`] = `${path}.`
    conds.push(`arrayExists(k -> k = {hk${i}:String} OR startsWith(k, {hp${i}:String}), metadata_flat.keys)`)
  })
  f.terms.forEach((term, i) => {
    const forms = termForms(term).map((form, j) => {
      params[`qt${i}_${j}`] = likePattern(form)
      return `search_text LIKE lowerUTF8({qt${i}_${j}:String})`
    })
    conds.push(forms.length === 1 ? forms[0]! : `(${forms.join(' OR ')})`)
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
    // What each matching score is of, as (kind, target, span): its latest write (FINAL keeps the
    // highest version of each score id; the conditions come after it, so a write that renamed or
    // moved a score replaces it). Scores are read as they are now, not as of the walk's instant: a
    // write replaced after that instant is gone once the parts merge, so a snapshot would drop the
    // score altogether (test/routes/v1/me/search-scores.test.ts shows it).
    const targets = `SELECT multiIf(event_id != '', 'e', session_id != '', 's', span_id != '', 'p', 't') AS kind,
        multiIf(kind = 'e', event_id, kind = 's', session_id, trace_id) AS target, if(kind = 'p', span_id, '') AS span
      FROM scores FINAL
      WHERE user_id = {u:String} AND name = {sn${i}:String} AND agent_id NOT IN {hidden:Array(String)} AND (${values.join(' OR ')})
      SETTINGS optimize_move_to_prewhere_if_final = 0`
    scoreTargets.push(targets)
    // Asked of the event's four targets: an event has the scores of itself, its span, its whole
    // trace and its session (docs/api.md#scores-in-the-search). An empty id is never a score's
    // target, so an event without a span, trace or session matches none through it. Each kind the
    // scores have no target of is left out (`kinds`, when known): every kind asked reads its
    // column(s) for every event of the window.
    const present = kinds?.[i] ?? SCORE_KINDS
    const asked = SCORE_KINDS.filter((k) => present.includes(k)).map((k) => {
      const of = `(SELECT ${k === 'p' ? 'target, span' : 'target'} FROM (${targets}) WHERE kind = '${k}')`
      return `${SCORE_KIND_COLUMNS[k]} IN ${of}`
    })
    conds.push(asked.length === 0 ? '0' : `(${asked.join('\n      OR ')})`)
  })
  return { where: conds.join('\n AND '), params, scoreTargets }
}

export class SearchRepository {
  /**
   * `wholeGuardRows`: the bound of the whole-window read that goes beside the hour's (WHOLE_GUARD);
   * `groupsWindowMs`: how far below the page's start a page of sessions or traces looks first (0:
   * the whole window at once).
   */
  constructor (private readonly ch: ClickHouseClient, private readonly wholeGuardRows = WHOLE_GUARD,
    private readonly groupsWindowMs = FIRST_WINDOW_MS, private readonly groupBounds = GROUP_LOOK_BOUNDS) {}

  /**
   * searchWhere, with the kinds of target that each score filter's scores have read first (one
   * query), so that the read asks each event only of those: a filter on scores of traces then
   * reads `trace_id` alone, and one whose scores match none reads no event. A score written
   * between the two reads is left out if its kind was not asked, as if the read came first.
   */
  private async where (r: Reader, w: SearchWindow, f: SearchFilters): Promise<ReturnType<typeof searchWhere>> {
    const all = searchWhere(r, w, f)
    if (f.scores.length === 0) return all
    const kinds = all.scoreTargets.map((targets) => `(SELECT groupUniqArray(kind) FROM (${targets}))`)
    const [row] = await this.rows<{ kinds: ScoreKind[][] }>(`/* svc:search_score_kinds */ SELECT [${kinds.join(', ')}] AS kinds`, all.params)
    return searchWhere(r, w, f, row?.kinds)
  }

  private async rows<T = Record<string, any>>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const rs = await this.ch.query({ query, query_params: params, format: 'JSONEachRow' })
    return rs.json<T>()
  }

  /**
   * A page of the matching events, newest first (time, then id, descending), as GET /v1/me/events
   * pages. Two reads go at once, and the page is the first answer either can give:
   * - the hour below the newest of the reader's events below the page's start, served by
   *   `events_feed` (clickhouse/021, sorted by user and time), which reads a granule or two when
   *   matches are common: when that hour holds a page of matches, they are the newest below the
   *   start, the page (the window reaches up to the start, so none newer is left out);
   * - the whole window, found through the skip indexes, but only if they leave at most
   *   `wholeGuardRows` rows to read (the engine refuses it after its index analysis otherwise; the
   *   rows the score filters' subqueries read count too): a rare term or a selective metadata
   *   value answers here, whether the hour's read has finished or not.
   * When neither answers, the whole window is read without the bound. A whole-window read without a
   * term reads the page's ids first and then their events (`eventsById`): the metadata filters are
   * then answered from their index alone (clickhouse/024), which the engine did not do in a read
   * of every column (at 10 million events, 150 ms against 80). With a term, where the text is read
   * anyway, one read is quicker (130 ms against 195). Every whole-window read says BY_SKIP_INDEX: with
   * the search columns in `events_feed` the engine weighs the projection for them, and that weighing
   * alone took 2-7 s at 10 million events for a rare term or metadata value (150-300 ms without
   * it), for a plan that then reads `events`.
   */
  async events (r: Reader, w: SearchWindow, f: SearchFilters, opts: { limit: number; start: PageStart }): Promise<Page<DashboardEvent>> {
    const { where, params } = await this.where(r, w, f)
    const { after } = opts.start
    const below = after ? 'AND (ts, event_id) < (fromUnixTimestamp64Milli({afterMs:Int64}), {afterId:String})' : ''
    const args = { ...params, afterMs: after?.ms ?? 0, afterId: after?.id ?? '', limit: opts.limit + 1 }
    let answered = false
    const page = (columns: string, settings: string, within = '') => this.rows(
      `/* svc:search_events */ SELECT ${columns} FROM events
       WHERE ${where} ${within} ${below}
       ORDER BY ts DESC, event_id DESC LIMIT {limit:UInt32} ${settings}`,
      args,
    )
    const whole = async (settings: string): Promise<PageRows> => {
      if (f.terms.length > 0) return { rows: await page(EVENT_COLUMNS, settings) }
      const ids = await page('toUnixTimestamp64Milli(ts) AS ts_ms, event_id', settings) as { ts_ms: string; event_id: string }[]
      if (answered) return { rows: [] }
      return { rows: await this.eventsById(r, ids.slice(0, opts.limit)), more: ids[opts.limit] && ids[opts.limit - 1] }
    }
    // Both reads settle into values, so that neither can end unhandled while the other answers.
    const guarded = whole(`${BY_SKIP_INDEX}, max_rows_to_read = ${this.wholeGuardRows}, read_overflow_mode = 'throw'`)
      .then((x) => ({ page: x }), (err) => (guardRefused(err) ? { page: undefined } : { err }))
    // The newest event below the start, whatever it holds: from the projection, a granule.
    const hour = page(EVENT_COLUMNS, '', `AND ts >= ${newestBelowStart(f, after)} - toIntervalMillisecond(${FIRST_WINDOW_MS})`)
      .then((rows) => ({ rows }), (err: unknown) => ({ err }))
    const answer = await (async (): Promise<PageRows> => {
      const first = await Promise.race([guarded, hour.then(() => undefined)])
      if (first?.page) return first.page
      const h = await hour
      if ('err' in h) throw h.err
      if (h.rows.length > opts.limit) return { rows: h.rows }
      const g = await guarded
      if ('err' in g) throw g.err
      return g.page ?? await whole(BY_SKIP_INDEX)
    })()
    answered = true
    const { rows, more } = answer
    const items = rows.map(toEvent)
    // A page read by id says itself whether more follow (an event gone between its two reads, to a
    // merge of the retention, leaves the page one short but the walk goes on from the right place).
    if (more) return { items, nextCursor: encodeCursor('events', w.asOf, { ms: Number(more.ts_ms), id: more.event_id }) }
    return pageOf('events', w.asOf, items, opts.limit, (e) => ({ ms: Date.parse(e.timestamp), id: e.eventId }))
  }

  /**
   * The events of a page's ids, in the ids' order. Read by id rather than with the page's own query:
   * that one reads each row of the page apart, decompressing its granule of every column again for
   * each row (at 10 million events, 51 rows held by 3 granules took 100-110 ms that way and 35-55 ms
   * by id).
   */
  private async eventsById (r: Reader, ids: { ts_ms: string; event_id: string }[]): Promise<Record<string, any>[]> {
    if (ids.length === 0) return []
    const times = ids.map((x) => Number(x.ts_ms))
    const rows = await this.rows(
      `/* svc:search_events_by_id */ SELECT ${EVENT_COLUMNS} FROM events
       WHERE user_id = {u:String} AND event_id IN {ids:Array(String)}
         AND ts BETWEEN fromUnixTimestamp64Milli({lo:Int64}) AND fromUnixTimestamp64Milli({hi:Int64})
       ${BY_SKIP_INDEX}`,
      { u: r.userId, ids: ids.map((x) => x.event_id), lo: Math.min(...times), hi: Math.max(...times) },
    )
    const byId = new Map(rows.map((x) => [x.event_id as string, x]))
    return ids.flatMap((x) => byId.get(x.event_id) ?? [])
  }

  /**
   * A page of the sessions or traces with a matching event, by latest activity as the plain lists
   * order them (their last event in the window, then id). A group's figures are those of all its
   * events in the window and snapshot, not only of the matching ones.
   *
   * The newest hours first (`recentGroups`): the groups with an event in the hour below the newest
   * event under the page's start, read from `events_feed` (sorted by user and time), each with
   * whether one of those events matches; when they hold a page of matching groups, only the groups
   * ranked above the page's last one are read whole (by id, through the bloom filters of the id
   * columns), to tell the figures, whether an older event matches and whether the group belongs to
   * an earlier page. Otherwise (after one wider look, or past GROUP_LOOK_BOUNDS) the
   * whole window is read at once (`wholeGroups`). At 10 million events the whole read took seconds
   * for a filter most groups match (bench/README.md, "Search").
   */
  private async grouped (r: Reader, column: 'session_id' | 'trace_id', w: SearchWindow, f: SearchFilters, opts: { limit: number; start: PageStart }) {
    const name = column === 'session_id' ? 'sessions' as const : 'traces' as const
    const matching = await this.where(r, w, f)
    const rows = await this.recentGroups(column, f, matching, opts) ?? await this.wholeGroups(name, column, f, matching, opts)
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

  /** The conditions every event of a group's figures meets: the reader's, the window's and the snapshot's. */
  private groupWindow (column: 'session_id' | 'trace_id', f: SearchFilters): string {
    return `user_id = {u:String} AND agent_id NOT IN {hidden:Array(String)} AND ${column} != ''
         AND ts >= fromUnixTimestamp64Milli({since:Int64}) AND received_at <= fromUnixTimestamp64Milli({asOf:Int64})
         ${f.fromMs !== undefined ? 'AND ts >= fromUnixTimestamp64Milli({fromMs:Int64})' : ''}
         ${f.toMs !== undefined ? 'AND ts < fromUnixTimestamp64Milli({toMs:Int64})' : ''}`
  }

  /**
   * The page's groups (limit + 1 of them, with their figures) from the newest hour below the page's
   * start, or undefined when that hour does not hold them. Every group whose last event is in that
   * hour has an event there, so the hour's events rank the groups whose last event is in it, above
   * every group whose last event is older. The groups matching by an event of the hour are sure;
   * the others may match by an older event, and any may have events after the page's start (a
   * group of an earlier page): the read of their whole tells both. The groups are read whole in
   * their ranked order, down to the (limit + 1)-th sure one, until the page is full.
   */
  private async recentGroups (column: 'session_id' | 'trace_id', f: SearchFilters,
    matching: { where: string; params: Record<string, unknown> }, opts: { limit: number; start: PageStart }) {
    if (this.groupsWindowMs <= 0) return undefined
    const { after } = opts.start
    const args = { ...matching.params, afterMs: after?.ms ?? 0, afterId: after?.id ?? '' }
    const upTo = after ? 'AND ts <= fromUnixTimestamp64Milli({afterMs:Int64})' : ''
    const recent = (windowMs: number) => this.rows<{ id: string; hit: number }>(
      `/* svc:search_groups_recent */ SELECT ${column} AS id, max(${matching.where}) AS hit FROM events
       WHERE ${this.groupWindow(column, f)} AND ts >= ${newestBelowStart(f, after)} - toIntervalMillisecond(${windowMs}) ${upTo}
       GROUP BY id ${groupsBelow(after)}
       ORDER BY max(ts) DESC, id LIMIT ${this.groupBounds.ranked}`,
      args,
    )
    // Too few sure groups in the hour: once more, over as many hours as that rate needs twice over
    // (a filter that few groups match then reads the whole window rather than hour after hour).
    let windowMs = this.groupsWindowMs
    for (let tries = 0; tries < 2; tries++) {
      const ranked = await recent(windowMs)
      const sure = ranked.filter((x) => Number(x.hit) === 1).length
      if (sure > opts.limit) return this.groupsById(column, f, matching, args, after, ranked, opts.limit)
      // None sure, or as many groups as are ranked: a wider look would not do better.
      if (sure === 0 || ranked.length >= this.groupBounds.ranked) return undefined
      windowMs *= Math.min(MAX_WIDENING, Math.ceil((2 * (opts.limit + 1)) / sure))
    }
    return undefined
  }

  /**
   * The first limit + 1 matching groups of `ranked` (the hour's groups, by their last event), read
   * whole in that order, each time down to the next limit + 1 sure groups (some may belong to an
   * earlier page), within `groupBounds`; undefined when they do not fill the page.
   */
  private async groupsById (column: 'session_id' | 'trace_id', f: SearchFilters, matching: { where: string },
    args: Record<string, unknown>, after: PageStart['after'], ranked: { id: string; hit: number }[], limit: number) {
    const page: Record<string, any>[] = []
    let read = 0
    for (let round = 0; round < this.groupBounds.rounds && page.length <= limit && read < ranked.length; round++) {
      let need = limit + 1
      let end = read
      while (end < ranked.length && need > 0) if (Number(ranked[end++]!.hit) === 1) need--
      if (end - read > this.groupBounds.ids) return undefined
      const ids = ranked.slice(read, end).map((x) => x.id)
      read = end
      const whole = await this.rows(
        `/* svc:search_groups_by_id */ SELECT ${column} AS id, ${GROUP_FIGURES}, max(${matching.where}) AS hit FROM events
         WHERE ${this.groupWindow(column, f)} AND ${column} IN {ids:Array(String)}
         GROUP BY id ${groupsBelow(after)} ${BY_SKIP_INDEX}`,
        { ...args, ids },
      )
      const byId = new Map(whole.map((x) => [x.id as string, x]))
      for (const id of ids) {
        const x = byId.get(id)
        if (x && Number(x.hit) === 1) page.push(x)
      }
    }
    return page.length > limit ? page.slice(0, limit + 1) : undefined
  }

  /** The page's groups from the whole window: the matching groups' ids, then their figures. */
  private async wholeGroups (name: 'sessions' | 'traces', column: 'session_id' | 'trace_id', f: SearchFilters,
    matching: { where: string; params: Record<string, unknown> }, opts: { limit: number; start: PageStart }) {
    const { after } = opts.start
    return this.rows(
      `/* svc:search_${name} */ SELECT ${column} AS id, ${GROUP_FIGURES}
       FROM events
       WHERE ${this.groupWindow(column, f)}
         AND ${column} IN (SELECT ${column} FROM events WHERE ${matching.where} AND ${column} != '')
       GROUP BY id ${groupsBelow(after)}
       ORDER BY max(ts) DESC, id LIMIT {limit:UInt32} ${BY_SKIP_INDEX}`,
      { ...matching.params, afterMs: after?.ms ?? 0, afterId: after?.id ?? '', limit: opts.limit + 1 },
    )
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
   *
   * Without a filter other than the window (and from/to), the whole hours of the window are read
   * from `search_facets_hourly` (clickhouse/021) and only the partial hours at its ends, the hours
   * that got an event after the snapshot instant and the events of the reader's hidden agents (taken
   * off) from `events`; with any other filter, every matching event is counted from `events`. Both
   * give the same answer.
   */
  async facets (r: Reader, w: SearchWindow, f: SearchFilters): Promise<Facets> {
    const rows = rollupServes(r, w, f) ? await this.facetRowsByHour(r, w, f) : await this.facetRowsScanned(r, w, f, BY_SKIP_INDEX)
    const out: Facets = { total: 0, facets: { type: [], outcome: [], model: [], tool: [], agentId: [], costStatus: [] }, metadata: [] }
    const keys: { key: string; count: number; values: FacetValue[] }[] = []
    for (const x of rows) {
      if (x.facet === 'total') out.total = Number(x.n)
      else if (x.facet !== 'meta') out.facets[x.facet as FacetName].push({ value: orNull(x.value), count: Number(x.n) })
      else {
        // FACETS_TOP leaves out what the filters refuse as far as SQL can tell; this says it exactly
        // (lengths in UTF-16 units, as the filters count them).
        if (metaPathProblem(x.key) !== null) continue
        if (keys.at(-1)?.key !== x.key) keys.push({ key: x.key, count: Number(x.kn), values: [] })
        if (metaValueProblem(x.value) === null) keys.at(-1)!.values.push({ value: x.value, count: Number(x.n) })
      }
    }
    out.metadata = keys
    return out
  }

  /**
   * The matching events counted per interval of event time (`intervalSeconds`, from the Unix epoch,
   * so buckets of a day are UTC days), the non-empty intervals only, oldest first.
   */
  async histogram (r: Reader, w: SearchWindow, f: SearchFilters, intervalSeconds: number): Promise<{ startMs: number; events: number }[]> {
    const { where, params } = await this.where(r, w, f)
    const rows = await this.rows<{ start_ms: string; n: string }>(
      `/* svc:search_histogram */ SELECT toUnixTimestamp64Milli(toDateTime64(toStartOfInterval(ts, toIntervalSecond({interval:UInt32})), 3, 'UTC')) AS start_ms, count() AS n
       FROM events WHERE ${where} GROUP BY start_ms ORDER BY start_ms ${BY_SKIP_INDEX}`,
      { ...params, interval: intervalSeconds },
    )
    return rows.map((x) => ({ startMs: Number(x.start_ms), events: Number(x.n) }))
  }

  /** Every matching event counted (any filter). */
  private async facetRowsScanned (r: Reader, w: SearchWindow, f: SearchFilters, settings = '') {
    const { where, params } = await this.where(r, w, f)
    return this.rows<FacetRow>(
      `/* svc:search_facets */ ${FACETS_TOP(`(SELECT f.1 AS facet, f.2 AS key, f.3 AS value, toInt64(count()) AS n
         FROM events ARRAY JOIN ${FACET_TUPLES} AS f WHERE ${where} GROUP BY facet, key, value)`)} ${settings}`,
      { ...params, ...FACET_LIMITS },
    )
  }

  /**
   * The window's whole hours from the hourly counts, the rest from `events`: the window's partial
   * first hour and everything from the last whole hour on (the current hour, events timed ahead), the
   * hours with an event received after the snapshot instant, and minus the events of hidden agents.
   */
  private async facetRowsByHour (r: Reader, w: SearchWindow, f: SearchFilters) {
    const from = Math.max(w.sinceMs, f.fromMs ?? 0)
    const first = Math.ceil(from / HOUR_MS) * HOUR_MS
    const end = Math.floor(Math.min(f.toMs ?? w.asOf, w.asOf) / HOUR_MS) * HOUR_MS
    if (end - first < 2 * HOUR_MS) return this.facetRowsScanned(r, w, f)
    const hours = { u: r.userId, hFirst: first / 1000, hEnd: end / 1000, asOf: w.asOf }
    const late = (await this.rows<{ h: string }>(
      `/* svc:search_facets_late */ SELECT toUnixTimestamp(hour) AS h FROM search_facets_hourly
       WHERE user_id = {u:String} AND facet = 'total' AND hour >= toDateTime({hFirst:UInt32}, 'UTC') AND hour < toDateTime({hEnd:UInt32}, 'UTC')
       GROUP BY hour HAVING max(last_received) > fromUnixTimestamp64Milli({asOf:Int64})`,
      hours,
    )).map((x) => Number(x.h))
    if (late.length > 24) return this.facetRowsScanned(r, w, f)
    const { where, params } = await this.where(r, w, f)
    // The events counted from `events`: outside [first, end) or in a late hour (time ranges, so the
    // sort order by time of events_feed finds them).
    const lateRanges = late.map((_, i) => `OR (ts >= toDateTime({late${i}:UInt32}, 'UTC') AND ts < toDateTime({late${i}:UInt32} + 3600, 'UTC'))`).join(' ')
    const lateParams = Object.fromEntries(late.map((h, i) => [`late${i}`, h]))
    const hidden = r.hidden.length === 0
      ? ''
      : `UNION ALL
         SELECT f.1 AS facet, f.2 AS key, f.3 AS value, -toInt64(count()) AS n
         FROM events ARRAY JOIN ${FACET_TUPLES} AS f
         WHERE user_id = {u:String} AND agent_id IN {hidden:Array(String)}
           AND ts >= toDateTime({hFirst:UInt32}, 'UTC') AND ts < toDateTime({hEnd:UInt32}, 'UTC')
           AND toUnixTimestamp(toStartOfHour(ts)) NOT IN {late:Array(UInt32)}
         GROUP BY facet, key, value`
    return this.rows<FacetRow>(
      `/* svc:search_facets_hourly */ ${FACETS_TOP(`(SELECT facet, key, value, sum(n) AS n FROM (
         SELECT facet, key, value, toInt64(sum(events)) AS n FROM search_facets_hourly
         WHERE user_id = {u:String} AND hour >= toDateTime({hFirst:UInt32}, 'UTC') AND hour < toDateTime({hEnd:UInt32}, 'UTC')
           AND toUnixTimestamp(hour) NOT IN {late:Array(UInt32)}
           AND NOT (facet IN ('meta', 'metadup') AND match(key, ${FACET_HIDDEN_OTEL_SQL})) -- counted before clickhouse/025 and 028
         GROUP BY facet, key, value
         UNION ALL
         SELECT f.1 AS facet, f.2 AS key, f.3 AS value, toInt64(count()) AS n
         FROM events ARRAY JOIN ${FACET_TUPLES} AS f
         WHERE ${where}
           AND (ts < toDateTime({hFirst:UInt32}, 'UTC') OR ts >= toDateTime({hEnd:UInt32}, 'UTC') ${lateRanges})
         GROUP BY facet, key, value
         ${hidden})
       GROUP BY facet, key, value HAVING n > 0)`)}`,
      { ...params, ...hours, ...lateParams, late, ...FACET_LIMITS },
    )
  }
}

type FacetRow = { facet: string; key: string; value: string; n: string; kn: string }

const HOUR_MS = 3_600_000

/** The first window a page of events is looked for in, below its start. */
const FIRST_WINDOW_MS = HOUR_MS

/** How many times wider a second look at the newest groups may be than the first (FIRST_WINDOW_MS). */
const MAX_WIDENING = 64

/**
 * The most rows the skip indexes may leave a whole-window read of a page that goes beside the hour's
 * read (`events`): about 120 granules. A rare term's read at 10 million events kept 39 (320,000 rows);
 * a term most events hold keeps nearly all, and is refused after the index analysis (~20 ms).
 */
const WHOLE_GUARD = 1_000_000

/**
 * The engine's refusal of the bounded read: over `max_rows_to_read` (TOO_MANY_ROWS, 158), or its
 * settings refused by a server's profile (READONLY, 164; SETTING_CONSTRAINT_VIOLATION, 452). The
 * page is then read without the bound.
 */
function guardRefused (err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown }
  return ['158', '164', '452'].includes(String(e.code)) || /\bCode: (158|164|452)\b/.test(String(e.message))
}

/** A group's figures over its events read (GROUP BY the group's id). */
const GROUP_FIGURES = `toUnixTimestamp64Milli(min(ts)) AS start_ms, toUnixTimestamp64Milli(max(ts)) AS last_ms,
  toUnixTimestamp64Milli(max(${SPAN_END})) AS end_ms, count() AS n, groupUniqArray(agent_id) AS agents, ${TOKEN_SUMS},
  toString(sum(toDecimal128(cost_usd, 9))) AS cost, countIf(error_fingerprint != '') AS errors`

/**
 * The time of the reader's newest event at or below a page's start (the cursor's time; on a first
 * page the snapshot instant, so that an event timed ahead of the clock does not put the hour read
 * first in the future) and within `from`/`to`. Events above it are still read (the page's read has
 * no upper bound of its own on a first page), so it only chooses where a first look begins.
 */
function newestBelowStart (f: SearchFilters, after: PageStart['after']): string {
  return newestEventUpTo(`fromUnixTimestamp64Milli(${after ? '{afterMs:Int64}' : '{asOf:Int64}'})`,
    `${f.fromMs !== undefined ? 'AND ts >= fromUnixTimestamp64Milli({fromMs:Int64})' : ''}
    ${f.toMs !== undefined ? 'AND ts < fromUnixTimestamp64Milli({toMs:Int64})' : ''}`)
}

/**
 * The bounds of a first look at the newest hours: the most groups it ranks (a prefix of the order:
 * every group left out ranks below those kept), the most ids a read by id is given (one parameter
 * of the query: 10,000 ids are about 300 KB of a server's URL, whose limit is 1 MiB), and how many
 * times it reads by id (a page whose hour holds many groups of earlier pages is read whole instead).
 * Past any of them the whole window is read.
 */
export interface GroupLookBounds { ranked: number; ids: number; rounds: number }
const GROUP_LOOK_BOUNDS: GroupLookBounds = { ranked: 20_000, ids: 10_000, rounds: 3 }

/** The groups below a page's start (its last group's latest activity, then id), as the lists order them. */
function groupsBelow (after: PageStart['after']): string {
  return after
    ? 'HAVING max(ts) < fromUnixTimestamp64Milli({afterMs:Int64}) OR (max(ts) = fromUnixTimestamp64Milli({afterMs:Int64}) AND id > {afterId:String})'
    : ''
}

/** A page's rows as read; `more`, for a page read by id with more after it, its last id and time (the cursor's key). */
type PageRows = { rows: Record<string, any>[]; more?: { ts_ms: string; event_id: string } | undefined }

/** How many rows of the facets the queries return (FACET_TOP, FACET_META_KEYS, FACET_META_VALUES). */
const FACET_LIMITS = { top: FACET_TOP, metaKeys: FACET_META_KEYS, metaValues: FACET_META_VALUES }

/** The distinct (path, value) pairs of an event's metadata the facets show (first segment not hidden, no OTLP path hidden). */
const SHOWN_PAIRS = `arrayDistinct(arrayFilter(kv -> extract(kv.1, '^[^.]*') NOT IN
      (${FACET_HIDDEN_KEYS.map((k) => `'${k}'`).join(', ')}) AND NOT match(kv.1, ${FACET_HIDDEN_OTEL_SQL}),
      arrayZip(metadata_flat.keys, metadata_flat.values)))`

/**
 * What an event counts in the facets, as (facet, key, value) tuples: once in the total and each
 * plain facet, once per distinct (path, value) of its shown metadata (a path whose first segment
 * is a hidden key is left out), and once as `metadup` (key: the path) per value beyond its first at
 * a path (`{"git.branch": "a", "git": {"branch": "b"}}` holds two at `git.branch`), so a path's
 * events are its values' counts less its `metadup` count (a path's second and later values: its
 * occurrence number by arrayEnumerateUniq, linear in the paths; a lambda looking each path up in the
 * whole list was quadratic, and an event with 20,000 paths took gigabytes). The same tuples feed
 * `search_facets_hourly` (its view: clickhouse/021_search_feed_and_facets.sql, 022, 023 and, as it is
 * now, 028_search_facets_sessions.sql): a change here is a new migration there.
 */
export const FACET_TUPLES = `arrayConcat(
    [('total', '', ''), ('type', '', toString(type)), ('outcome', '', toString(outcome)), ('model', '', toString(model)),
     ('tool', '', toString(tool_executed)), ('agentId', '', agent_id), ('costStatus', '', toString(cost_status))],
    arrayMap(kv -> ('meta', kv.1, kv.2), ${SHOWN_PAIRS}),
    arrayMap(k -> ('metadup', k, ''), arrayFilter((p, n) -> n > 1,
      arrayMap(kv -> kv.1, ${SHOWN_PAIRS}) AS shown_paths, arrayEnumerateUniq(shown_paths))))`

/** Control characters the filters refuse (all of Unicode's Cc but tab and line breaks). */
const CONTROL = String.raw`'[\\x{0}-\\x{8}\\x{B}\\x{C}\\x{E}-\\x{1F}\\x{7F}-\\x{9F}]'`
/**
 * A metadata path a `meta.<path>` or `hasMeta` filter can name (search-filters.ts metaPathProblem):
 * 1 to MAX_META_PATH characters (counted here in code points; the read's caller checks exactly), no
 * empty key, no control character.
 */
const PATH_FILTERABLE = `lengthUTF8(key) BETWEEN 1 AND ${MAX_META_PATH} AND NOT has(splitByChar('.', key), '') AND NOT match(key, ${CONTROL})`
/** A value a `meta.<path>` filter can take (search-filters.ts metaValueProblem), as far as SQL tells. */
const VALUE_FILTERABLE = `lengthUTF8(value) <= ${MAX_META_VALUE} AND NOT match(value, ${CONTROL})`

/**
 * A metadata path's tier among the facets (FACETS_TOP ranks by tier, then by events): 2 a path that
 * restates the event's fields (FACET_RESTATED), 1 another path of an OTLP span's own data (`otel.*`),
 * 0 any other path the client sent. The plain facets' empty key is of tier 0.
 */
const FACET_KEY_TIER = `multiIf(match(key, ${FACET_RESTATED_SQL}), 2, startsWith(key, 'otel.'), 1, 0)`

/**
 * The answer's rows from counts (facet, key, value, n): the total; the FACET_TOP most frequent
 * values of each plain facet (then by value); the FACET_META_KEYS metadata keys, those the client
 * sent first (FACET_KEY_TIER), then with the most events
 * (their values' counts less their `metadup` count, FACET_TUPLES; then by key), each with its
 * FACET_META_VALUES most frequent values. Ordered by facet, the keys by rank, the values by count.
 * Paths the filters cannot name are left out, and values they cannot take come after every value
 * they can (the caller drops them), so a key's count still counts its events with such a value.
 */
const FACETS_TOP = (counts: string) => `SELECT facet, key, value, n, kn FROM (
    SELECT facet, key, value, n, kn, vr, dense_rank() OVER (PARTITION BY facet ORDER BY ${FACET_KEY_TIER}, kn DESC, key) AS kr FROM (
      SELECT facet, key, value, n,
             sum(if(facet = 'metadup', -n, n)) OVER (PARTITION BY if(facet = 'metadup', 'meta', facet), key) AS kn,
             row_number() OVER (PARTITION BY facet, key ORDER BY facet = 'meta' AND NOT (${VALUE_FILTERABLE}), n DESC, value) AS vr
      FROM ${counts} WHERE facet NOT IN ('meta', 'metadup') OR (${PATH_FILTERABLE}))
    WHERE facet != 'metadup')
  WHERE (facet = 'meta' AND kr <= {metaKeys:UInt32} AND vr <= {metaValues:UInt32}) OR (facet != 'meta' AND vr <= {top:UInt32})
  ORDER BY facet, kr, vr`

const NO_FILTERS = parseSearchFilters({})

/**
 * Whether the hourly counts can answer: no filter but the window and from/to (whatever filter
 * searchWhere knows, now or later, makes its WHERE differ from that of no filter).
 */
function rollupServes (r: Reader, w: SearchWindow, f: SearchFilters): boolean {
  if (!NO_FILTERS.ok) return false
  return searchWhere(r, w, { ...f, fromMs: undefined, toMs: undefined }).where === searchWhere(r, w, NO_FILTERS.filters).where
}
