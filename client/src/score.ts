import { newIdempotencyKey } from './ids.js'
import { applyPrivacy, scrubText, type PrivacyLevel } from './privacy.js'
import type { Problem } from './validate.js'

/**
 * One score, as the service's schema (schemas/score.ts) describes it: of exactly one of a trace
 * (optionally one of its spans), a session or an event; with exactly one of `value`, `label`, `boolean`.
 */
/** What every score carries, whatever it scores and however it says it. */
export interface ScoreFields {
  /** Your id of the score; sending it again replaces the score. `score()` makes one when absent. */
  scoreId?: string
  /** The agent scored; the client's `agentId` when absent. */
  agentId?: string
  /** What is scored (`helpfulness`, `thumbs`): the service's rule for names (docs/client.md). */
  name: string
  /** Why; up to 4,000 characters. Scrubbed at `standard`, not sent at `minimal`. */
  comment?: string
  /** Who scored: `code` (the client's default), `api`, `human`, `llm`. */
  source?: 'api' | 'human' | 'llm' | 'code'
  metadata?: Record<string, unknown>
}

/** What a score is of: exactly one of a trace (optionally one of its spans), a session or an event. */
export type ScoreTarget =
  | { traceId: string; /** A span of `traceId`. */ spanId?: string; sessionId?: never; eventId?: never }
  | { sessionId: string; traceId?: never; spanId?: never; eventId?: never }
  | { /** An event id (`evt_…`) as the service acknowledged it. */ eventId: string; traceId?: never; spanId?: never; sessionId?: never }

/** What a score says: exactly one of a number, a label or a boolean. */
export type ScoreValue =
  | { value: number; label?: never; boolean?: never }
  | { label: string; value?: never; boolean?: never }
  | { boolean: boolean; value?: never; label?: never }

/** A score as `score()` takes it; the types say what the checks at the call say (one target, one value). */
export type TelemetryScore = ScoreFields & ScoreTarget & ScoreValue

export const SCORE_SOURCES = ['api', 'human', 'llm', 'code'] as const
/** The source of a score that names none. */
export const DEFAULT_SCORE_SOURCE = 'code'

const FIELDS = new Set(['scoreId', 'traceId', 'spanId', 'sessionId', 'eventId', 'agentId', 'name', 'value', 'label', 'boolean', 'comment', 'source', 'metadata'])
const TARGETS = ['traceId', 'sessionId', 'eventId'] as const
const VALUES = ['value', 'label', 'boolean'] as const

function text (s: Record<string, unknown>, key: string, max: number, problems: Problem[], pattern?: RegExp, what = ''): void {
  const v = s[key]
  if (v === undefined) return
  if (typeof v !== 'string') problems.push({ path: [key], message: 'must be string' })
  else if (v.length < 1 || v.length > max) problems.push({ path: [key], message: `must be 1-${max} characters` })
  else if (pattern && !pattern.test(v)) problems.push({ path: [key], message: `must be ${what}` })
}

/**
 * The service's rule for a score's name: 1-200 characters (code points), composed (NFC), no control,
 * format (zero-width, bidi) or other invisible characters (Default_Ignorable, the blank Braille
 * pattern), no whitespace at either end, so that no name passes for another.
 */
const DISTINCT = /^[^\p{Cc}\p{Cf}\p{DI}\u2800\s](?:[^\p{Cc}\p{Cf}\p{DI}\u2800]*[^\p{Cc}\p{Cf}\p{DI}\u2800\s])?$/u
const DISTINCT_RULE = 'must be 1 to 200 characters in composed Unicode form (NFC), without control or invisible characters (zero-width, bidi, fillers, variation selectors) and without whitespace at the start or end'

function distinctText (s: Record<string, unknown>, key: string, problems: Problem[]): void {
  const v = s[key]
  if (v === undefined) return
  if (typeof v !== 'string') problems.push({ path: [key], message: 'must be string' })
  else if ([...v].length > 200 || !DISTINCT.test(v) || v.normalize('NFC') !== v) problems.push({ path: [key], message: DISTINCT_RULE })
}

/**
 * Checks a score (the client's plain JSON copy) as the service would and completes it in place:
 * `agentId`, `source` and `scoreId` filled where absent, `comment` and `metadata` as the privacy
 * level lets them leave. Returns the problems; none means the score may be queued.
 */
export function checkScore (s: Record<string, unknown>, agentId: string | undefined, level: PrivacyLevel, counters: { redactions: number }): Problem[] {
  const problems: Problem[] = []
  if (s === null || typeof s !== 'object' || Array.isArray(s)) return [{ path: [], message: 'must be object' }]
  for (const key of Object.keys(s)) if (!FIELDS.has(key)) problems.push({ path: [key], message: 'is not a field of a score' })
  if (s.name === undefined) problems.push({ path: ['name'], message: 'is required' })
  distinctText(s, 'name', problems)
  const targets = TARGETS.filter((k) => s[k] !== undefined)
  if (targets.length !== 1) problems.push({ path: targets.length ? [targets[1]!] : ['traceId'], message: 'exactly one of traceId, sessionId, eventId is required' })
  for (const k of [...TARGETS, 'spanId']) text(s, k, 200, problems)
  if (s.spanId !== undefined && s.traceId === undefined) problems.push({ path: ['spanId'], message: 'needs traceId' })
  const values = VALUES.filter((k) => s[k] !== undefined)
  if (values.length !== 1) problems.push({ path: values.length ? [values[1]!] : ['value'], message: 'exactly one of value, label, boolean is required' })
  if (s.value !== undefined && (typeof s.value !== 'number' || !Number.isFinite(s.value))) problems.push({ path: ['value'], message: 'must be a finite number' })
  text(s, 'label', 200, problems)
  if (s.boolean !== undefined && typeof s.boolean !== 'boolean') problems.push({ path: ['boolean'], message: 'must be boolean' })
  text(s, 'scoreId', 200, problems, /^[\x21-\x7E]+$/, 'printable ASCII without spaces')
  text(s, 'agentId', 120, problems)
  if (s.source !== undefined && !(SCORE_SOURCES as readonly unknown[]).includes(s.source)) problems.push({ path: ['source'], message: `must be one of ${SCORE_SOURCES.join(', ')}` })
  if (s.metadata !== undefined && (s.metadata === null || typeof s.metadata !== 'object' || Array.isArray(s.metadata))) problems.push({ path: ['metadata'], message: 'must be object' })
  if (s.comment !== undefined && typeof s.comment !== 'string') problems.push({ path: ['comment'], message: 'must be string' })
  if (problems.length > 0) return problems

  if (s.agentId === undefined && agentId !== undefined) s.agentId = agentId
  if (s.source === undefined) s.source = DEFAULT_SCORE_SOURCE
  // A fresh id now, not at the service: a batch sent twice (a retry after its key expired, a
  // process that re-sends) then replaces its scores instead of adding them again.
  if (s.scoreId === undefined) s.scoreId = `sc-${newIdempotencyKey()}`
  if (level === 'minimal') {
    delete s.comment
  } else if (level === 'standard' && typeof s.comment === 'string') {
    const count = { n: 0 }
    s.comment = scrubText(s.comment, count)
    counters.redactions += count.n
  }
  if (s.metadata !== undefined) counters.redactions += applyPrivacy({ metadata: s.metadata }, level)
  if (typeof s.comment === 'string' && s.comment.length > 4000) problems.push({ path: ['comment'], message: 'must be at most 4000 characters' })
  return problems
}
