import type { IncomingEvent } from '../domain/event-row.ts'
import { HttpError, validationFailed } from '../http-error.ts'
import type { ErrorDetail } from '../validation.ts'
import type { ActivityRecorder } from './activity-recorder.ts'
import { AcceptedActivity } from './accepted-activity.ts'
import type { AgentResolver } from '../cache/agent-resolver.ts'
import type { EventShipper } from './shipper.ts'
import type { IngestLog } from './log/ingest-log.ts'
import { batchResult, longestRetryAfter, type BatchResult as PipelineBatchResult, type Outcome, type PipelineRunner } from './pipeline.ts'
import { ReadYourWrites } from './read-your-writes.ts'
import { rowBytesOf } from './row-thread.ts'
import { burstStep, type BurstLimiter } from './steps/burst.ts'
import type { BatchText, EventAck, IngestCaller, IngestionStep, IngestItem, IngestRequest, IngestRun, RefusalOf } from './steps/ingest-run.ts'
import { logStep, type AcknowledgedRows } from './steps/log.ts'
import { NO_USER_PRICES, pricesStep, type UserPrices } from './steps/prices.ts'
import { resolveStep } from './steps/resolve.ts'
import { rowStep, type RowBuilder } from './steps/row.ts'
import { schemaStep } from './steps/schema.ts'

export { callerOfKey, type BatchText, type EventAck, type IngestCaller } from './steps/ingest-run.ts'
export type { BurstLimiter } from './steps/burst.ts'
export type { AcknowledgedRows } from './steps/log.ts'

export type BatchResult = PipelineBatchResult<EventAck>

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
  rows?: RowBuilder
  /** The model prices users set (the `prices` step); by default none, every event priced by the catalogue. */
  prices?: UserPrices
}

/** A single event that does not match the schema names the body, as route validation does. */
const bodyInvalid = (details: ErrorDetail[]) => new HttpError(400, 'validation_failed', { message: 'the body is not valid', details })
const noRefusal: RefusalOf = () => null

/**
 * The one ingestion pipeline, for POST /v1/events (1 event), the batch endpoint (up to 500), the
 * dashboard's test event and OTLP spans (POST /v1/traces, one event per span). Every request runs
 * the same named steps (src/ingest/steps/) through one runner: key (checked by the route's hook,
 * timed by the runner) → schema → burst → resolve → prices → row → log. The log step appends the
 * rows to the instance's ingest log and resolves once they are on disk; the shipper takes them to
 * ClickHouse. Each request counts as in flight for read-your-writes until it is answered.
 */
export class IngestionService {
  readonly pipeline: PipelineRunner
  private readonly steps: readonly IngestionStep[]
  /** The requests under way (events and scores alike: read-your-writes waits for both). */
  readonly inFlight = new ReadYourWrites()
  private readonly logged: AcknowledgedRows[] = []

  constructor (parts: IngestionParts) {
    this.pipeline = parts.pipeline
    this.steps = [
      schemaStep(),
      burstStep({ limiter: parts.limiter }),
      resolveStep({ agents: parts.agents }),
      pricesStep({ prices: parts.prices ?? NO_USER_PRICES }),
      rowStep({ rows: parts.rows ?? { rows: rowBytesOf } }),
      logStep({ ingestLog: parts.ingestLog, shipper: parts.shipper, accepted: new AcceptedActivity(parts.activity, parts.onAgentActive), logged: this.logged }),
    ]
  }

  /**
   * Adds a listener of each request's rows, called once per request (per user) after its log commit
   * and before its 202: synchronous, it must neither wait nor throw (the live tail publishes there).
   */
  onAcknowledged (listener: AcknowledgedRows): void {
    this.logged.push(listener)
  }

  /** Ingests one event; resolves with its acknowledgement once it is in the ingest log, or throws its refusal. */
  async ingestOne (caller: IngestCaller, event: unknown): Promise<EventAck> {
    const [outcome] = await this.ingest({ caller, source: 'events', invalid: bodyInvalid, refusalOf: noRefusal }, [event])
    if (outcome!.kind !== 'accepted') throw outcome!.error
    return outcome!.ack
  }

  /**
   * Ingests up to 500 events; each gets the result it would have got alone (202 ack or error).
   * `refusalOf(i)` gives the JSON body parser's refusal of event i (its input-rule problems, or its size);
   * `parsedFrom`, the body's text, lets the row thread be sent that text instead of the events.
   */
  async ingestBatch (caller: IngestCaller, events: unknown[], parsed: { refusalOf?: RefusalOf; parsedFrom?: BatchText } = {}): Promise<{ results: BatchResult[]; retryAfter: string | null }> {
    const outcomes = await this.ingest({
      caller, source: 'events', invalid: bodyInvalid, refusalOf: parsed.refusalOf ?? noRefusal, parsedFrom: parsed.parsedFrom,
    }, events)
    return { results: outcomes.map(batchResult), retryAfter: longestRetryAfter(outcomes) }
  }

  /**
   * Ingests events mapped from OTLP spans (src/domain/otlp-mapping.ts), as a batch of any size: each
   * gets its outcome as it would alone. A full log still throws (503).
   */
  ingestSpans (caller: IngestCaller, events: IncomingEvent[]): Promise<Outcome<EventAck>[]> {
    return this.ingest({ caller, source: 'otlp', invalid: validationFailed, refusalOf: noRefusal }, events)
  }

  /** Resolves once no ingestion call is under way (shutdown waits for this before draining the log). */
  idle (): Promise<void> {
    return this.inFlight.idle()
  }

  /** See ReadYourWrites.settledBefore (src/ingest/read-your-writes.ts). */
  settledBefore (): number {
    return this.inFlight.settledBefore()
  }

  /** Runs the steps over a request's events, counted as in flight from its receive time until answered. */
  private async ingest (request: IngestRequest, events: unknown[]): Promise<Outcome<EventAck>[]> {
    const receivedAt = this.inFlight.receive()
    try {
      const items = events.map((event, index): IngestItem => ({ index, event, agent: null, eventId: '' }))
      // Spelled out, not spread: every run has the same shape whatever its entry point, so the steps
      // reading it stay monomorphic.
      const run: IngestRun = {
        caller: request.caller,
        source: request.source,
        invalid: request.invalid,
        refusalOf: request.refusalOf,
        parsedFrom: request.parsedFrom,
        receivedAt,
        rows: null,
        prices: null,
      }
      return await this.pipeline.run(this.steps, run, items)
    } finally {
      this.inFlight.answered(receivedAt)
    }
  }
}
