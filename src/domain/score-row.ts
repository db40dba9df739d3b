import { monotonicFactory } from 'ulid'
import type { ErrorDetail } from '../validation.ts'
import { scoreName } from '../../schemas/score.ts'
import { PATTERN_MESSAGE } from '../../schemas/common.ts'

// The row format of the scores table (clickhouse/019_scores.sql): what the score pipeline builds,
// the ingest log keeps beside event rows, and the shipper inserts into `scores`. Pure.

export type ScoreSource = 'api' | 'human' | 'llm' | 'code'
export type ScoreDataType = 'numeric' | 'categorical' | 'boolean'

/** A score as sent (schemas/score.ts), once its schema is checked. */
export interface IncomingScore {
  scoreId?: string
  traceId?: string
  spanId?: string
  sessionId?: string
  eventId?: string
  agentId?: string
  name: string
  value?: number
  label?: string
  boolean?: boolean
  comment?: string
  source?: ScoreSource
  metadata?: Record<string, unknown>
}

export interface ScoreRow {
  /** `scr_` + ULID: this write of the score. Always first: the ingest log tells a score row by it. */
  row_id: string
  user_id: string
  score_id: string
  /** Orders the writes of one score id: the highest is the score (ReplacingMergeTree's version). */
  version: number
  agent_id: string
  trace_id: string
  span_id: string
  session_id: string
  event_id: string
  name: string
  data_type: ScoreDataType
  value: number | null
  label: string
  comment: string
  source: ScoreSource
  author_id: string
  metadata: Record<string, unknown> | ''
  received_at: number
}

/** The columns an insert names, in the order each row's values are sent. */
export const SCORE_INSERT_COLUMNS = [
  'row_id', 'user_id', 'score_id', 'version', 'agent_id', 'trace_id', 'span_id', 'session_id', 'event_id',
  'name', 'data_type', 'value', 'label', 'comment', 'source', 'author_id', 'metadata', 'received_at',
] as const satisfies readonly (keyof ScoreRow)[]

const everyColumnSent: Exclude<keyof ScoreRow, (typeof SCORE_INSERT_COLUMNS)[number]> extends never ? true : never = true
void everyColumnSent

/**
 * How a score row's line starts in the ingest log: `["scr_`. An event row's line starts `["evt_`
 * (its event id), so the shipper tells the two apart by a line's first bytes.
 */
export const SCORE_LINE_START = '["scr_'

/** A score row as one JSONCompactEachRow line (values in SCORE_INSERT_COLUMNS order). */
export function scoreLine (r: ScoreRow): string {
  return JSON.stringify([
    r.row_id, r.user_id, r.score_id, r.version, r.agent_id, r.trace_id, r.span_id, r.session_id, r.event_id,
    r.name, r.data_type, r.value, r.label, r.comment, r.source, r.author_id, r.metadata, r.received_at,
  ])
}

const ulid = monotonicFactory()
/** A new id of a score write: `scr_` + a ULID. */
export function newScoreRowId (now = Date.now()): string {
  return 'scr_' + ulid(now)
}

let lastVersion = 0
/**
 * The version of a write received at `receivedAt`: later writes have higher versions; writes of one
 * thread in the same millisecond (the items of one batch with the same scoreId) in the order made,
 * however many (a counter that wrapped at 1,000 gave the last items of a 500-score batch lower
 * versions than the first: the later write lost). A thousand writes a millisecond and more borrow
 * from the next millisecond.
 */
export function scoreVersion (receivedAt: number): number {
  lastVersion = Math.max(receivedAt * 1000, lastVersion + 1)
  return lastVersion
}

/** The data type a score's value says it is. */
export function dataTypeOf (score: Pick<IncomingScore, 'value' | 'label' | 'boolean'>): ScoreDataType {
  if (score.label !== undefined) return 'categorical'
  if (score.boolean !== undefined) return 'boolean'
  return 'numeric'
}

const SCORE_NAME_PATTERN = new RegExp(scoreName.pattern, 'u')

/**
 * What is wrong with a score name, said as a rule a user can follow (the words of the schema's pattern,
 * as a body's bad name is answered), or null: the schema's rule, lengths in characters (code points)
 * as it counts them.
 */
export function scoreNameProblem (name: string): string | null {
  const length = [...name].length
  if (length >= scoreName.minLength && length <= scoreName.maxLength && SCORE_NAME_PATTERN.test(name) && name === name.normalize('NFC')) return null
  return scoreName[PATTERN_MESSAGE]
}

/**
 * The rules the schema cannot say clearly: exactly one of traceId, sessionId and eventId; spanId
 * only with traceId; exactly one of value, label and boolean; a finite value.
 */
export function scoreShapeProblems (score: IncomingScore): ErrorDetail[] {
  const problems: ErrorDetail[] = []
  const targets = (['traceId', 'sessionId', 'eventId'] as const).filter((k) => score[k] !== undefined)
  if (targets.length !== 1) problems.push({ path: targets.length === 0 ? ['traceId'] : [targets[1]!], message: 'exactly one of traceId, sessionId and eventId is required' })
  if (score.spanId !== undefined && score.traceId === undefined) problems.push({ path: ['spanId'], message: 'is allowed only with traceId' })
  const values = (['value', 'label', 'boolean'] as const).filter((k) => score[k] !== undefined)
  if (values.length !== 1) problems.push({ path: values.length === 0 ? ['value'] : [values[1]!], message: 'exactly one of value, label and boolean is required' })
  if (score.value !== undefined && !Number.isFinite(score.value)) problems.push({ path: ['value'], message: 'must be a finite number' })
  return problems
}

/** What a publishable key (a page's, public) may send at most: a comment's characters, the serialized metadata's bytes. */
export const PUBLISHABLE_COMMENT_MAX = 1000
export const PUBLISHABLE_METADATA_MAX_BYTES = 2048

/**
 * The longest scoreId a publishable key may send: stored as `pk:<key id>:<scoreId>` (a key id is a
 * cuid, 25 characters), it stays within the 200 characters its owner's writes may name.
 */
export const PUBLISHABLE_SCORE_ID_MAX = 200 - 'pk:'.length - 25 - ':'.length

/**
 * The longest scoreId a key bound to an agent may send: stored as `ag:<agent id>:<scoreId>` (an
 * agent's id is a cuid, 25 characters), within the 200 characters its owner's writes may name.
 */
export const BOUND_KEY_SCORE_ID_MAX = 200 - 'ag:'.length - 25 - ':'.length

/** The rule a score from a key bound to an agent must also keep: a scoreId that leaves room for its agent's prefix. */
export function boundKeyScoreProblems (score: IncomingScore): ErrorDetail[] {
  return score.scoreId !== undefined && score.scoreId.length > BOUND_KEY_SCORE_ID_MAX
    ? [{ path: ['scoreId'], message: `must have at most ${BOUND_KEY_SCORE_ID_MAX} characters with a key bound to an agent (it is stored as ag:<agent id>:<scoreId>, which the owner's writes take up to 200)` }]
    : []
}

/**
 * The rules a score from a publishable key must also keep (docs/api.md#publishable-keys): it names no
 * agent (it would create agents in the owner's account or pin feedback on any of them; the score is
 * of its target's agent), and its texts are short.
 */
export function publishableScoreProblems (score: IncomingScore): ErrorDetail[] {
  const problems: ErrorDetail[] = []
  if (score.scoreId !== undefined && score.scoreId.length > PUBLISHABLE_SCORE_ID_MAX) {
    problems.push({ path: ['scoreId'], message: `must have at most ${PUBLISHABLE_SCORE_ID_MAX} characters with a publishable key (it is stored as pk:<key id>:<scoreId>, which the owner's writes take up to 200)` })
  }
  if (score.agentId !== undefined) problems.push({ path: ['agentId'], message: 'is not allowed with a publishable key: the score is of the agent of its target' })
  if (score.comment !== undefined && score.comment.length > PUBLISHABLE_COMMENT_MAX && [...score.comment].length > PUBLISHABLE_COMMENT_MAX) {
    problems.push({ path: ['comment'], message: `must have at most ${PUBLISHABLE_COMMENT_MAX} characters with a publishable key` })
  }
  if (score.metadata !== undefined && Buffer.byteLength(JSON.stringify(score.metadata)) > PUBLISHABLE_METADATA_MAX_BYTES) {
    problems.push({ path: ['metadata'], message: `must be at most ${PUBLISHABLE_METADATA_MAX_BYTES} bytes as JSON with a publishable key` })
  }
  return problems
}

export interface ScoreRowContext {
  rowId: string
  userId: string
  agentId: string | null
  receivedAt: number
  /** The signed-in user who scored from the dashboard. */
  authorId?: string
}

/** The stored row of an accepted score. */
export function buildScoreRow (score: IncomingScore, ctx: ScoreRowContext): ScoreRow {
  const dataType = dataTypeOf(score)
  return {
    row_id: ctx.rowId,
    user_id: ctx.userId,
    score_id: score.scoreId ?? ctx.rowId,
    version: scoreVersion(ctx.receivedAt),
    agent_id: ctx.agentId ?? '',
    trace_id: score.traceId ?? '',
    span_id: score.spanId ?? '',
    session_id: score.sessionId ?? '',
    event_id: score.eventId ?? '',
    name: score.name,
    data_type: dataType,
    value: dataType === 'numeric' ? score.value! : dataType === 'boolean' ? (score.boolean ? 1 : 0) : null,
    label: dataType === 'categorical' ? score.label! : dataType === 'boolean' ? String(score.boolean) : '',
    comment: score.comment ?? '',
    source: score.source ?? 'api',
    author_id: ctx.authorId ?? '',
    metadata: score.metadata ?? '',
    received_at: ctx.receivedAt,
  }
}
