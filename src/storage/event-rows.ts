import { privacyChip } from '../domain/privacy.ts'
import { MAX_SPAN_MS } from '../domain/dashboard.ts'
import { tokenTotals } from '../domain/dashboard-figures.ts'
import type { DashboardEvent, TokenTotals } from '../domain/dashboard-event.ts'
import { isoFromMs as iso } from './timestamps.ts'

/**
 * How a row of `events` is read back as the API's event: the columns every event read selects, and
 * their decoding. Shared by the plain lists and details (dashboard-repository.ts) and the searches
 * (search-repository.ts), so an event reads the same whichever path found it.
 */
export const EVENT_COLUMNS = `event_id, agent_id, toUnixTimestamp64Milli(ts) AS ts_ms, toUnixTimestamp64Milli(received_at) AS received_ms,
  type, outcome, model, tool_executed, tools_considered, duration_ms, input, reasoning, transaction, amount_token, amount_value,
  error_message, metadata, session_id, trace_id, privacy_level, tokens_input_base, tokens_cache_creation, tokens_cache_read,
  tokens_output, toString(cost_usd) AS cost, cost_status, error_fingerprint, content_hash, span_id, parent_span_id`

/** When a span ends: its start plus its duration (capped, so the sum stays a valid instant). */
export const SPAN_END = `ts + toIntervalMillisecond(least(ifNull(duration_ms, 0), ${MAX_SPAN_MS}))`

/** The four token counts summed, as `tokensOf` reads them by default. */
export const TOKEN_SUMS = 'sum(tokens_input_base) AS t_in, sum(tokens_cache_creation) AS t_cw, sum(tokens_cache_read) AS t_cr, sum(tokens_output) AS t_out'

/**
 * The time of the reader's (`{u:String}`) newest event from `{since:Int64}` up to `top` (an SQL
 * instant) under the conditions `also`, as a scalar subquery: one granule of `events_feed` (or of
 * `events`, for one agent). A page's first window starts from it, so that a user whose last hours
 * hold no event is not looked for in an empty hour first.
 */
export function newestEventUpTo (top: string, also = ''): string {
  return `(SELECT ts FROM events WHERE user_id = {u:String} AND ts >= fromUnixTimestamp64Milli({since:Int64}) AND ts <= ${top} ${also}
    ORDER BY ts DESC LIMIT 1)`
}

export const orNull = (s: string) => (s === '' ? null : s)
const parseJson = (s: string) => (s === '' ? null : JSON.parse(s))

/** Token totals from a row's four counts, read under `names` (the sums `t_in`, `t_cw`, `t_cr`, `t_out` by default). */
export function tokensOf (r: Record<string, any>, names = ['t_in', 't_cw', 't_cr', 't_out']): TokenTotals {
  const [a, b, c, d] = names.map((n) => Number(r[n] ?? 0)) as [number, number, number, number]
  return tokenTotals(a, b, c, d)
}

/** The API's event of a row selected with EVENT_COLUMNS. */
export function toEvent (r: Record<string, any>): DashboardEvent {
  return {
    eventId: r.event_id,
    agentId: r.agent_id,
    timestamp: iso(r.ts_ms),
    receivedAt: iso(r.received_ms),
    type: r.type,
    outcome: orNull(r.outcome) as DashboardEvent['outcome'],
    model: orNull(r.model),
    toolExecuted: orNull(r.tool_executed),
    toolsConsidered: r.tools_considered,
    durationMs: r.duration_ms === null ? null : Number(r.duration_ms),
    input: parseJson(r.input),
    reasoning: orNull(r.reasoning),
    transaction: r.transaction,
    amount: r.amount_token === '' ? null : { token: r.amount_token, value: Number(r.amount_value) },
    errorMessage: orNull(r.error_message),
    metadata: parseJson(r.metadata),
    sessionId: orNull(r.session_id),
    traceId: orNull(r.trace_id),
    spanId: orNull(r.span_id),
    parentSpanId: orNull(r.parent_span_id),
    privacyLevel: orNull(r.privacy_level) as DashboardEvent['privacyLevel'],
    privacyChip: privacyChip(r.privacy_level),
    tokens: tokensOf(r, ['tokens_input_base', 'tokens_cache_creation', 'tokens_cache_read', 'tokens_output']),
    costUsd: Number(r.cost),
    costStatus: r.cost_status,
    errorFingerprint: orNull(r.error_fingerprint),
    contentHash: r.content_hash,
  }
}
