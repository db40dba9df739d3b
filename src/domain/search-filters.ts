/**
 * The search filters of the dashboard lists (GET /v1/me/events, /traces, /sessions and
 * /events/facets; docs/api.md#search), read from a query string as Fastify parsed it (a repeated
 * parameter is an array). Pure: no I/O.
 *
 * The spec's lenient parameters keep their rules: `since` and `agentId` values that do not fit are
 * dropped. Every newer filter is strict: a value that does not fit is a 400 naming the parameter.
 */
import { isCuid } from './ids.ts'
import { EVENT_TIME_RANGE, isEventTime, isIsoDateTimeOutOfRange, parseIsoDateTime } from './date-time.ts'
import { scoreNameProblem } from './score-row.ts'
import { characters, parseSearchText, textProblem, type SearchTerm } from './search-text.ts'

export const EVENT_TYPES = ['reasoning', 'tool', 'tx', 'decision', 'action', 'error'] as const
export const OUTCOMES = ['pending', 'success', 'failed'] as const
export const PRIVACY_LEVELS = ['minimal', 'standard', 'full'] as const
export const COST_STATUSES = ['priced', 'user_price', 'unknown_model', 'no_model'] as const

/** At most this many values of one repeatable parameter, and this many metadata filters. */
export const MAX_VALUES = 50
export const MAX_META_FILTERS = 20
/** Longest metadata path and value, and longest free-text value (model, tool, ids). */
export const MAX_META_PATH = 200
export const MAX_META_VALUE = 1000
export const MAX_TEXT_VALUE = 200

/** A metadata filter: the path's value is one of `values` (OR). */
export interface MetaFilter { path: string; values: string[] }

/** At most this many score names filtered on at once (each is a read of the scores). */
export const MAX_SCORE_FILTERS = 10
/** Longest score name and value (a label is at most 200 characters). */
export const MAX_SCORE_TEXT = 200

/** A numeric range of a score filter, both ends inclusive; an end left out is open. */
export interface ScoreRange { min?: number | undefined; max?: number | undefined }

/**
 * A score filter (`score.<name>=<value>`, repeatable): a score of this name whose label is one of
 * `labels` (a boolean's label is `true` or `false`) or whose value (a boolean's is 1 or 0) lies in
 * one of `ranges`. Every value given is in `labels` as written; those that read as a number or a
 * range are in `ranges` as well.
 */
export interface ScoreFilter { name: string; labels: string[]; ranges: ScoreRange[] }

/**
 * What an event must satisfy: every present field (AND across fields), any value of a field (OR
 * within one). Empty arrays and undefined bounds do not filter.
 */
export interface SearchFilters {
  types: string[]
  outcomes: string[]
  models: string[]
  tools: string[]
  agentIds: string[]
  sessionIds: string[]
  traceIds: string[]
  fingerprints: string[]
  privacyLevels: string[]
  costStatuses: string[]
  /** Cost bounds (inclusive) as decimal text with at most 9 decimals, compared exactly. */
  minCostUsd?: string | undefined
  maxCostUsd?: string | undefined
  /** Duration bounds in ms (inclusive); an event without a duration never matches one. */
  minDurationMs?: number | undefined
  maxDurationMs?: number | undefined
  /** Event time bounds in unix ms: from inclusive, to exclusive. */
  fromMs?: number | undefined
  toMs?: number | undefined
  /** metadata.<path> equals one of the values. */
  meta: MetaFilter[]
  /** metadata has a scalar at the path or under it. */
  hasMeta: string[]
  /** Full-text terms (q), all required. */
  terms: SearchTerm[]
  /** Score filters (score.<name>), every name required (AND), any value of one (OR). */
  scores: ScoreFilter[]
}

/** One malformed parameter: its name and what is wrong, as the service's other 400s say it. */
export interface FilterProblem { path: (string | number)[]; message: string }

/** The parameters parsed, or the problems found (every one, not only the first). */
export type ParsedFilters = { ok: true; filters: SearchFilters } | { ok: false; problems: FilterProblem[] }

const FINGERPRINT = /^[0-9a-f]{16}$/
const DECIMAL = /^0*\d{1,9}(?:\.\d{1,9})?$/
const COST_MESSAGE = 'must be a decimal number from 0 to 999999999.999999999 with at most 9 decimals (e.g. 0.25)'
/** Durations as ingestion takes them: integers from 0 to 2^53-1 (leading zeros taken, as in a cost bound). */
const DURATION = /^0*\d{1,16}$/
const DURATION_MESSAGE = `must be an integer of milliseconds from 0 to ${Number.MAX_SAFE_INTEGER}`
const DIGITS = /^\d+$/
const INSTANT_FORMS = 'must be an ISO 8601 date-time (e.g. 2026-11-27T09:00:00Z) or unix milliseconds'
const INSTANT_RANGE = `must be an instant ${EVENT_TIME_RANGE}`

/** The parameter names this module reads besides `meta.<path>` (the lists' own: limit, cursor, since). */
export const FILTER_PARAMS = [
  'type', 'outcome', 'model', 'tool', 'agentId', 'sessionId', 'traceId', 'fingerprint', 'privacyLevel', 'costStatus',
  'minCostUsd', 'maxCostUsd', 'minDurationMs', 'maxDurationMs', 'from', 'to', 'hasMeta', 'q',
] as const

const META_PREFIX = 'meta.'
export const SCORE_PREFIX = 'score.'
const isPrefixed = (k: string) => k.startsWith(META_PREFIX) || k.startsWith(SCORE_PREFIX)

function valuesOf (v: unknown): unknown[] {
  if (v === undefined) return []
  return Array.isArray(v) ? v : [v]
}

/** True when the query names any filter (a new one, or agentId), i.e. the plain list does not answer it. */
export function hasFilters (query: Record<string, unknown>): boolean {
  return Object.keys(query).some((k) => query[k] !== undefined && ((FILTER_PARAMS as readonly string[]).includes(k) || isPrefixed(k)))
}

/**
 * Reads the filters from a parsed query string. Parameters it does not know are ignored (as
 * everywhere in the API); `agentId` values that are not cuids are dropped (the spec's rule).
 */
export function parseSearchFilters (query: Record<string, unknown>): ParsedFilters {
  const problems: FilterProblem[] = []
  const fail = (name: string, message: string) => { problems.push({ path: [name], message }) }

  /** A repeatable parameter: each value must pass `check` (a message when it does not). */
  const list = (name: string, check: (s: string) => string | null): string[] => {
    const raw = valuesOf(query[name])
    if (raw.length > MAX_VALUES) {
      fail(name, `at most ${MAX_VALUES} values`)
      return []
    }
    const out: string[] = []
    for (const v of raw) {
      const s = typeof v === 'string' ? v : String(v)
      const problem = check(s)
      if (problem) fail(name, problem)
      else if (!out.includes(s)) out.push(s)
    }
    return out
  }
  const oneOf = (allowed: readonly string[]) => (s: string) => allowed.includes(s) ? null : `must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`
  const text = (max: number) => (s: string) => lengthProblem(s, max)
  /** A single-valued parameter: one value, passing `parse` (else `message`, or what it says of the value). */
  const single = <T>(name: string, parse: (s: string) => T | null, message: string | ((s: string) => string)): T | undefined => {
    const raw = valuesOf(query[name])
    if (raw.length === 0) return undefined
    if (raw.length > 1) {
      fail(name, 'must be given once')
      return undefined
    }
    const s = String(raw[0])
    const parsed = parse(s)
    if (parsed === null) fail(name, typeof message === 'string' ? message : message(s))
    return parsed ?? undefined
  }

  /**
   * The spec's rule for agentId: a value that is not a cuid is dropped, not refused. The limit on
   * values holds apart from it: more than MAX_VALUES cuids is a 400 (the dropped values do not count).
   */
  function agentIdsOf (v: unknown): string[] {
    const cuids = valuesOf(v).filter((x): x is string => typeof x === 'string' && isCuid(x))
    if (cuids.length > MAX_VALUES) {
      fail('agentId', `at most ${MAX_VALUES} values`)
      return []
    }
    return cuids.filter((x, i, a) => a.indexOf(x) === i)
  }

  const instant = (s: string): number | null => {
    const ms = DIGITS.test(s) ? (isEventTime(Number(s)) ? Number(s) : NaN) : parseIsoDateTime(s)
    return Number.isNaN(ms) ? null : ms
  }
  // A real date-time or a number of milliseconds outside the range is refused for its range; a date
  // alone, and an offset whose `+` the query string turned into a space, are told what to send.
  const instantMessage = (s: string) => {
    if (DIGITS.test(s) || isIsoDateTimeOutOfRange(s)) return INSTANT_RANGE
    if (/^\d{4}-\d{2}-\d{2}$/.test(s)) return `${INSTANT_FORMS}: a date alone is not an instant (its midnight in UTC: ${s}T00:00:00Z)`
    if (/\d \d{2}:?\d{2}$/.test(s)) return `${INSTANT_FORMS}: a + in a query string is read as a space (send an offset's + as %2B)`
    return INSTANT_FORMS
  }

  const filters: SearchFilters = {
    types: list('type', oneOf(EVENT_TYPES)),
    outcomes: list('outcome', oneOf(OUTCOMES)),
    models: list('model', text(MAX_TEXT_VALUE)),
    tools: list('tool', text(MAX_TEXT_VALUE)),
    agentIds: agentIdsOf(query.agentId),
    sessionIds: list('sessionId', text(MAX_TEXT_VALUE)),
    traceIds: list('traceId', text(MAX_TEXT_VALUE)),
    fingerprints: list('fingerprint', (s) => FINGERPRINT.test(s) ? null : 'must be 16 lower-case hex characters'),
    privacyLevels: list('privacyLevel', oneOf(PRIVACY_LEVELS)),
    costStatuses: list('costStatus', oneOf(COST_STATUSES)),
    minCostUsd: single('minCostUsd', (s) => DECIMAL.test(s) ? normaliseDecimal(s) : null, COST_MESSAGE),
    maxCostUsd: single('maxCostUsd', (s) => DECIMAL.test(s) ? normaliseDecimal(s) : null, COST_MESSAGE),
    minDurationMs: single('minDurationMs', duration, DURATION_MESSAGE),
    maxDurationMs: single('maxDurationMs', duration, DURATION_MESSAGE),
    fromMs: single('from', instant, instantMessage),
    toMs: single('to', instant, instantMessage),
    meta: [],
    hasMeta: list('hasMeta', metaPathProblem),
    terms: [],
    scores: [],
  }
  if (filters.minCostUsd !== undefined && filters.maxCostUsd !== undefined && compareDecimals(filters.minCostUsd, filters.maxCostUsd) > 0) {
    fail('minCostUsd', 'must not be greater than maxCostUsd')
  }
  if (filters.minDurationMs !== undefined && filters.maxDurationMs !== undefined && filters.minDurationMs > filters.maxDurationMs) {
    fail('minDurationMs', 'must not be greater than maxDurationMs')
  }
  if (filters.fromMs !== undefined && filters.toMs !== undefined && filters.fromMs >= filters.toMs) {
    fail('from', 'must be earlier than to')
  }

  // Object.keys keeps the query string's order (no key here reads as an integer index), which names
  // the first past a limit; the filters themselves are read sorted.
  const metaGiven = Object.keys(query).filter((k) => k.startsWith(META_PREFIX))
  const metaNames = [...metaGiven].sort()
  if (metaNames.length + filters.hasMeta.length > MAX_META_FILTERS) {
    // Named by a parameter the caller gave: hasMeta, else the first meta.* past the limit.
    fail(filters.hasMeta.length > 0 ? 'hasMeta' : metaGiven[MAX_META_FILTERS]!, `at most ${MAX_META_FILTERS} metadata filters (meta.* and hasMeta together)`)
  } else {
    for (const name of metaNames) {
      const path = name.slice(META_PREFIX.length)
      const problem = metaPathProblem(path)
      if (problem) {
        fail(name, `the metadata path ${problem}`)
        continue
      }
      const values = list(name, metaValueProblem)
      if (values.length > 0) filters.meta.push({ path, values })
    }
  }

  const scoreGiven = Object.keys(query).filter((k) => k.startsWith(SCORE_PREFIX))
  const scoreNames = [...scoreGiven].sort()
  if (scoreNames.length > MAX_SCORE_FILTERS) fail(scoreGiven[MAX_SCORE_FILTERS]!, `at most ${MAX_SCORE_FILTERS} score filters`)
  else {
    for (const param of scoreNames) {
      const name = param.slice(SCORE_PREFIX.length)
      // The name rule of scores themselves: a name no score can have (`acc `, `acc\u200b`) would match nothing.
      const problem = textProblem(name) ?? scoreNameProblem(name)
      if (problem) {
        fail(param, `the score name ${problem}`)
        continue
      }
      const values = list(param, (s) => lengthProblem(s, MAX_SCORE_TEXT) ?? textProblem(s) ?? rangeProblem(s))
      if (values.length > 0) filters.scores.push({ name, labels: values, ranges: values.map(scoreRange).filter((x): x is ScoreRange => x !== null) })
    }
  }

  const q = valuesOf(query.q)
  if (q.length > 1) fail('q', 'must be given once')
  else if (q.length === 1) {
    const parsed = parseSearchText(String(q[0]))
    if (parsed.ok) filters.terms = parsed.terms
    else fail('q', parsed.message)
  }

  return problems.length > 0 ? { ok: false, problems } : { ok: true, filters }
}

/** The filters that take one value. */
const SINGLE_PARAMS = ['minCostUsd', 'maxCostUsd', 'minDurationMs', 'maxDurationMs', 'from', 'to', 'q']

const isFilterName = (k: string) => (FILTER_PARAMS as readonly string[]).includes(k) || isPrefixed(k)

/** decodeURIComponent of a query string part (`+` a space), or null when it is not UTF-8. */
function decoded (part: string): string | null {
  try {
    return decodeURIComponent(part.replace(/\+/g, ' '))
  } catch {
    return null
  }
}

/** Which parameters of a query string are filters, and which of them take one value. */
export interface FilterParams { isFilter: (name: string) => boolean; single: readonly string[] }

/** The search's: FILTER_PARAMS, `meta.*` and `score.*`. */
const SEARCH_PARAMS: FilterParams = { isFilter: isFilterName, single: SINGLE_PARAMS }

/**
 * Problems of a filter query that the schema would report without naming them clearly, or a
 * parser would hide, found before validation from the request's URL: a filter whose
 * percent-encoding is not UTF-8 (the parser keeps such a value as its raw text, which then matches
 * nothing), and a single-valued filter given more than once. The filters are the search's unless
 * `params` names others (the reads of scores take theirs the same way).
 */
export function filterQueryProblems (url: string, params: FilterParams = SEARCH_PARAMS): FilterProblem[] {
  const { isFilter, single } = params
  const problems: FilterProblem[] = []
  const start = url.indexOf('?')
  if (start === -1) return problems
  const seen = new Map<string, number>()
  for (const part of url.slice(start + 1).split('&')) {
    if (part === '') continue
    const eq = part.indexOf('=')
    const rawName = eq === -1 ? part : part.slice(0, eq)
    const name = decoded(rawName) ?? rawName
    if (!isFilter(name)) continue
    if (decoded(rawName) === null || (eq !== -1 && decoded(part.slice(eq + 1)) === null)) {
      problems.push({ path: [name], message: 'must be valid percent-encoded UTF-8 (a % itself is sent as %25)' })
    }
    seen.set(name, (seen.get(name) ?? 0) + 1)
  }
  for (const name of single) {
    if ((seen.get(name) ?? 0) > 1) problems.push({ path: [name], message: 'must be given once' })
  }
  return problems
}

/** Text of 1 to `max` characters (code points, as the schemas count them), or what is wrong. */
function lengthProblem (s: string, max: number): string | null {
  const n = characters(s)
  return n >= 1 && n <= max ? null : `must be 1 to ${max} characters`
}

/** A duration bound: an integer of milliseconds up to 2^53-1, as ingestion takes `durationMs`. */
function duration (s: string): number | null {
  return DURATION.test(s) && Number(s) <= Number.MAX_SAFE_INTEGER ? Number(s) : null
}

/** What is wrong with a `meta.<path>` filter's value, or null. */
export function metaValueProblem (value: string): string | null {
  return characters(value) <= MAX_META_VALUE ? textProblem(value) : `must be at most ${MAX_META_VALUE} characters`
}

/** What is wrong with a metadata path (dot-separated keys), or null. */
export function metaPathProblem (path: string): string | null {
  if (lengthProblem(path, MAX_META_PATH)) return `must be 1 to ${MAX_META_PATH} characters`
  if (path.split('.').some((k) => k === '')) return 'must be keys joined by single dots (no empty key)'
  return textProblem(path)
}

const NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/

/** A finite number written as a decimal (exponent allowed), or null. */
function numberOf (s: string): number | null {
  if (!NUMBER.test(s)) return null
  const n = Number(s)
  return Number.isFinite(n) ? n : null
}

/**
 * The numeric range a score filter's value reads as: `0.8..1` (both inclusive), `0.8..` (at least),
 * `..0.2` (at most), or a number alone (exactly it); null when it reads as none (a label only).
 */
export function scoreRange (s: string): ScoreRange | null {
  const dots = s.indexOf('..')
  if (dots === -1) {
    const n = numberOf(s)
    return n === null ? null : { min: n, max: n }
  }
  const lo = s.slice(0, dots)
  const hi = s.slice(dots + 2)
  if (lo === '' && hi === '') return null
  const min = lo === '' ? undefined : numberOf(lo)
  const max = hi === '' ? undefined : numberOf(hi)
  if (min === null || max === null) return null
  return { min, max }
}

/** Text a number's digits, sign, point and exponent could make: an end of a range meant as one. */
const NUMBER_LIKE = /^[-+]?[\d.]*(?:[eE][-+]?[\d.]*)?$/

/**
 * A range whose low end is above its high end, or a value written as a number or a range that reads
 * as neither (`..1e999`, `1..2..3`): it would be compared as a label and match nothing, unsaid.
 */
function rangeProblem (s: string): string | null {
  const r = scoreRange(s)
  if (r === null) {
    const dots = s.indexOf('..')
    // Dots alone (`..`) are a label: no digit says a number was meant.
    const meant = /\d/.test(s) && (dots === -1 ? NUMBER.test(s) : NUMBER_LIKE.test(s.slice(0, dots)) && NUMBER_LIKE.test(s.slice(dots + 2)))
    return meant ? 'must be a number or a range of finite decimal numbers (`0.8..1`, `0.8..`, `..0.2`), or a label' : null
  }
  return r.min !== undefined && r.max !== undefined && r.min > r.max ? 'the range\'s low end must not be above its high end' : null
}

/** '007.50' → '7.5': the same number as the shortest text (equal bounds compare equal). */
function normaliseDecimal (s: string): string {
  const [whole = '0', fraction = ''] = s.split('.')
  const w = whole.replace(/^0+(?=\d)/, '')
  const f = fraction.replace(/0+$/, '')
  return f ? `${w}.${f}` : w
}

/** Compares two non-negative decimal texts exactly. */
export function compareDecimals (a: string, b: string): number {
  const nanos = (s: string) => {
    const [whole = '0', fraction = ''] = s.split('.')
    return BigInt(whole) * 1_000_000_000n + BigInt((fraction + '000000000').slice(0, 9))
  }
  const d = nanos(a) - nanos(b)
  return d > 0n ? 1 : d < 0n ? -1 : 0
}
