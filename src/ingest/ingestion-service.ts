import type { EventSource, IncomingEvent } from '../domain/event-row.ts'
import { newEventId } from '../domain/ids.ts'
import { agentDeleted, forbidden, HttpError, rateLimited, validationFailed } from '../http-error.ts'
import { toDetails, validateEvent, type ErrorDetail } from '../validation.ts'
import type { ActivityRecorder } from './activity-recorder.ts'
import type { AgentResolver } from '../cache/agent-resolver.ts'
import type { ModelPriceResolver } from '../cache/model-price-resolver.ts'
import type { UserPriceTable } from '../domain/pricing.ts'
import type { AgentRef, Resolution } from '../storage/agents-repository.ts'
import type { EventShipper } from './shipper.ts'
import type { IngestLog } from './log/ingest-log.ts'
import type { RowBytes } from './log/entry-codec.ts'
import { passAll, type Outcome, type PipelineRunner, type Step, type Verdict } from './pipeline.ts'
import { rowBytesOf, type RowJob } from './row-thread.ts'
import type { KeyIdentity } from '../storage/keys-repository.ts'
import type { Admission } from '../storage/rate-limiter.ts'
import type { Tier } from '../storage/users-repository.ts'

/** The spec's acknowledgement of an accepted event. */
export type EventAck = {
  id: string
  accepted: true
  agentId: string
  eventId: string
}

/** Ingestion burst limits per minute by tier; a user's burst_per_minute overrides them. */
const TIER_BURST_PER_MINUTE: Record<Tier, number> = { free: 60, pro: 600, enterprise: 6000 }

function burstLimit (key: { tier: Tier; burstPerMinute: number | null }): number {
  return key.burstPerMinute ?? TIER_BURST_PER_MINUTE[key.tier]
}

export type BatchResult = ({ status: 202 } & EventAck) | ({ status: number } & Record<string, unknown>)

/**
 * Who is sending: a user with a tier, optionally bound to one agent, and through what. API keys are
 * the usual source; the dashboard's test event is ingested for a signed-in user with no key.
 */
export interface IngestCaller {
  userId: string
  tier: Tier
  burstPerMinute: number | null
  /** The only agent this caller may send for (a bound key, the test agent), or null for any of the user's. */
  agentId: string | null
  source: { kind: 'api_key'; keyId: string } | { kind: 'dashboard_test' }
}

export function callerOfKey (key: KeyIdentity): IngestCaller {
  return { userId: key.userId, tier: key.tier, burstPerMinute: key.burstPerMinute, agentId: key.agentId, source: { kind: 'api_key', keyId: key.keyId } }
}

/** The input-rule problems of event i of a body, found while parsing it (none for a body that had none). */
type ProblemsOf = (i: number) => ErrorDetail[]

/** The JSON text a batch's events were parsed from (by plain JSON.parse, unchanged since): its `key` array holds them. */
export type BatchText = { text: string; key: string }

/** The burst limiter the `burst` step takes tokens from (src/storage/rate-limiter.ts, or leased from it). */
export interface BurstLimiter {
  take(bucket: string, limit: number, n: number): Promise<Admission>
  /** Admits all n from what this instance holds, without waiting, or answers undefined (then take). */
  tryTake?(bucket: string, limit: number, n: number): Admission | undefined
}

export interface IngestionParts {
  agents: Pick<AgentResolver, 'resolve' | 'peek'>
  ingestLog: Pick<IngestLog, 'append'>
  shipper: Pick<EventShipper, 'acknowledged'>
  limiter: BurstLimiter
  activity: Pick<ActivityRecorder, 'keyUsed' | 'eventsAccepted' | 'agentSeen'>
  /** Runs the steps; its timings are what /health and /metrics report. */
  pipeline: PipelineRunner
  /** Told of every agent that just had events acknowledged (schedules its debounced anomaly check). */
  onAgentActive?: (userId: string, agentId: string) => void
  /** Builds the rows' lines (the `row` step): large requests on the row thread; by default all here. */
  rows?: { rows(job: RowJob): RowBytes | Promise<RowBytes> }
  /** The model prices users set (the `prices` step); by default none, every event priced by the catalogue. */
  prices?: Pick<ModelPriceResolver, 'peek' | 'get'>
}

/** How an entry point hands its events to the pipeline. */
interface IngestRequest {
  caller: IngestCaller
  source: EventSource
  /** The refusal of an event that does not match the schema, given what is wrong with it. */
  invalid: (details: ErrorDetail[]) => HttpError
  inputProblemsOf: ProblemsOf
  /** The body's text, sent to the row thread instead of the events. */
  parsedFrom?: BatchText
}

/** What the steps of one request share. */
interface IngestRun extends IngestRequest {
  /** When the request was received: the time of its event ids and of its rows. */
  receivedAt: number
  /** The lines the `row` step built, which the `log` step appends. */
  rows: RowBytes | null
  /** The caller's user's model prices, set by `prices`; null when the user has set none. */
  prices: UserPriceTable | null
}

/** One event on its way through the steps; what a step learns of it is written on it for the next ones. */
interface IngestItem {
  /** Its position in the request. */
  readonly index: number
  /** As sent; an IncomingEvent once past `schema`. */
  readonly event: unknown
  /** Set by `resolve`. */
  agent: AgentRef | null
  /** Set by `row`. */
  eventId: string
}

type IngestVerdict = Verdict<EventAck>

/** A single event that does not match the schema names the body, as route validation does. */
const bodyInvalid = (details: ErrorDetail[]) => new HttpError(400, 'validation_failed', { message: 'the body is not valid', details })
const noInputProblems: ProblemsOf = () => []
/** Without a price resolver no user has prices of their own. */
const NO_PRICES: NonNullable<IngestionParts['prices']> = { peek: () => null, get: async () => null }

/**
 * The one ingestion pipeline, for POST /v1/events (1 event), the batch endpoint (up to 500), the
 * dashboard's test event and OTLP spans (POST /v1/traces, one event per span). Every request runs
 * the same named steps through one runner: key (checked by the route's hook, timed by the runner) →
 * schema → burst → resolve → prices → row → log. The log step appends the rows to the instance's
 * ingest log and resolves once they are on disk; the shipper takes them to ClickHouse.
 */
export class IngestionService {
  readonly pipeline: PipelineRunner
  private active = 0
  private idleWaiters: (() => void)[] = []
  /** Receive times of the requests between their receive time and their answer, with counts. */
  private readonly inFlight = new Map<number, number>()
  /** Receive times are later than this: the last instant settledBefore() handed out. */
  private receiveFloor = 0
  private readonly agents: IngestionParts['agents']
  private readonly ingestLog: IngestionParts['ingestLog']
  private readonly shipper: IngestionParts['shipper']
  private readonly limiter: BurstLimiter
  private readonly activity: IngestionParts['activity']
  private readonly onAgentActive: NonNullable<IngestionParts['onAgentActive']>
  private readonly rows: NonNullable<IngestionParts['rows']>
  private readonly prices: NonNullable<IngestionParts['prices']>

  private readonly steps: readonly Step<IngestRun, IngestItem, EventAck>[] = [
    { name: 'schema', run: (run, items) => this.checkSchema(run, items) },
    { name: 'burst', run: (run, items) => this.takeBurst(run, items) },
    { name: 'resolve', run: (run, items) => this.resolveAgents(run, items) },
    { name: 'prices', run: (run, items) => this.lookUpPrices(run, items) },
    { name: 'row', run: (run, items) => this.buildRows(run, items) },
    { name: 'log', run: (run, items) => this.appendToLog(run, items) },
  ]

  constructor (parts: IngestionParts) {
    this.pipeline = parts.pipeline
    this.agents = parts.agents
    this.ingestLog = parts.ingestLog
    this.shipper = parts.shipper
    this.limiter = parts.limiter
    this.activity = parts.activity
    this.onAgentActive = parts.onAgentActive ?? (() => {})
    this.rows = parts.rows ?? { rows: rowBytesOf }
    this.prices = parts.prices ?? NO_PRICES
  }

  /** Ingests one event; resolves with its acknowledgement once it is in the ingest log, or throws its refusal. */
  async ingestOne (caller: IngestCaller, event: unknown): Promise<EventAck> {
    const [outcome] = await this.ingest({ caller, source: 'events', invalid: bodyInvalid, inputProblemsOf: noInputProblems }, [event])
    if (outcome!.kind !== 'accepted') throw outcome!.error
    return outcome!.ack
  }

  /**
   * Ingests up to 500 events; each gets the result it would have got alone (202 ack or error).
   * `inputProblemsOf(i)` gives the input-rule problems of event i, found by the JSON body parser;
   * `parsedFrom`, the body's text, lets the row thread be sent that text instead of the events.
   */
  async ingestBatch (caller: IngestCaller, events: unknown[], parsed: { inputProblemsOf?: ProblemsOf; parsedFrom?: BatchText } = {}): Promise<{ results: BatchResult[]; retryAfter: string | null }> {
    const outcomes = await this.ingest({
      caller, source: 'events', invalid: validationFailed, inputProblemsOf: parsed.inputProblemsOf ?? noInputProblems, parsedFrom: parsed.parsedFrom,
    }, events)
    return { results: outcomes.map(batchResult), retryAfter: longestRetryAfter(outcomes) }
  }

  /**
   * Ingests events mapped from OTLP spans (src/domain/otlp-mapping.ts), as a batch of any size: each
   * gets its outcome as it would alone. A full log still throws (503).
   */
  ingestSpans (caller: IngestCaller, events: IncomingEvent[]): Promise<Outcome<EventAck>[]> {
    return this.ingest({ caller, source: 'otlp', invalid: validationFailed, inputProblemsOf: noInputProblems }, events)
  }

  /** Resolves once no ingestion call is under way (shutdown waits for this before draining the log). */
  async idle (): Promise<void> {
    if (this.active > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve))
  }

  /**
   * An instant such that every event this instance received at or before it has been answered:
   * acknowledged (and so in the log) or refused. A read that takes its snapshot here and then waits
   * for read-your-writes sees every row of the snapshot.
   */
  settledBefore (): number {
    const now = Date.now()
    let oldest = Infinity
    for (const t of this.inFlight.keys()) if (t < oldest) oldest = t
    if (oldest <= now) return oldest - 1
    // Nothing in flight: events received from now on are stamped after this instant.
    this.receiveFloor = Math.max(this.receiveFloor, now)
    return now
  }

  /** Runs the steps over a request's events, counted as in flight from its receive time until answered. */
  private async ingest (request: IngestRequest, events: unknown[]): Promise<Outcome<EventAck>[]> {
    this.active++
    const receivedAt = this.receive()
    try {
      const items = events.map((event, index): IngestItem => ({ index, event, agent: null, eventId: '' }))
      return await this.pipeline.run(this.steps, { ...request, receivedAt, rows: null, prices: null }, items)
    } finally {
      this.answered(receivedAt)
      if (--this.active === 0) for (const wake of this.idleWaiters.splice(0)) wake()
    }
  }

  /** A receive time for a request, later than any settledBefore() handed out, and counted in flight. */
  private receive (): number {
    const receivedAt = Math.max(Date.now(), this.receiveFloor + 1)
    this.inFlight.set(receivedAt, (this.inFlight.get(receivedAt) ?? 0) + 1)
    return receivedAt
  }

  private answered (receivedAt: number): void {
    const n = this.inFlight.get(receivedAt)! - 1
    if (n === 0) this.inFlight.delete(receivedAt)
    else this.inFlight.set(receivedAt, n)
  }

  /** `schema`: the body parser's input-rule problems, the schema, and an agent to send for. */
  private checkSchema (run: IngestRun, items: IngestItem[]): IngestVerdict[] {
    return items.map((item): IngestVerdict => {
      const input = run.inputProblemsOf(item.index)
      const problem = input.length > 0 ? validationFailed(input) : this.check(run, item.event)
      return problem ? { kind: 'refused', error: problem } : undefined
    })
  }

  private check (run: IngestRun, event: unknown): HttpError | null {
    if (!validateEvent(event)) return run.invalid(toDetails(validateEvent.errors))
    if ((event as IncomingEvent).agentId === undefined && run.caller.agentId === null) {
      return validationFailed([{ path: ['agentId'], message: 'is required when the API key is not bound to an agent' }])
    }
    return null
  }

  /** `burst`: the caller's user's limit, from tokens this instance holds when it can (no promise), else leasing more. */
  private takeBurst ({ caller }: IngestRun, items: IngestItem[]): IngestVerdict[] | Promise<IngestVerdict[]> {
    const bucket = `user:${caller.userId}`
    const limit = burstLimit(caller)
    const held = this.limiter.tryTake?.(bucket, limit, items.length)
    if (held) return admit(items, held)
    return this.limiter.take(bucket, limit, items.length).then((admission) => admit(items, admission))
  }

  /** `resolve`: each event's agent, without waiting for those this process holds (the usual case). */
  private resolveAgents ({ caller }: IngestRun, items: IngestItem[]): IngestVerdict[] | Promise<IngestVerdict[]> {
    const held = this.heldResolutions(caller, items)
    if (!held.includes(undefined)) return this.settleAgents(caller, items, held as Resolution[])
    return this.lookUpOthers(caller, items, held).then((resolutions) => this.settleAgents(caller, items, resolutions))
  }

  /** The resolution of each item's agent reference if this process holds it, else undefined. */
  private heldResolutions (caller: IngestCaller, items: IngestItem[]): (Resolution | undefined)[] {
    // A batch names few agents: each reference is looked up once per request.
    const seen = new Map<string, Resolution | undefined>()
    return items.map((item) => {
      const ref = agentRef(caller, item)
      if (!seen.has(ref)) seen.set(ref, this.agents.peek(caller.userId, ref))
      return seen.get(ref)
    })
  }

  /** `held` with the resolutions this process did not hold looked up, one after the other. */
  private async lookUpOthers (caller: IngestCaller, items: IngestItem[], held: (Resolution | undefined)[]): Promise<Resolution[]> {
    const resolutions: Resolution[] = []
    for (const [i, item] of items.entries()) resolutions.push(held[i] ?? await this.agents.resolve(caller.userId, agentRef(caller, item)))
    return resolutions
  }

  /**
   * Each item's agent from the resolution of its reference (the caller's bound agent, else the
   * event's agentId, which `schema` made sure an unbound caller names), or its refusal.
   */
  private settleAgents (caller: IngestCaller, items: IngestItem[], resolutions: Resolution[]): IngestVerdict[] {
    return items.map((item, i): IngestVerdict => {
      const resolution = resolutions[i]!
      if (resolution.kind === 'forbidden') return { kind: 'refused', error: forbidden(caller.agentId !== null ? 'key_agent_not_owned' : resolution.reason) }
      const ref = (item.event as IncomingEvent).agentId
      const agent = resolution.agent
      if (caller.agentId !== null && ref !== undefined && ref !== agent.id && ref !== agent.snsName && ref !== agent.displayName) {
        return { kind: 'refused', error: forbidden('key_bound_to_other_agent') }
      }
      if (resolution.kind === 'deleted') return { kind: 'refused', error: agentDeleted() }
      item.agent = agent
      return undefined
    })
  }

  /**
   * `prices`: the model prices the caller's user set, once for the request, without waiting when this
   * process holds them (the usual case). Every event goes on: a model the user set no price for is
   * priced by the catalogue.
   */
  private lookUpPrices (run: IngestRun, items: IngestItem[]): IngestVerdict[] | Promise<IngestVerdict[]> {
    const held = this.prices.peek(run.caller.userId)
    if (held !== undefined) {
      run.prices = held
      return passAll(items)
    }
    return this.prices.get(run.caller.userId).then((table) => {
      run.prices = table
      return passAll(items)
    })
  }

  /** `row`: each event's id and its ingest log line; large requests on the row thread, the others here without a promise. */
  private buildRows (run: IngestRun, items: IngestItem[]): IngestVerdict[] | Promise<IngestVerdict[]> {
    const job: RowJob = { events: [], eventIds: [], agentIds: [], userId: run.caller.userId, receivedAt: run.receivedAt, source: run.source }
    if (run.prices) job.prices = run.prices
    for (const item of items) {
      item.eventId = newEventId(run.receivedAt)
      job.events.push(item.event as IncomingEvent)
      job.eventIds.push(item.eventId)
      job.agentIds.push(item.agent!.id)
    }
    if (run.parsedFrom) job.parsedFrom = { ...run.parsedFrom, indices: items.map((item) => item.index) }
    const rows = this.rows.rows(job)
    const keep = (built: RowBytes) => {
      run.rows = built
      return passAll<EventAck>(items)
    }
    return rows instanceof Promise ? rows.then(keep) : keep(rows)
  }

  /** `log`: the rows appended to the ingest log, synced; then the events are acknowledged. */
  private async appendToLog (run: IngestRun, items: IngestItem[]): Promise<IngestVerdict[]> {
    const last = await this.ingestLog.append(run.rows!)
    this.shipper.acknowledged(run.caller.userId, last)
    this.recordActivity(run.caller, items)
    return items.map((item): IngestVerdict => ({ kind: 'accepted', ack: { id: item.eventId, accepted: true, agentId: item.agent!.id, eventId: item.eventId } }))
  }

  private recordActivity (caller: IngestCaller, items: IngestItem[]): void {
    const now = Date.now()
    if (caller.source.kind === 'api_key') this.activity.keyUsed(caller.source.keyId, now)
    this.activity.eventsAccepted(caller.userId, now, items.length)
    let last = ''
    for (const item of items) {
      const agent = item.agent!
      // The agent's framework is back-filled from the event's tool when it has none yet.
      this.activity.agentSeen(agent.id, now, agent.framework === null ? (item.event as IncomingEvent).metadata?.tool ?? null : null)
      if (agent.id !== last) this.onAgentActive(caller.userId, agent.id)
      last = agent.id
    }
  }
}

/** The agent reference an item is sent for: the caller's bound agent, else the event's own. */
function agentRef (caller: IngestCaller, item: IngestItem): string {
  return caller.agentId ?? (item.event as IncomingEvent).agentId!
}

/** The first `admitted` items go on; the others are over the limit. */
function admit (items: IngestItem[], admission: Admission): IngestVerdict[] {
  return items.map((_, i): IngestVerdict => (i < admission.admitted ? undefined : { kind: 'rate_limited', error: rateLimited(admission.retryAfterMs / 1000) }))
}

function batchResult (outcome: Outcome<EventAck>): BatchResult {
  return outcome.kind === 'accepted' ? { status: 202, ...outcome.ack } : { status: outcome.error.statusCode, ...outcome.error.body() }
}

/** The longest wait any refused event was told, for the whole answer's Retry-After. */
function longestRetryAfter (outcomes: Outcome<EventAck>[]): string | null {
  let longest: string | null = null
  for (const o of outcomes) {
    const after = o.kind === 'rate_limited' ? o.error.headers['retry-after'] : undefined
    if (after !== undefined && (longest === null || Number(after) > Number(longest))) longest = after
  }
  return longest
}
