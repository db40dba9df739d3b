import type { EventSource, IncomingEvent } from '../domain/event-row.ts'
import { newEventId } from '../domain/ids.ts'
import { agentDeleted, forbidden, HttpError, rateLimited, validationFailed } from '../http-error.ts'
import { toDetails, validateEvent, type ErrorDetail } from '../validation.ts'
import type { ActivityRecorder } from './activity-recorder.ts'
import type { AgentResolver } from '../cache/agent-resolver.ts'
import type { AgentRef, Resolution } from '../storage/agents-repository.ts'
import type { EventShipper } from './shipper.ts'
import type { IngestLog } from './log/ingest-log.ts'
import { StepTimings } from './steps.ts'
import { rowBytesOf, type RowJob } from './row-thread.ts'
import type { RowBytes } from './log/entry-codec.ts'
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
export const TIER_BURST_PER_MINUTE: Record<Tier, number> = { free: 60, pro: 600, enterprise: 6000 }

export function burstLimit (key: { tier: Tier; burstPerMinute: number | null }): number {
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

interface Prepared { index: number; eventId: string; agent: AgentRef; framework: string | null }

/** One event's outcome: its acknowledgement, or the error it alone would have got. */
type IngestResult = HttpError | ({ status: 202 } & EventAck)

/** The input-rule problems of event i of a body, found while parsing it (none for a body that had none). */
type ProblemsOf = (i: number) => ErrorDetail[]

/** The JSON text a batch's events were parsed from (by plain JSON.parse, unchanged since): its `key` array holds them. */
export type BatchText = { text: string; key: string }

/**
 * The one ingestion pipeline, for POST /v1/events (1 event), the batch endpoint (up to 500), the
 * dashboard's test event and OTLP spans (POST /v1/traces, one event per span). Each event runs the same named, timed steps: key (checked by the route's
 * hook and timed there) → schema → burst → resolve → row → log. The log step appends the rows to the
 * instance's ingest log and resolves once they are on disk; the shipper takes them to ClickHouse.
 */
export class IngestionService {
  private active = 0
  private idleWaiters: (() => void)[] = []
  /** Receive times of the events between their receive time and their acknowledgement, with counts. */
  private readonly inFlight = new Map<number, number>()
  /** Receive times are later than this: the last instant settledBefore() handed out. */
  private receiveFloor = 0
  readonly steps = new StepTimings()

  constructor (
    private readonly agents: AgentResolver,
    private readonly ingestLog: IngestLog,
    private readonly shipper: EventShipper,
    private readonly limiter: {
      take(bucket: string, limit: number, n: number): Promise<Admission>
      /** Admits all n from what this instance holds, without waiting, or answers undefined (then take). */
      tryTake?(bucket: string, limit: number, n: number): Admission | undefined
    },
    private readonly activity: ActivityRecorder,
    /** Told of every agent that just had events acknowledged (schedules its debounced anomaly check). */
    private readonly onAgentActive: (userId: string, agentId: string) => void = () => {},
    /** Builds the rows' lines (the `row` step): large requests on the row thread, by default all here. */
    private readonly rows: { rows(job: RowJob): RowBytes | Promise<RowBytes> } = { rows: rowBytesOf },
  ) {}

  /** Ingests one event; resolves with its acknowledgement once it is in the ingest log, or throws its refusal. */
  async ingestOne (caller: IngestCaller, event: unknown): Promise<EventAck> {
    const [result] = await this.run(caller, [event], true)
    if (result instanceof HttpError) throw result
    const { status: _accepted, ...ack } = result!
    return ack
  }

  /**
   * Ingests up to 500 events; each gets the result it would have got alone (202 ack or error).
   * `inputProblemsOf(i)` gives the input-rule problems of event i, found by the JSON body parser;
   * `parsedFrom`, the body's text, lets the row thread be sent that text instead of the events.
   */
  async ingestBatch (caller: IngestCaller, events: unknown[], inputProblemsOf: ProblemsOf = () => [], parsedFrom?: BatchText): Promise<{ results: BatchResult[]; retryAfter: string | null }> {
    const results = await this.run(caller, events, false, inputProblemsOf, 'events', parsedFrom)
    // The longest wait any refused event was told, for the whole answer's Retry-After.
    let retryAfter: string | null = null
    for (const r of results) {
      const after = r instanceof HttpError ? r.headers['retry-after'] : undefined
      if (after !== undefined && (retryAfter === null || Number(after) > Number(retryAfter))) retryAfter = after
    }
    return { results: results.map((r) => (r instanceof HttpError ? { status: r.statusCode, ...r.body() } : r as BatchResult)), retryAfter }
  }

  /**
   * Ingests events mapped from OTLP spans (src/domain/otlp-mapping.ts), as a batch of any size: each
   * gets its acknowledgement or the error it alone would have got. A full log still throws (503).
   */
  async ingestSpans (caller: IngestCaller, events: IncomingEvent[]): Promise<(HttpError | EventAck)[]> {
    const results = await this.run(caller, events, false, () => [], 'otlp')
    return results.map((r) => {
      if (r instanceof HttpError) return r
      const { status: _accepted, ...ack } = r
      return ack
    })
  }

  /** Resolves once no ingestion call is under way (shutdown waits for this before draining the log). */
  async idle (): Promise<void> {
    if (this.active > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve))
  }

  private async run (caller: IngestCaller, events: unknown[], single: boolean, inputProblemsOf: ProblemsOf = () => [], source: EventSource = 'events', parsedFrom?: BatchText): Promise<IngestResult[]> {
    this.active++
    try {
      return await this.pipeline(caller, events, single, inputProblemsOf, source, parsedFrom)
    } finally {
      if (--this.active === 0) for (const wake of this.idleWaiters.splice(0)) wake()
    }
  }

  private async pipeline (caller: IngestCaller, events: unknown[], single: boolean, inputProblemsOf: ProblemsOf, source: EventSource, parsedFrom: BatchText | undefined): Promise<IngestResult[]> {
    const results: IngestResult[] = new Array(events.length)
    const valid = this.steps.runSync('schema', events.length, () => {
      const ok: number[] = []
      events.forEach((event, i) => {
        const input = inputProblemsOf(i)
        const problem = input.length > 0 ? validationFailed(input) : this.check(caller, event, single)
        if (problem) results[i] = problem
        else ok.push(i)
      })
      return ok
    })
    if (valid.length === 0) return results

    const bucket = `user:${caller.userId}`
    const limit = burstLimit(caller)
    // From tokens this instance holds when it can (no promise), else leasing more.
    const burstStarted = performance.now()
    let admission = this.limiter.tryTake?.(bucket, limit, valid.length)
    if (admission) this.steps.recordSince('burst', valid.length, burstStarted)
    else admission = await this.steps.run('burst', valid.length, () => this.limiter.take(bucket, limit, valid.length))
    const admitted = valid.slice(0, admission.admitted)
    for (const i of valid.slice(admission.admitted)) results[i] = rateLimited(admission.retryAfterMs / 1000)

    const receivedAt = Math.max(Date.now(), this.receiveFloor + 1)
    this.inFlight.set(receivedAt, (this.inFlight.get(receivedAt) ?? 0) + 1)
    try {
      return await this.store(caller, events, admitted, receivedAt, results, source, parsedFrom)
    } finally {
      const n = this.inFlight.get(receivedAt)! - 1
      if (n === 0) this.inFlight.delete(receivedAt)
      else this.inFlight.set(receivedAt, n)
    }
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

  private async store (caller: IngestCaller, events: unknown[], admitted: number[], receivedAt: number, results: IngestResult[], source: EventSource, parsedFrom: BatchText | undefined): Promise<IngestResult[]> {
    // Agents this process holds resolve without waiting (the usual case); the others are looked up.
    const resolved: { index: number; agent: AgentRef }[] = []
    const resolveStarted = performance.now()
    const toLookUp = this.resolveHeld(caller, events, admitted, resolved, results)
    try {
      for (const i of toLookUp) {
        const event = events[i] as IncomingEvent
        this.settleAgent(caller, event, i, await this.agents.resolve(caller.userId, caller.agentId ?? event.agentId!), resolved, results)
      }
    } finally {
      this.steps.recordSince('resolve', admitted.length, resolveStarted)
    }
    if (toLookUp.length > 0) resolved.sort((a, b) => a.index - b.index)
    if (resolved.length === 0) return results

    const rowStarted = performance.now()
    const job: RowJob = { events: [], eventIds: [], agentIds: [], userId: caller.userId, receivedAt, source }
    const prepared = resolved.map(({ index, agent }): Prepared => {
      const event = events[index] as IncomingEvent
      const eventId = newEventId(receivedAt)
      job.events.push(event)
      job.eventIds.push(eventId)
      job.agentIds.push(agent.id)
      return { index, eventId, agent, framework: agent.framework === null ? event.metadata?.tool ?? null : null }
    })
    if (parsedFrom) job.parsedFrom = { ...parsedFrom, indices: prepared.map((p) => p.index) }
    // Large requests build their rows on the row thread; the others here, without a promise.
    let rows = this.rows.rows(job)
    try {
      if (rows instanceof Promise) rows = await rows
    } finally {
      this.steps.recordSince('row', prepared.length, rowStarted)
    }

    const last = await this.steps.run('log', prepared.length, () => this.ingestLog.append(rows))
    this.shipper.acknowledged(caller.userId, last)
    this.recordActivity(caller, prepared)
    for (const p of prepared) results[p.index] = { status: 202, id: p.eventId, accepted: true, agentId: p.agent.id, eventId: p.eventId }
    return results
  }

  /**
   * Settles the admitted events whose agent reference this process holds (no waiting); answers the
   * indexes of those whose reference must be looked up.
   */
  private resolveHeld (caller: IngestCaller, events: unknown[], admitted: number[], resolved: { index: number; agent: AgentRef }[], results: IngestResult[]): number[] {
    const rest: number[] = []
    // A batch names few agents: each reference is looked up once per request.
    const seen = new Map<string, Resolution | undefined>()
    for (const i of admitted) {
      const event = events[i] as IncomingEvent
      const ref = caller.agentId ?? event.agentId!
      let held = seen.get(ref)
      if (held === undefined && !seen.has(ref)) {
        held = this.agents.peek(caller.userId, ref)
        seen.set(ref, held)
      }
      if (held === undefined) rest.push(i)
      else this.settleAgent(caller, event, i, held, resolved, results)
    }
    return rest
  }

  /** Schema validation, and an agent to send for. A single event's failure names the body, as route validation does. */
  private check (caller: IngestCaller, event: unknown, single: boolean): HttpError | null {
    if (!validateEvent(event)) {
      const details = toDetails(validateEvent.errors)
      return single ? new HttpError(400, 'validation_failed', { message: 'the body is not valid', details }) : validationFailed(details)
    }
    if ((event as IncomingEvent).agentId === undefined && caller.agentId === null) {
      return validationFailed([{ path: ['agentId'], message: 'is required when the API key is not bound to an agent' }])
    }
    return null
  }

  /**
   * Event i's agent from the resolution of its reference (the caller's bound agent, else the event's
   * agentId, which check() made sure an unbound caller names): into `resolved`, or its refusal into `results`.
   */
  private settleAgent (caller: IngestCaller, event: IncomingEvent, i: number, resolution: Resolution, resolved: { index: number; agent: AgentRef }[], results: IngestResult[]): void {
    if (resolution.kind === 'forbidden') {
      results[i] = forbidden(caller.agentId !== null ? 'key_agent_not_owned' : resolution.reason)
      return
    }
    const ref = event.agentId
    const agent = resolution.agent
    if (caller.agentId !== null && ref !== undefined && ref !== agent.id && ref !== agent.snsName && ref !== agent.displayName) {
      results[i] = forbidden('key_bound_to_other_agent')
    } else if (resolution.kind === 'deleted') {
      results[i] = agentDeleted()
    } else {
      resolved.push({ index: i, agent })
    }
  }

  private recordActivity (caller: IngestCaller, prepared: Prepared[]): void {
    const now = Date.now()
    if (caller.source.kind === 'api_key') this.activity.keyUsed(caller.source.keyId, now)
    this.activity.eventsAccepted(caller.userId, now, prepared.length)
    let last = ''
    for (const p of prepared) {
      this.activity.agentSeen(p.agent.id, now, p.framework)
      if (p.agent.id !== last) this.onAgentActive(caller.userId, p.agent.id)
      last = p.agent.id
    }
  }
}
