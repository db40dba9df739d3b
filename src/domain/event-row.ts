import { contentHash } from './canonical-json.ts'
import { errorFingerprint } from './fingerprint.ts'
import { costOf, type CostStatus, type UserPriceTable } from './pricing.ts'
import { parseIsoDateTime } from './date-time.ts'

/** An event as accepted by the event schema (schemas/event.ts) (validated before it gets here). */
export interface IncomingEvent {
  agentId?: string
  timestamp?: string | number
  type?: 'reasoning' | 'tool' | 'tx' | 'decision' | 'action' | 'error'
  input?: { prompt?: string; context?: Record<string, unknown> } & Record<string, unknown>
  reasoning?: string
  toolsConsidered?: string[]
  toolExecuted?: string
  transaction?: string | null
  amount?: { token: string; value: number }
  outcome?: 'pending' | 'success' | 'failed'
  durationMs?: number
  errorMessage?: string
  model?: string
  metadata?: Record<string, unknown> & {
    tokensBreakdown?: { inputBase?: number; cacheCreation?: number; cacheRead?: number; output?: number; reasoning?: number }
    traceId?: string
    spanId?: string
    parentSpanId?: string
    provider?: string
    sessionId?: string
    cwd?: string
    git?: unknown
    privacyLevel?: 'minimal' | 'standard' | 'full'
    tool?: string
  }
}

/** One row of the ClickHouse `events` table (column names as in clickhouse/001_events.sql). */
export interface EventRow {
  event_id: string
  user_id: string
  agent_id: string
  ts: number
  received_at: number
  type: string
  outcome: string
  model: string
  tool_executed: string
  tools_considered: string[]
  duration_ms: number | null
  /** The input object's JSON text, '' when not sent; or the object itself, written into the line as JSON (see JsonText). */
  input: JsonText
  reasoning: string
  transaction: string | null
  amount_token: string
  amount_value: number | null
  error_message: string
  error_fingerprint: string
  session_id: string
  trace_id: string
  privacy_level: string
  cwd: string
  git: string
  framework_tool: string
  tokens_input_base: number
  tokens_cache_creation: number
  tokens_cache_read: number
  tokens_output: number
  cost_usd: string
  cost_status: CostStatus
  /** The metadata object's JSON text, '' when not sent; or the object itself (see JsonText). */
  metadata: JsonText
  content_hash: string
  span_id: string
  parent_span_id: string
  provider: string
  tokens_reasoning: number
  source: EventSource
}

/**
 * A String column holding JSON text: the text, or the object (or array) it is the text of. Written
 * into a JSONCompactEachRow line, an object is stored by the engine as its text, byte for byte what
 * JSON.stringify gives (input_format_json_read_objects_as_strings): the row builder need not
 * serialise it once as text and again, escaped, as a string in the line. Never a scalar, which the
 * engine would store without its quotes or as ''.
 */
export type JsonText = string | Record<string, unknown> | unknown[]

/** How an event arrived: POST /v1/events (and /batch, the test event) or OTLP POST /v1/traces. */
export type EventSource = 'events' | 'otlp'

export interface RowContext {
  eventId: string
  userId: string
  agentId: string
  receivedAt: number
  /** Default 'events'. */
  source?: EventSource
  /** The prices the user set, which win over the catalogue; none when the user has set none. */
  prices?: UserPriceTable | undefined
}

/** The event's time in unix ms: its own timestamp when given, else the receive time. */
function eventTime (event: IncomingEvent, receivedAt: number): number {
  const t = event.timestamp
  if (t === undefined) return receivedAt
  return typeof t === 'number' ? t : parseIsoDateTime(t)
}

function jsonOrEmpty (value: unknown): string {
  return value === undefined ? '' : JSON.stringify(value)
}

/**
 * Builds the stored row of an accepted event: ids, times, every spec field, metadata keys lifted into
 * columns, token counts, cost (the user's price for the model, else the catalogue's), error
 * fingerprint and content hash.
 */
export function buildEventRow (event: IncomingEvent, ctx: RowContext): EventRow {
  const meta = event.metadata ?? {}
  const tb = meta.tokensBreakdown ?? {}
  const tokens = {
    inputBase: tb.inputBase ?? 0,
    cacheCreation: tb.cacheCreation ?? 0,
    cacheRead: tb.cacheRead ?? 0,
    output: tb.output ?? 0,
    reasoning: tb.reasoning ?? 0,
  }
  const type = event.type ?? 'decision'
  const ts = eventTime(event, ctx.receivedAt)
  const cost = costOf(event.model, tokens, { provider: meta.provider, at: ts, userPrices: ctx.prices })
  return {
    event_id: ctx.eventId,
    user_id: ctx.userId,
    agent_id: ctx.agentId,
    ts,
    received_at: ctx.receivedAt,
    type,
    outcome: event.outcome ?? '',
    model: event.model ?? '',
    tool_executed: event.toolExecuted ?? '',
    tools_considered: event.toolsConsidered ?? [],
    duration_ms: event.durationMs ?? null,
    input: event.input ?? '',
    reasoning: event.reasoning ?? '',
    transaction: event.transaction ?? null,
    amount_token: event.amount?.token ?? '',
    amount_value: event.amount?.value ?? null,
    error_message: event.errorMessage ?? '',
    error_fingerprint: errorFingerprint({
      type,
      outcome: event.outcome,
      errorMessage: event.errorMessage,
      agentId: ctx.agentId,
      tool: event.toolExecuted,
    }),
    session_id: meta.sessionId ?? '',
    trace_id: meta.traceId ?? '',
    privacy_level: meta.privacyLevel ?? '',
    cwd: meta.cwd ?? '',
    git: jsonOrEmpty(meta.git),
    framework_tool: meta.tool ?? '',
    tokens_input_base: tokens.inputBase,
    tokens_cache_creation: tokens.cacheCreation,
    tokens_cache_read: tokens.cacheRead,
    tokens_output: tokens.output,
    cost_usd: cost.usd,
    cost_status: cost.status,
    metadata: event.metadata ?? '',
    content_hash: contentHash(event),
    span_id: meta.spanId ?? '',
    parent_span_id: meta.parentSpanId ?? '',
    provider: meta.provider ?? '',
    tokens_reasoning: tokens.reasoning,
    source: ctx.source ?? 'events',
  }
}
