import { configMismatch, type ScoreConfig } from '../domain/score-config.ts'
import { boundKeyScoreProblems, buildScoreRow, newScoreRowId, publishableScoreProblems, scoreLine, scoreShapeProblems, type IncomingScore } from '../domain/score-row.ts'
import { HttpError, forbidden, invalidText, validationFailed } from '../http-error.ts'
import { bodyAjv, toDetails, type ErrorDetail } from '../validation.ts'
import { incomingScore } from '../../schemas/score.ts'
import { SharedCache, type SharedCacheOptions } from '../cache/shared-cache.ts'
import type { ScoreConfigsRepository } from '../storage/score-configs-repository.ts'
import type { ActivityRecorder } from './activity-recorder.ts'
import type { IngestLog } from './log/ingest-log.ts'
import { rowBytes } from './log/entry-codec.ts'
import { batchResult, longestRetryAfter, passAll, type BatchResult, type Outcome, type PipelineRunner, type Step, type Verdict } from './pipeline.ts'
import type { EventShipper } from './shipper.ts'
import { burstStep, type BurstLimiter } from './steps/burst.ts'
import { burstLimit } from '../domain/tiers.ts'
import { boundAgentOf, type IngestCaller, type IngestItem, type IngestRun, type RefusalOf } from './steps/ingest-run.ts'
import { resolveStep } from './steps/resolve.ts'
import type { AgentResolver } from '../cache/agent-resolver.ts'
import type { ReadYourWrites } from './read-your-writes.ts'

/** A score's body as sent, checked once by the `schema` step (the route compiles no validator for it). */
const validateScore = bodyAjv.compile(incomingScore)

/**
 * A publishable key's own budget (docs/api.md#publishable-keys): at most PUBLISHABLE_BATCH_MAX scores
 * a batch and PUBLISHABLE_SCORES_PER_MINUTE scores a minute per key, from a bucket of the key's that
 * never touches the user's scores bucket, so a page (or whoever copies its key) cannot starve the
 * owner's evaluators.
 */
export const PUBLISHABLE_BATCH_MAX = 20
export const PUBLISHABLE_SCORES_PER_MINUTE = 120

/** The burst bucket of a caller's scores: the key's own for a publishable key, else the user's scores bucket. */
function scoreBucketOf (caller: IngestCaller): string {
  return caller.publishable && caller.source.kind === 'api_key' ? `scores:pk:${caller.source.keyId}` : `scores:${caller.userId}`
}

/** The acknowledgement of an accepted score. */
export type ScoreAck = { id: string; accepted: true; scoreId: string }
export type ScoreBatchResult = BatchResult<ScoreAck>

/** What a score's item carries beyond an event's: the config it was checked against, who wrote it. */
type ScoreStep = Step<ScoreRun, IngestItem, ScoreAck>
interface ScoreRun extends IngestRun {
  /** The signed-in user who scores from the dashboard (`author_id`); none for API keys and OTLP. */
  authorId?: string
}

/** The score configs of each user, for ingestion: cached per user here and in Redis, dropped on every instance by a change. */
export class ScoreConfigResolver {
  private readonly cache: SharedCache<ScoreConfig[]>
  private readonly byName = new WeakMap<ScoreConfig[], Map<string, ScoreConfig>>()

  constructor (private readonly configs: Pick<ScoreConfigsRepository, 'list'>, cache: Omit<SharedCacheOptions, 'name'>) {
    this.cache = new SharedCache({ ...cache, name: 'score-configs' })
  }

  /** The user's configs by name, without waiting when this process holds them; else undefined (then `get`). */
  peek (userId: string): Map<string, ScoreConfig> | undefined {
    const held = this.cache.peek(userId, () => this.configs.list(userId))
    return held === undefined ? undefined : this.mapOf(held)
  }

  async get (userId: string): Promise<Map<string, ScoreConfig>> {
    return this.mapOf(await this.cache.get(userId, () => this.configs.list(userId)))
  }

  /** Forgets the user's configs on every instance (after a change). */
  forget (userId: string): Promise<boolean> {
    return this.cache.invalidate(userId)
  }

  private mapOf (list: ScoreConfig[] | null): Map<string, ScoreConfig> {
    if (!list) return new Map()
    let map = this.byName.get(list)
    if (!map) {
      map = new Map(list.map((c) => [c.name, c]))
      this.byName.set(list, map)
    }
    return map
  }
}

/** A score's refusal by its config: 400 `validation_failed`, reason `score_config_mismatch`, naming the field. */
export const configRefusal = (detail: ErrorDetail) =>
  new HttpError(400, 'validation_failed', { reason: 'score_config_mismatch', message: 'the score does not fit the score config of its name', details: [detail] })

const bodyInvalid = (details: ErrorDetail[]) => new HttpError(400, 'validation_failed', { message: 'the body is not valid', details })
const noRefusal: RefusalOf = () => null

/**
 * Why a score is refused for what it says, whenever it is sent (the score schema, the rules between
 * fields, a publishable key's limits), or null: the `schema` step's rules after the request's own.
 */
function scoreContentRefusal (score: unknown, caller: Pick<IngestCaller, 'publishable' | 'agentId' | 'source'>, invalid: (details: ErrorDetail[]) => HttpError): HttpError | null {
  if (!validateScore(score)) return invalid(toDetails(validateScore.errors))
  // An agent's name is kept in Postgres, which refuses NUL: refused here, as for events, so that
  // in a batch only this score is (the store's refusal would fail the whole request).
  if ((score as IncomingScore).agentId?.includes('\u0000')) return invalidText()
  const shape = scoreShapeProblems(score as IncomingScore)
  if (shape.length > 0) return invalid(shape)
  if (caller.publishable) {
    if ((score as IncomingScore).source !== 'human') return forbidden('publishable_key_human_scores_only')
    const limits = publishableScoreProblems(score as IncomingScore)
    if (limits.length > 0) return invalid(limits)
  } else if (boundAgentOf(caller) !== null) {
    const limits = boundKeyScoreProblems(score as IncomingScore)
    if (limits.length > 0) return invalid(limits)
  }
  return null
}

/** `schema` for scores: the input rules, the score schema, then the rules between fields. */
function scoreSchemaStep (): ScoreStep {
  return {
    name: 'schema',
    run: (run, items) => items.map((item): Verdict<ScoreAck> => {
      const refusal = run.refusalOf(item.index) ?? scoreContentRefusal(item.event, run.caller, run.invalid)
      return refusal !== null ? { kind: 'refused', error: refusal } : undefined
    }),
  }
}

/**
 * `resolve` for scores: the agent of a score that names one (or whose key is bound to one), by the
 * events' rules; a score that names none is of no agent and goes on.
 */
function scoreResolveStep (agents: Pick<AgentResolver, 'resolve' | 'peek'>): ScoreStep {
  const events = resolveStep({ agents })
  return {
    name: 'resolve',
    run: (run, items) => {
      const named = items.filter((item) => run.caller.agentId !== null || (item.event as IncomingScore).agentId !== undefined)
      if (named.length === 0) return passAll<ScoreAck>(items)
      const merge = (verdicts: Verdict<unknown>[]): Verdict<ScoreAck>[] => {
        const of = new Map(named.map((item, i) => [item, verdicts[i]]))
        return items.map((item) => of.get(item) as Verdict<ScoreAck>)
      }
      const verdicts = events.run(run, named)
      return verdicts instanceof Promise ? verdicts.then(merge) : merge(verdicts)
    },
  }
}

/** `configs`: each score against its name's config, if the user set one (looked up once per request). */
/** A score's refusal by the config of its name among the user's `byName`, or null when it fits or has none. */
function refusalByConfig (score: IncomingScore, byName: Map<string, ScoreConfig>): HttpError | null {
  const config = byName.get(score.name)
  const mismatch = config ? configMismatch(score, config) : null
  return mismatch ? configRefusal(mismatch) : null
}

function configsStep (configs: Pick<ScoreConfigResolver, 'peek' | 'get'>): ScoreStep {
  const check = (items: IngestItem[], byName: Map<string, ScoreConfig>) => items.map((item): Verdict<ScoreAck> => {
    if (byName.size === 0) return undefined
    const refusal = refusalByConfig(item.event as IncomingScore, byName)
    return refusal ? { kind: 'refused', error: refusal } : undefined
  })
  return {
    name: 'configs',
    run: (run, items) => {
      const held = configs.peek(run.caller.userId)
      if (held !== undefined) return check(items, held)
      return configs.get(run.caller.userId).then((byName) => check(items, byName))
    },
  }
}

/**
 * The id a score is stored under: as sent, except from a publishable key, whose ids are its own
 * (`pk:<key id>:<scoreId>`: a page can update the feedback it sent, never another score of the user),
 * and from a key bound to an agent, whose ids are its agent's (`ag:<agent id>:<scoreId>`: it updates
 * its agent's scores, never another agent's, which it may not write).
 */
function storedScoreId (caller: IngestCaller, score: IncomingScore): string | undefined {
  if (score.scoreId === undefined || caller.source.kind !== 'api_key') return score.scoreId
  if (caller.publishable) return `pk:${caller.source.keyId}:${score.scoreId}`
  const bound = boundAgentOf(caller)
  return bound !== null ? `ag:${bound}:${score.scoreId}` : score.scoreId
}

/** `row`: each score's row id and its ingest log line (scores are small: always on this thread). */
function scoreRowStep (): ScoreStep {
  return {
    name: 'row',
    run: (run, items) => {
      const lines = items.map((item) => {
        item.eventId = newScoreRowId(run.receivedAt)
        const score = item.event as IncomingScore
        const scoreId = storedScoreId(run.caller, score)
        const row = buildScoreRow(scoreId === score.scoreId ? score : { ...score, scoreId }, {
          rowId: item.eventId, userId: run.caller.userId, agentId: item.agent?.id ?? null, receivedAt: run.receivedAt, authorId: run.authorId,
        })
        return scoreLine(row)
      })
      run.rows = rowBytes(lines)
      return passAll<ScoreAck>(items)
    },
  }
}

/** `log`: as for events, the rows appended to the ingest log, synced, then acknowledged. */
function scoreLogStep (parts: { ingestLog: Pick<IngestLog, 'append'>; shipper: Pick<EventShipper, 'acknowledged'>; activity: Pick<ActivityRecorder, 'keyUsed'> }): ScoreStep {
  return {
    name: 'log',
    run: async (run, items) => {
      const last = await parts.ingestLog.append(run.rows!)
      parts.shipper.acknowledged(run.caller.userId, last)
      if (run.caller.source.kind === 'api_key') parts.activity.keyUsed(run.caller.source.keyId, Date.now())
      return items.map((item): Verdict<ScoreAck> => ({
        kind: 'accepted',
        ack: { id: item.eventId, accepted: true, scoreId: storedScoreId(run.caller, item.event as IncomingScore) ?? item.eventId },
      }))
    },
  }
}

export interface ScoreIngestionParts {
  agents: Pick<AgentResolver, 'resolve' | 'peek'>
  configs: Pick<ScoreConfigResolver, 'peek' | 'get'>
  ingestLog: Pick<IngestLog, 'append'>
  shipper: Pick<EventShipper, 'acknowledged'>
  limiter: BurstLimiter
  activity: Pick<ActivityRecorder, 'keyUsed'>
  pipeline: PipelineRunner
  /** The events' in-flight requests: a score counts as in flight for read-your-writes as an event does. */
  inFlight: Pick<ReadYourWrites, 'receive' | 'answered'>
}

/**
 * Scores through the ingestion pipeline (docs/ingest.md#scores): the same runner, the same ingest
 * log and shipper as events, with steps of their own: key (the route's hook) → schema → burst (a
 * bucket of its own) → resolve (only scores that name an agent) → configs → row → log. A score row
 * is a second kind of log line (`["scr_…`), which the shipper inserts into `scores`.
 */
export class ScoreIngestionService {
  private readonly steps: readonly ScoreStep[]

  constructor (private readonly parts: ScoreIngestionParts) {
    this.steps = [
      scoreSchemaStep(),
      burstStep<ScoreAck>({
        limiter: parts.limiter,
        bucketOf: scoreBucketOf,
        limitOf: (caller) => (caller.publishable ? PUBLISHABLE_SCORES_PER_MINUTE : burstLimit(caller)),
      }),
      scoreResolveStep(parts.agents),
      configsStep(parts.configs),
      scoreRowStep(),
      scoreLogStep(parts),
    ]
  }

  /** One score; resolves with its acknowledgement once it is in the ingest log, or throws its refusal. */
  async ingestOne (caller: IngestCaller, score: unknown, authorId?: string): Promise<ScoreAck> {
    const [outcome] = await this.ingest({ caller, source: 'events', invalid: bodyInvalid, refusalOf: noRefusal, authorId }, [score])
    if (outcome!.kind !== 'accepted') throw outcome!.error
    return outcome!.ack
  }

  /** Up to SCORE_BATCH_MAX scores (PUBLISHABLE_BATCH_MAX from a publishable key, else 400); each gets the result it would have got alone. */
  async ingestBatch (caller: IngestCaller, scores: unknown[], refusalOf: RefusalOf = noRefusal): Promise<{ results: ScoreBatchResult[]; retryAfter: string | null }> {
    if (caller.publishable && scores.length > PUBLISHABLE_BATCH_MAX) {
      throw validationFailed([{ path: ['scores'], message: `must have at most ${PUBLISHABLE_BATCH_MAX} items with a publishable key` }])
    }
    const outcomes = await this.ingest({ caller, source: 'events', invalid: bodyInvalid, refusalOf }, scores)
    return { results: outcomes.map(batchResult), retryAfter: longestRetryAfter(outcomes) }
  }

  /**
   * The refusals scores would get for what they say, storing nothing: the schema's rules and the
   * user's score configs as they are now. A re-sent OTLP export tells these again for the results
   * of spans stored before.
   */
  async contentRefusals (caller: IngestCaller, scores: IncomingScore[]): Promise<HttpError[]> {
    const refusals: HttpError[] = []
    const passed: IncomingScore[] = []
    for (const score of scores) {
      const refusal = scoreContentRefusal(score, caller, validationFailed)
      if (refusal !== null) refusals.push(refusal)
      else passed.push(score)
    }
    if (passed.length === 0) return refusals
    const byName = this.parts.configs.peek(caller.userId) ?? await this.parts.configs.get(caller.userId)
    for (const score of passed) {
      const refusal = refusalByConfig(score, byName)
      if (refusal) refusals.push(refusal)
    }
    return refusals
  }

  /** Scores from OTLP evaluation events, as a batch of any size: each gets its outcome. */
  ingestEvaluations (caller: IngestCaller, scores: IncomingScore[]): Promise<Outcome<ScoreAck>[]> {
    return this.ingest({ caller, source: 'otlp', invalid: validationFailed, refusalOf: noRefusal }, scores)
  }

  private async ingest (request: Omit<ScoreRun, 'receivedAt' | 'rows' | 'prices'>, scores: unknown[]): Promise<Outcome<ScoreAck>[]> {
    const receivedAt = this.parts.inFlight.receive()
    try {
      const items = scores.map((event, index): IngestItem => ({ index, event, agent: null, eventId: '' }))
      // Spelled out, not spread, as in IngestionService: one shape for every run.
      const run: ScoreRun = {
        caller: request.caller,
        source: request.source,
        invalid: request.invalid,
        refusalOf: request.refusalOf,
        parsedFrom: request.parsedFrom,
        authorId: request.authorId,
        receivedAt,
        rows: null,
        prices: null,
      }
      return await this.parts.pipeline.run(this.steps, run, items)
    } finally {
      this.parts.inFlight.answered(receivedAt)
    }
  }
}
