import type { ClickHouseClient } from '@clickhouse/client'
import { Readable } from 'node:stream'
import { randomUUID } from 'node:crypto'
import { pageOf, type Page, type PageStart } from '../domain/cursor.ts'
import { SCORE_INSERT_COLUMNS, scoreLine, type ScoreDataType, type ScoreRow, type ScoreSource } from '../domain/score-row.ts'
import type { FigureRow } from '../domain/score-summary.ts'
import type { ScoreWindow } from '../domain/score-alerts.ts'
import { BY_SKIP_INDEX, embeddedRawInsert } from './clickhouse-client.ts'
import { isoFromMs } from './timestamps.ts'

/** A score as read: the latest write of its score id. */
export interface StoredScore {
  scoreId: string
  rowId: string
  name: string
  dataType: ScoreDataType
  value: number | null
  label: string | null
  boolean: boolean | null
  comment: string | null
  source: ScoreSource
  authorId: string | null
  traceId: string | null
  spanId: string | null
  sessionId: string | null
  eventId: string | null
  agentId: string | null
  metadata: Record<string, unknown>
  createdAt: string
  createdMs: number
}

/**
 * Which scores a read wants (all of them optional but the user): every field given (AND), any value
 * of a list (OR); an empty or absent list does not filter.
 */
export interface ScoreFilter {
  name?: string | undefined
  source?: ScoreSource | undefined
  agentIds?: string[] | undefined
  traceIds?: string[] | undefined
  sessionIds?: string[] | undefined
  fromMs?: number | undefined
  toMs?: number | undefined
}

/** Who is reading: the user, and their soft-deleted agents whose scores every read hides. */
export interface ScoreReader { userId: string; hidden: string[] }

const COLUMNS = `score_id, row_id, name, data_type, value, label, comment, source, author_id, trace_id, span_id, session_id, event_id,
  agent_id, metadata, toUnixTimestamp64Milli(received_at) AS received_ms`

const orNull = (s: string): string | null => (s === '' ? null : s)

function toScore (r: Record<string, any>): StoredScore {
  const dataType = r.data_type as ScoreDataType
  let metadata: Record<string, unknown> = {}
  if (r.metadata) {
    try { metadata = JSON.parse(r.metadata) } catch { metadata = {} }
  }
  return {
    scoreId: r.score_id,
    rowId: r.row_id,
    name: r.name,
    dataType,
    value: r.value === null ? null : Number(r.value),
    label: dataType === 'categorical' ? r.label : null,
    boolean: dataType === 'boolean' ? r.label === 'true' : null,
    comment: orNull(r.comment),
    source: r.source,
    authorId: orNull(r.author_id),
    traceId: orNull(r.trace_id),
    spanId: orNull(r.span_id),
    sessionId: orNull(r.session_id),
    eventId: orNull(r.event_id),
    agentId: orNull(r.agent_id),
    metadata,
    createdAt: isoFromMs(r.received_ms),
    createdMs: Number(r.received_ms),
  }
}

/**
 * The rows of the latest write of each score id of the user `{u:String}` received by
 * `{asOf:Int64}` (unix ms), among the score ids whose writes `prefilter` (a condition on
 * the table's columns, '' for all) finds: a write that moved a score elsewhere, or renamed it, still
 * replaces it. The store is not merged on read, so every read of scores goes through this (or
 * FINAL). A merge keeps only a score's latest write, so `asOf` cannot bring back a write replaced
 * after it once the parts have merged: the score then has no write by `asOf` at all.
 */
export function latestWrites (prefilter: string): string {
  const also = prefilter ? `AND score_id IN (SELECT score_id FROM scores WHERE user_id = {u:String} AND ${prefilter})` : ''
  return `SELECT * FROM scores WHERE user_id = {u:String} AND received_at <= fromUnixTimestamp64Milli({asOf:Int64}) ${also}
      ORDER BY version DESC LIMIT 1 BY score_id`
}

/**
 * The latest write of each of the reader's score ids received by `asOf` (a fixed history for a walk
 * over pages), restricted to the score ids that `prefilter` finds among the writes: a write that
 * moved a score elsewhere still replaces it. A score of a trace that names no agent is of the agent
 * of the trace's earliest event among its live agents (ties by agent id, so every read agrees); of a
 * deleted one only when every agent of the trace is deleted (the score is then hidden with them).
 * A read of it ends with BY_SKIP_INDEX: the join finds the traces' events by the bloom filter of
 * `trace_id`, and weighing the `events_feed` projection for that took 150-200 ms of a trace's
 * 170-230 ms score read at 10 million events (bench/README.md, "Search").
 */
function latest (prefilter: string): string {
  const also = prefilter ? `AND score_id IN (SELECT score_id FROM scores WHERE user_id = {u:String} AND ${prefilter})` : ''
  return `SELECT s.* REPLACE (if(s.agent_id != '', s.agent_id, t.trace_agent) AS agent_id) FROM (${latestWrites(prefilter)}) AS s
    LEFT JOIN (
      SELECT trace_id, argMin(agent_id, (agent_id IN {hidden:Array(String)}, ts, agent_id)) AS trace_agent FROM events
      WHERE user_id = {u:String} AND trace_id IN (SELECT trace_id FROM scores WHERE user_id = {u:String} AND agent_id = '' AND trace_id != '' ${also})
      GROUP BY trace_id) AS t ON s.trace_id = t.trace_id`
}

/** The conditions of a filter on the latest writes, and what the prefilter can narrow on. */
function conditions (f: ScoreFilter): { where: string[]; prefilter: string[] } {
  const where = ['agent_id NOT IN {hidden:Array(String)}']
  const prefilter: string[] = []
  if (f.name !== undefined) where.push('name = {name:String}')
  if (f.source !== undefined) where.push('source = {source:String}')
  if (f.agentIds?.length) where.push('agent_id IN {agents:Array(String)}')
  if (f.traceIds?.length) { where.push('trace_id IN {traces:Array(String)}'); prefilter.push('trace_id IN {traces:Array(String)}') }
  if (f.sessionIds?.length) { where.push('session_id IN {sessions:Array(String)}'); prefilter.push('session_id IN {sessions:Array(String)}') }
  if (f.fromMs !== undefined) where.push('received_at >= fromUnixTimestamp64Milli({fromMs:Int64})')
  if (f.toMs !== undefined) where.push('received_at < fromUnixTimestamp64Milli({toMs:Int64})')
  return { where, prefilter }
}

function params (r: ScoreReader, f: ScoreFilter, asOf: number): Record<string, unknown> {
  return {
    u: r.userId, hidden: r.hidden, asOf, name: f.name ?? '', source: f.source ?? '', agents: f.agentIds ?? [],
    traces: f.traceIds ?? [], sessions: f.sessionIds ?? [], fromMs: f.fromMs ?? 0, toMs: f.toMs ?? 0,
  }
}

/**
 * The mean of `value` where `condition`: avgIf, unless its sum overflows (values near the largest
 * double), when it is taken of the values scaled down by 1e300 and scaled back (exact to an ulp),
 * never infinity, which ClickHouse's JSON writes as null (read as 0).
 */
function meanIf (condition: string): string {
  return `if(isFinite(avgIf(value, ${condition})), avgIf(value, ${condition}), avgIf(value / 1e300, ${condition}) * 1e300)`
}

/** The figures of one group: count, mean and percentiles of values, labels' counts. */
const FIGURES = `count() AS n,
  ${meanIf("data_type != 'categorical'")} AS mean,
  quantileExactIf(0.5)(value, data_type != 'categorical') AS p50,
  quantileExactIf(0.9)(value, data_type != 'categorical') AS p90,
  countIf(data_type != 'categorical') AS numeric_n,
  sumMapIf(map(label, toUInt64(1)), label != '') AS labels,
  argMax(data_type, version) AS latest_type`

/** Scores in ClickHouse (clickhouse/019): one row per write, read as the latest write per score id. */
export class ScoresRepository {
  constructor (private readonly ch: ClickHouseClient) {}

  private async rows<T = Record<string, any>>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const rs = await this.ch.query({ query, query_params: params, format: 'JSONEachRow' })
    return rs.json<T>()
  }

  /**
   * Inserts a block of rows serialised by `scoreLine`, under a deduplication token: a block sent
   * again with the same token is dropped by ClickHouse (the table keeps a deduplication window).
   */
  async insertBlock (body: Buffer | string, token: string): Promise<void> {
    if (!/^[\w:.-]+$/.test(token)) throw new Error(`invalid deduplication token ${token}`)
    const settings = {
      insert_deduplication_token: token,
      input_format_json_compact_allow_variable_number_of_columns: 1,
      input_format_json_read_objects_as_strings: 1,
    }
    const raw = embeddedRawInsert(this.ch)
    if (raw) {
      await raw({ table: 'scores', columns: SCORE_INSERT_COLUMNS, format: 'JSONCompactEachRow', values: Buffer.isBuffer(body) ? body : Buffer.from(body), settings })
      return
    }
    const result = await this.ch.exec({
      query: `INSERT INTO scores (${SCORE_INSERT_COLUMNS.join(', ')}) SETTINGS ` +
        Object.entries(settings).map(([name, value]) => `${name} = ${typeof value === 'string' ? `'${value}'` : value}`).join(', ') +
        ' FORMAT JSONCompactEachRow',
      values: Readable.from([body]),
    })
    result.stream.resume()
  }

  /** Inserts rows straight into the store, bypassing any ingest log (tests). */
  async insert (rows: ScoreRow[]): Promise<void> {
    await this.insertBlock(rows.map(scoreLine).join('\n') + '\n', `direct:${randomUUID()}`)
  }

  /** Every write stored of one score id (for tests of replacement and deduplication). */
  async writesOf (userId: string, scoreId: string): Promise<number> {
    const [row] = await this.rows<{ n: string }>('/* svc:score_writes */ SELECT count() AS n FROM scores WHERE user_id = {u:String} AND score_id = {id:String}', { u: userId, id: scoreId })
    return Number(row?.n ?? 0)
  }

  /** A page of the reader's scores, newest first (by the receive time of their latest write, then id). */
  async list (r: ScoreReader, f: ScoreFilter, opts: { limit: number; start: PageStart }): Promise<Page<StoredScore>> {
    const { asOf, after } = opts.start
    const { where, prefilter } = conditions(f)
    if (after) where.push('(received_at, row_id) < (fromUnixTimestamp64Milli({afterMs:Int64}), {afterId:String})')
    const rows = await this.rows(
      `/* svc:me_scores */ SELECT ${COLUMNS} FROM (${latest(prefilter.join(' AND '))})
       WHERE ${where.join(' AND ')} ORDER BY received_at DESC, row_id DESC LIMIT {limit:UInt32} ${BY_SKIP_INDEX}`,
      { ...params(r, f, asOf), afterMs: after?.ms ?? 0, afterId: after?.id ?? '', limit: opts.limit + 1 },
    )
    return pageOf('scores', asOf, rows.map(toScore), opts.limit, (s) => ({ ms: s.createdMs, id: s.rowId }))
  }

  /**
   * Every score of one trace or session of the reader (up to `limit`), oldest first: its own, its
   * spans', and those of its events (a score that names only an `eventId` counts for the event's
   * trace and session, as in the search's filters). The events' ids are a subquery the conditions
   * below share (an array scalar with `has` or `IN` instead took seconds at 10,000 ids).
   */
  async of (r: ScoreReader, target: { traceId: string } | { sessionId: string }, asOf: number, limit = 10_000): Promise<StoredScore[]> {
    const byTrace = 'traceId' in target
    const f: ScoreFilter = byTrace ? { traceIds: [target.traceId] } : { sessionIds: [target.sessionId] }
    const { where, prefilter } = conditions(f)
    const own = byTrace ? 'trace_id IN {traces:Array(String)}' : 'session_id IN {sessions:Array(String)}'
    const orOfItsEvents = (c: string) => c === own ? `(${own} OR (event_id != '' AND event_id IN target_events))` : c
    const rows = await this.rows(
      `/* svc:me_scores_of_${byTrace ? 'trace' : 'session'} */
       WITH target_events AS (SELECT event_id FROM events WHERE user_id = {u:String} AND ${own})
       SELECT ${COLUMNS} FROM (${latest(prefilter.map(orOfItsEvents).join(' AND '))})
       WHERE ${where.map(orOfItsEvents).join(' AND ')} ORDER BY received_at, row_id LIMIT {limit:UInt32} ${BY_SKIP_INDEX}`,
      { ...params(r, f, asOf), limit },
    )
    return rows.map(toScore)
  }

  /**
   * Per agent, the mean and count of the user's numeric and boolean scores of `name` received in
   * [windowFromMs, nowMs) and in [baselineFromMs, windowFromMs) (the `score.dropped` rule). Scores of
   * no agent, and of the agents in `hidden`, are left out.
   */
  async windows (r: ScoreReader, name: string, span: { baselineFromMs: number; windowFromMs: number; nowMs: number }): Promise<ScoreWindow[]> {
    const rows = await this.rows(
      `/* svc:score_alert_windows */ SELECT agent_id,
         ${meanIf('received_at >= fromUnixTimestamp64Milli({windowFrom:Int64})')} AS window_mean,
         countIf(received_at >= fromUnixTimestamp64Milli({windowFrom:Int64})) AS window_n,
         ${meanIf('received_at < fromUnixTimestamp64Milli({windowFrom:Int64})')} AS baseline_mean,
         countIf(received_at < fromUnixTimestamp64Milli({windowFrom:Int64})) AS baseline_n
       FROM (${latest('name = {name:String} AND received_at >= fromUnixTimestamp64Milli({baselineFrom:Int64})')})
       WHERE name = {name:String} AND agent_id != '' AND agent_id NOT IN {hidden:Array(String)} AND data_type != 'categorical'
         AND received_at >= fromUnixTimestamp64Milli({baselineFrom:Int64})
       GROUP BY agent_id ${BY_SKIP_INDEX}`,
      { u: r.userId, hidden: r.hidden, asOf: span.nowMs, name, windowFrom: span.windowFromMs, baselineFrom: span.baselineFromMs },
    )
    return rows.map((x) => ({
      agentId: x.agent_id, name, windowMean: Number(x.window_mean), windowCount: Number(x.window_n), baselineMean: Number(x.baseline_mean), baselineCount: Number(x.baseline_n),
    }))
  }

  /**
   * The figures of the reader's scores per name, grouped by `by`: the period [fromMs, toMs) against
   * the one before it [previousFromMs, fromMs) (`period`), per UTC day or per agent of the period.
   */
  async figures (r: ScoreReader, f: ScoreFilter, by: 'period' | 'day' | 'agent', span: { previousFromMs: number; fromMs: number; toMs: number }, asOf: number): Promise<FigureRow[]> {
    const { where } = conditions({ ...f, fromMs: by === 'period' ? span.previousFromMs : span.fromMs, toMs: span.toMs })
    const key = by === 'period'
      ? "if(received_at >= fromUnixTimestamp64Milli({periodFrom:Int64}), 'current', 'previous')"
      : by === 'day' ? 'toString(toDate(received_at))' : 'agent_id'
    const rows = await this.rows(
      `/* svc:me_scores_summary_${by} */ SELECT name, ${key} AS key, ${FIGURES}
       FROM (${latest('')}) WHERE ${where.join(' AND ')}
       GROUP BY name, key ORDER BY name, key ${BY_SKIP_INDEX}`,
      { ...params(r, f, asOf), fromMs: by === 'period' ? span.previousFromMs : span.fromMs, toMs: span.toMs, periodFrom: span.fromMs },
    )
    return rows.map((x) => ({
      name: x.name,
      key: x.key,
      dataType: x.latest_type,
      count: Number(x.n),
      numericCount: Number(x.numeric_n),
      mean: Number(x.mean),
      p50: Number(x.p50),
      p90: Number(x.p90),
      labels: Object.fromEntries(Object.entries(x.labels as Record<string, string | number>).map(([k, v]) => [k, Number(v)])),
    }))
  }
}
