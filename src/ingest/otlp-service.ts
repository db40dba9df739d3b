import { decodeTraces, OtlpDecodeError, type OtlpEncoding } from '../domain/otlp-codec.ts'
import { inheritWithinExport, spanToEvent } from '../domain/otlp-mapping.ts'
import { spanEvaluations } from '../domain/otlp-scores.ts'
import type { IncomingScore } from '../domain/score-row.ts'
import type { ScoreIngestionService } from './score-ingestion.ts'
import type { IncomingEvent } from '../domain/event-row.ts'
import { HttpError } from '../http-error.ts'
import type { IngestCaller, IngestionService } from './ingestion-service.ts'
import type { SpanMemory } from './span-memory.ts'
import { boundAgentOf } from './steps/ingest-run.ts'

/** What an export request that was not refused as a whole answers: how many spans were refused, and why. */
export interface ExportOutcome {
  acceptedSpans: number
  rejectedSpans: number
  /** Empty when every span was accepted. */
  errorMessage: string
}

/**
 * OTLP/HTTP trace export (POST /v1/traces): decode the body, map each span to an event, and run
 * those through the ingestion pipeline like a batch (burst limit per span, owner-scoped agent
 * resolution, the ingest log). A request none of whose spans is accepted answers the refusal they
 * share (429 with Retry-After when any was over the burst limit), so retryable refusals are retried
 * by the exporter; otherwise refused spans are reported in partial_success (which exporters do not retry),
 * as they are when the request's other spans were accepted by an earlier send of it.
 * A span is stored once whichever instance takes it and however often it is re-sent within the
 * window (see SpanMemory).
 */
export class OtlpService {
  constructor (private readonly ingestion: IngestionService, private readonly spans: SpanMemory, private readonly scores?: Pick<ScoreIngestionService, 'ingestEvaluations' | 'contentRefusals'>) {}

  /**
   * Builds the request's events from its spans, claims them (spans accepted before, by any
   * instance, are answered as accepted and not stored again), runs the steps over the rest, and
   * answers; the claim is settled with what became of each span.
   */
  async export (caller: IngestCaller, body: Buffer, encoding: OtlpEncoding): Promise<ExportOutcome> {
    const { events, refusals, evaluations } = this.ingestion.pipeline.build('decode', () => decodeSpans(body, encoding, caller.agentId !== null), (r) => r.events.length + r.refusals.length)
    const bound = boundAgentOf(caller)
    const claim = await this.spans.claim(bound !== null ? `${caller.userId}:ag:${bound}` : caller.userId, events)
    let accepted = 0
    const scoreRefusals: HttpError[] = []
    let scoresSent = 0
    if (claim.fresh.length > 0) {
      const outcomes = await this.ingestion.ingestSpans(caller, claim.fresh).catch(async (err: unknown) => {
        await this.spans.settle(claim, null)
        throw err
      })
      await this.spans.settle(claim, outcomes.map((o) => o.kind === 'accepted'))
      for (const outcome of outcomes) {
        if (outcome.kind === 'accepted') accepted++
        else refusals.push(outcome.error)
      }
      // The evaluation results of the spans just stored (those of a re-sent span were stored with it).
      const scores = claim.fresh.flatMap((event, i) => (outcomes[i]!.kind === 'accepted' ? evaluations.get(event) ?? [] : []))
      if (scores.length > 0 && this.scores) {
        scoresSent += scores.length
        for (const outcome of await this.scores.ingestEvaluations(caller, scores)) {
          if (outcome.kind !== 'accepted') scoreRefusals.push(outcome.error)
        }
      }
    }
    if (claim.repeated > 0 && evaluations.size > 0 && this.scores) {
      // A re-sent span's results were stored with it: those refused for what they say are told again,
      // as the first send told them (those refused for the moment, a rate limit, are not retried).
      const fresh = new Set(claim.fresh)
      const stored = [...evaluations].flatMap(([event, scores]) => (fresh.has(event) ? [] : scores))
      scoresSent += stored.length
      if (stored.length > 0) scoreRefusals.push(...await this.scores.contentRefusals(caller, stored))
    }
    if (accepted === 0 && refusals.length > 0) {
      const refusal = shared(refusals)
      // A re-send whose other spans were accepted before is answered as its first send was (those
      // spans accepted, the rest in partial_success), unless the refusal is one exporters retry.
      if (claim.repeated === 0 || RETRIED.has(refusal.statusCode)) throw refusal
    }
    const total = claim.repeated + accepted + refusals.length
    const message = [summary(refusals, total), summary(scoreRefusals, scoresSent, 'evaluation results')].filter(Boolean).join('; ')
    return { acceptedSpans: claim.repeated + accepted, rejectedSpans: refusals.length, errorMessage: message }
  }
}

/** The statuses OTLP exporters retry a request on (OTLP/HTTP specification: 429, 502, 503, 504). */
const RETRIED = new Set([429, 502, 503, 504])

/**
 * The `decode` step: the body decoded, and each span mapped to an event or refused, with the scores
 * of its evaluation results (src/domain/otlp-scores.ts). A body that cannot be decoded is refused whole (400).
 */
function decodeSpans (body: Buffer, encoding: OtlpEncoding, bound: boolean): { events: IncomingEvent[]; refusals: HttpError[]; evaluations: Map<IncomingEvent, IncomingScore[]> } {
  let spans
  try {
    spans = decodeTraces(body, encoding)
  } catch (err) {
    if (err instanceof OtlpDecodeError) throw new HttpError(400, 'bad_request', { message: err.message })
    throw err
  }
  const events: IncomingEvent[] = []
  const refusals: HttpError[] = []
  const evaluations = new Map<IncomingEvent, IncomingScore[]>()
  const all = spans.map((span) => spanToEvent(span))
  const unnamed = inheritWithinExport(spans, all)
  // A key bound to an agent sends for it every span that names no agent (the resolve step's rule for
  // an event without agentId), rather than for its service, which the key could not send for.
  if (bound) for (const i of unnamed) delete (all[i] as IncomingEvent).agentId
  spans.forEach((span, i) => {
    const mapped = all[i]!
    if (typeof mapped === 'string') refusals.push(new HttpError(400, 'invalid_span', { message: mapped }))
    else {
      events.push(mapped)
      const scores = spanEvaluations(span, mapped.agentId, mapped.metadata?.privacyLevel !== 'minimal')
      if (scores.length > 0) evaluations.set(mapped, scores)
    }
  })
  return { events, refusals, evaluations }
}

/** The one refusal answering a request none of whose spans was accepted. */
function shared (refusals: HttpError[]): HttpError {
  const limited = refusals.filter((r) => r.statusCode === 429)
  if (limited.length > 0) return limited.reduce((a, b) => (Number(b.headers['retry-after']) > Number(a.headers['retry-after']) ? b : a))
  const status = refusals[0]!.statusCode
  if (refusals.every((r) => r.statusCode === status)) {
    const first = refusals[0]!
    return refusals.length === 1 ? first : new HttpError(first.statusCode, first.code, { ...first.extra, message: summary(refusals, refusals.length) }, first.headers)
  }
  return new HttpError(400, 'bad_request', { message: summary(refusals, refusals.length) })
}

/** How many kinds of refusal a summary tells; the rest are counted. */
const KINDS_TOLD = 5

/**
 * "3 of 512 spans refused: 2 rate_limited (retry after 4 s); 1 invalid_span (span has no valid trace
 * id …)". Refusals are told by kind: their code and what they say (two invalid spans for different
 * reasons are two kinds); of refusals of one kind the one with the longest Retry-After is told: the
 * wait until all of them fit, as a batch's Retry-After says. The five largest kinds are told.
 */
function summary (refusals: HttpError[], total: number, what = 'spans'): string {
  if (refusals.length === 0) return ''
  const groups = new Map<string, { n: number; sample: HttpError }>()
  const wait = (r: HttpError) => Number(r.headers['retry-after'] ?? 0)
  for (const r of refusals) {
    const key = `${r.code}:${said(r) ?? ''}`
    const g = groups.get(key)
    if (!g) groups.set(key, { n: 1, sample: r })
    else {
      g.n++
      if (wait(r) > wait(g.sample)) g.sample = r
    }
  }
  const kinds = [...groups.values()].sort((a, b) => b.n - a.n)
  const parts = kinds.slice(0, KINDS_TOLD).map(({ n, sample }) => `${n} ${sample.code}${describe(sample)}`)
  const untold = kinds.slice(KINDS_TOLD).reduce((sum, k) => sum + k.n, 0)
  if (untold > 0) parts.push(`${untold} more of ${kinds.length - KINDS_TOLD} other kinds`)
  return `${refusals.length} of ${total} ${what} refused: ${parts.join('; ')}`
}

/** What a refusal says: its reason, else its message, else its first detail. */
function said (e: HttpError): string | undefined {
  const details = e.extra.details as { path: (string | number)[]; message: string }[] | undefined
  return (e.extra.reason ?? e.extra.message ?? (details?.[0] ? `${details[0].path.join('.')} ${details[0].message}` : undefined)) as string | undefined
}

function describe (e: HttpError): string {
  const retry = e.headers['retry-after'] ? `retry after ${e.headers['retry-after']} s` : undefined
  const text = [said(e), retry].filter(Boolean).join(', ')
  return text ? ` (${text})` : ''
}
