import type { OtlpSpan } from './otlp-codec.ts'
import { SCORE_COMMENT_MAX, SCORE_LABEL_MAX } from '../../schemas/score.ts'
import type { IncomingScore } from './score-row.ts'

/** The span event the OpenTelemetry GenAI conventions carry an evaluation's result in. */
export const EVALUATION_EVENT = 'gen_ai.evaluation.result'

/**
 * The evaluation results a span carries (`gen_ai.evaluation.result` events) as scores of that span,
 * for the agent its event was mapped to. Each gets a score id made of the span and the event's place
 * among them (`otel:<trace>:<span>:<n>`), so a span re-sent by an exporter writes the same scores
 * again instead of new ones. `gen_ai.evaluation.score.value` is the score's value when it is a number;
 * else `gen_ai.evaluation.score.label` is its label (a label sent beside a value is kept in its
 * metadata); `gen_ai.evaluation.explanation` is its comment. An event without a name, or with neither
 * a value nor a label, is skipped. Their source is `api`: the conventions do not say what evaluated.
 * Without `withContent` (a span at `minimal`) the explanation is left out: it may quote the content
 * the level keeps out.
 */
export function spanEvaluations (span: OtlpSpan, agentId: string | undefined, withContent = true): IncomingScore[] {
  const scores: IncomingScore[] = []
  let n = 0
  for (const e of span.events) {
    if (e.name !== EVALUATION_EVENT) continue
    const at = n++
    const a = e.attributes
    // The name as sent: one the score rule refuses is refused (and told), never changed into another.
    const name = a['gen_ai.evaluation.name']
    const value = numberOf(a['gen_ai.evaluation.score.value'])
    const label = text(a['gen_ai.evaluation.score.label'], SCORE_LABEL_MAX)
    if (typeof name !== 'string' || name === '' || (value === undefined && !label)) continue
    const score: IncomingScore = {
      scoreId: `otel:${span.traceId}:${span.spanId}:${at}`,
      traceId: span.traceId,
      spanId: span.spanId,
      name,
      source: 'api',
    }
    if (agentId !== undefined) score.agentId = agentId
    if (value !== undefined) {
      score.value = value
      if (label) score.metadata = { label }
    } else score.label = label!
    const explanation = withContent ? text(a['gen_ai.evaluation.explanation'], SCORE_COMMENT_MAX, false) : undefined
    if (explanation) score.comment = explanation
    const responseId = text(a['gen_ai.response.id'], 200)
    if (responseId) score.metadata = { ...score.metadata, responseId }
    scores.push(score)
  }
  return scores
}

/** A non-empty string attribute, cut to `max`; control characters as spaces when `plain`. */
function text (v: unknown, max: number, plain = true): string | undefined {
  if (typeof v !== 'string') return undefined
  // eslint-disable-next-line no-control-regex -- a label or id shown on one line
  const s = (plain ? v.replace(/[\u0000-\u001F\u007F]/g, ' ') : v).trim()
  return s === '' ? undefined : s.slice(0, max)
}

// A decimal number as text (`0.5`, `-3`, `1e-3`): not hex, binary or octal (`0x10`), which Number()
// would also read, nor `Infinity`.
const DECIMAL = /^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$/

function numberOf (v: unknown): number | undefined {
  const n = typeof v === 'number' ? v : typeof v === 'string' && DECIMAL.test(v) ? Number(v) : NaN
  return Number.isFinite(n) ? n : undefined
}
