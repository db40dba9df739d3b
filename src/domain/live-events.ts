/**
 * The live tail's events (GET /v1/me/events/stream, docs/api.md#live-tail): an acknowledged row read
 * back as the API's event, the search filters evaluated in memory against it, and the ids a stream
 * gives its events. Pure: no I/O.
 */
import type { DashboardEvent } from './dashboard-event.ts'
import { INSERT_COLUMNS } from './event-line.ts'
import { tokenTotals } from './dashboard-figures.ts'
import { privacyChip } from './privacy.ts'
import { compareDecimals, type SearchFilters } from './search-filters.ts'
import { termForms } from './search-text.ts'

const at = Object.fromEntries(INSERT_COLUMNS.map((c, i) => [c, i])) as Record<(typeof INSERT_COLUMNS)[number], number>

const orNull = (s: unknown) => (s === '' || s === undefined ? null : s as string)
/** A JSON text column: '' (not sent) is null; the line holds the text, or the object itself (JsonText). */
const jsonOf = (v: unknown): unknown => (typeof v === 'string' ? (v === '' ? null : JSON.parse(v)) : v ?? null)

/**
 * The API's event (as GET /v1/me/events shows it, without `agent`) of an ingest log line: a
 * JSONCompactEachRow array in INSERT_COLUMNS order (src/domain/event-line.ts). The same fields
 * src/storage/event-rows.ts reads back from ClickHouse, decoded the same way.
 */
export function eventOfLine (line: string): DashboardEvent {
  const v = JSON.parse(line) as unknown[]
  const n = (c: keyof typeof at) => Number(v[at[c]] ?? 0)
  const level = orNull(v[at.privacy_level])
  const amountToken = orNull(v[at.amount_token])
  const duration = v[at.duration_ms]
  return {
    eventId: v[at.event_id] as string,
    agentId: v[at.agent_id] as string,
    timestamp: new Date(n('ts')).toISOString(),
    receivedAt: new Date(n('received_at')).toISOString(),
    type: v[at.type] as DashboardEvent['type'],
    outcome: orNull(v[at.outcome]) as DashboardEvent['outcome'],
    model: orNull(v[at.model]),
    toolExecuted: orNull(v[at.tool_executed]),
    toolsConsidered: (v[at.tools_considered] as string[] | undefined) ?? [],
    durationMs: duration === null || duration === undefined ? null : Number(duration),
    input: jsonOf(v[at.input]),
    reasoning: orNull(v[at.reasoning]),
    transaction: (v[at.transaction] as string | null | undefined) ?? null,
    amount: amountToken === null ? null : { token: amountToken, value: n('amount_value') },
    errorMessage: orNull(v[at.error_message]),
    metadata: jsonOf(v[at.metadata]),
    sessionId: orNull(v[at.session_id]),
    traceId: orNull(v[at.trace_id]),
    spanId: orNull(v[at.span_id]),
    parentSpanId: orNull(v[at.parent_span_id]),
    privacyLevel: level as DashboardEvent['privacyLevel'],
    privacyChip: privacyChip(level),
    tokens: tokenTotals(n('tokens_input_base'), n('tokens_cache_creation'), n('tokens_cache_read'), n('tokens_output')),
    costUsd: Number(v[at.cost_usd] ?? 0),
    costStatus: v[at.cost_status] as DashboardEvent['costStatus'],
    errorFingerprint: orNull(v[at.error_fingerprint]),
    contentHash: v[at.content_hash] as string,
  }
}

/**
 * A number's text as clickhouse/018_search.sql has it: the engine reads the JSON text
 * JSON.stringify wrote (the shortest digits that give the number back) and writes it again the same
 * way, but with no `+` in the exponent: `1e21`, `1.7976931348623157e308`, `5e-324`, `-1.5`,
 * `100000` (for `1e5`).
 */
export function numberText (n: number): string {
  return String(n).replace('e+', 'e')
}

/**
 * A JSON value's text as the engine writes it again (JSONExtractKeysAndValuesRaw): JSON.stringify's,
 * but numbers as numberText and U+2028 and U+2029 escaped, as `\u2028` and `\u2029`.
 */
function engineJson (v: unknown): string {
  if (typeof v === 'number') return numberText(v)
  if (typeof v === 'string') return JSON.stringify(v).replace(/[\u2028\u2029]/g, (c) => (c === '\u2028' ? '\\u2028' : '\\u2029'))
  if (Array.isArray(v)) return `[${v.map(engineJson).join(',')}]`
  if (v !== null && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${engineJson(k)}:${engineJson(x)}`).join(',')}}`
  return JSON.stringify(v)
}

/**
 * Whether the engine cannot read a JSON text holding this number: an integer JSON.stringify writes
 * in plain digits (below 1e21) that fits neither Int64 nor UInt64. Such a text is not read at all,
 * so none of its leaves is searchable (the whole object counts as empty).
 */
const unreadable = (n: number) => Number.isInteger(n) && Math.abs(n) < 1e21 && (n >= 2 ** 64 || n <= -(2 ** 63)) // -2^63 is written -9223372036854776000

function hasUnreadable (v: unknown): boolean {
  if (typeof v === 'number') return unreadable(v)
  if (v === null || typeof v !== 'object') return false
  return (Array.isArray(v) ? v : Object.values(v as Record<string, unknown>)).some(hasUnreadable)
}

/**
 * Scalar leaves of a JSON object up to three levels deep by dotted path, as clickhouse/018_search.sql
 * computes `metadata_flat`: strings as they are, numbers as numberText, booleans as their JSON text;
 * nulls, arrays and deeper levels left out; nothing of an object the engine cannot read. With
 * `arrays`, an array is a leaf too, as its JSON text: what `search_text` holds of `input`
 * (clickhouse/026_search_input_arrays.sql; the engine takes the array's text as the ingest line has
 * it, which JSON.stringify writes again the same from the line's values).
 */
export function flatLeaves (value: unknown, arrays = false): [string, string][] {
  const out: [string, string][] = []
  const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)
  const leaf = (path: string, v: unknown) => {
    if (typeof v === 'string') out.push([path, v])
    else if (typeof v === 'number') out.push([path, numberText(v)])
    else if (typeof v === 'boolean') out.push([path, String(v)])
    else if (arrays && Array.isArray(v)) out.push([path, engineJson(v)])
  }
  if (!isObject(value) || hasUnreadable(value)) return out
  // Paths as the engine joins them (concat(a, '.', b)): an empty key is a path of its own ('', 'a.').
  for (const [k1, v1] of Object.entries(value)) {
    if (!isObject(v1)) leaf(k1, v1)
    else {
      for (const [k2, v2] of Object.entries(v1)) {
        if (!isObject(v2)) leaf(`${k1}.${k2}`, v2)
        else for (const [k3, v3] of Object.entries(v2)) if (!isObject(v3)) leaf(`${k1}.${k2}.${k3}`, v3)
      }
    }
  }
  return out
}

/** The text `q` looks in, lower-cased, as `search_text` (clickhouse/018_search.sql) holds it. */
function searchText (e: DashboardEvent, meta: [string, string][]): string {
  const parts = [
    ...flatLeaves(e.input, true).map(([, v]) => v),
    e.reasoning ?? '', e.errorMessage ?? '', e.toolExecuted ?? '', e.model ?? '',
    ...meta.map(([, v]) => v),
  ]
  return parts.join('\n').toLowerCase()
}

const inList = (values: string[], v: string | null) => values.length === 0 || (v !== null && values.includes(v))

/** Cost in USD as the exact decimal text the bounds compare with (9 decimals at most, as stored). */
const costText = (usd: number) => usd.toFixed(9).replace(/\.?0+$/, '') || '0'

/**
 * Whether an event satisfies the filters (src/domain/search-filters.ts), evaluated as the search
 * repository's SQL evaluates them: every present field (AND), any value of one (OR); `q` terms are
 * substrings of the same text, ignoring case. `since`, `limit` and `cursor` do not apply to a stream.
 */
export function eventMatches (e: DashboardEvent, f: SearchFilters): boolean {
  if (!inList(f.types, e.type) || !inList(f.outcomes, e.outcome) || !inList(f.models, e.model) || !inList(f.tools, e.toolExecuted)) return false
  if (!inList(f.agentIds, e.agentId) || !inList(f.sessionIds, e.sessionId) || !inList(f.traceIds, e.traceId)) return false
  if (!inList(f.fingerprints, e.errorFingerprint) || !inList(f.privacyLevels, e.privacyLevel) || !inList(f.costStatuses, e.costStatus)) return false
  if (f.minCostUsd !== undefined && compareDecimals(costText(e.costUsd), f.minCostUsd) < 0) return false
  if (f.maxCostUsd !== undefined && compareDecimals(costText(e.costUsd), f.maxCostUsd) > 0) return false
  if (f.minDurationMs !== undefined && (e.durationMs === null || e.durationMs < f.minDurationMs)) return false
  if (f.maxDurationMs !== undefined && (e.durationMs === null || e.durationMs > f.maxDurationMs)) return false
  const ts = Date.parse(e.timestamp)
  if (f.fromMs !== undefined && ts < f.fromMs) return false
  if (f.toMs !== undefined && ts >= f.toMs) return false
  if (f.meta.length === 0 && f.hasMeta.length === 0 && f.terms.length === 0) return true
  const meta = flatLeaves(e.metadata)
  for (const m of f.meta) {
    if (!meta.some(([k, v]) => k === m.path && m.values.includes(v))) return false
  }
  for (const path of f.hasMeta) {
    if (!meta.some(([k]) => k === path || k.startsWith(`${path}.`))) return false
  }
  if (f.terms.length > 0) {
    const text = searchText(e, meta)
    for (const term of f.terms) {
      if (!termForms(term).some((form) => text.includes(form.toLowerCase()))) return false
    }
  }
  return true
}

/**
 * A stream event's id: the Redis stream entry of its batch (`<ms>-<seq>`, ordered per user across
 * instances) and its place in the batch, e.g. `1764250000000-0:3`.
 */
export interface LiveId { entry: string; index: number }

export function formatLiveId (id: LiveId): string {
  return `${id.entry}:${id.index}`
}

/** A Last-Event-ID as formatLiveId writes it, or null when it is not one. */
export function parseLiveId (s: string | undefined): LiveId | null {
  // Digits as the stream writes them, without leading zeros: `01-0` would name the entry `1-0` but
  // not equal it as text, and the batch it names would be sent again from its start.
  const m = s === undefined ? null : /^(0|[1-9]\d{0,14})-(0|[1-9]\d{0,14}):(0|[1-9]\d{0,5})$/.exec(s.trim())
  return m ? { entry: `${m[1]}-${m[2]}`, index: Number(m[3]) } : null
}

/** Orders two stream entry ids (`<ms>-<seq>`): negative when a is older. */
export function compareEntries (a: string, b: string): number {
  const [am = 0, as = 0] = a.split('-').map(Number)
  const [bm = 0, bs = 0] = b.split('-').map(Number)
  return am - bm || as - bs
}
