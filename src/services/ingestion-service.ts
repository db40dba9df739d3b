import type { FastifyBaseLogger } from 'fastify'
import { LRUCache } from 'lru-cache'
import { buildEventRow, type EventRow, type IncomingEvent } from '../domain/event-row.ts'
import { newEventId } from '../domain/ids.ts'
import { agentDeleted, forbidden, HttpError, rateLimited, validationFailed } from '../errors.ts'
import { toDetails, validateEvent } from '../schemas.ts'
import type { ActivityRecorder } from '../storage/activity-recorder.ts'
import type { AgentRef, AgentsRepository, Resolution } from '../storage/agents-repository.ts'
import type { EventWriter } from '../storage/event-writer.ts'
import type { KeyIdentity } from '../storage/keys-repository.ts'
import type { RateLimiter } from '../storage/rate-limiter.ts'
import type { Tier } from '../storage/users-repository.ts'

/** The spec's acknowledgement of an accepted event. */
export interface EventAck {
  id: string
  accepted: true
  agentId: string
  eventId: string
}

/** Ingestion burst limits per minute by tier; a user's burst_per_minute overrides them. */
export const TIER_BURST_PER_MINUTE: Record<Tier, number> = { free: 60, pro: 600, enterprise: 6000 }

export function burstLimit(key: Pick<KeyIdentity, 'tier' | 'burstPerMinute'>): number {
  return key.burstPerMinute ?? TIER_BURST_PER_MINUTE[key.tier]
}

export type BatchResult = ({ status: 202 } & EventAck) | ({ status: number } & Record<string, unknown>)

interface Prepared { row: EventRow; agent: AgentRef; framework: string | null }

/**
 * The ingestion path shared by POST /v1/events, the batch endpoint and the test-event generator:
 * burst limit → agent resolution scoped to the key's owner → row → group commit → side effects.
 */
export class IngestionService {
  private readonly agentCache: LRUCache<string, Resolution>
  private readonly resolving = new Map<string, Promise<Resolution>>()
  private agentGeneration = 0

  constructor(
    private readonly agents: AgentsRepository,
    private readonly writer: EventWriter,
    private readonly limiter: RateLimiter,
    private readonly activity: ActivityRecorder,
    private readonly log: FastifyBaseLogger,
    cacheTtlMs: number,
    /** Told of every agent that just had events committed (schedules its debounced anomaly check). */
    private readonly onAgentActive: (userId: string, agentId: string) => void = () => {},
  ) {
    this.agentCache = new LRUCache({ max: 100_000, ttl: cacheTtlMs })
  }

  /** Forgets every cached agent resolution (an agent was deleted or renamed somewhere). */
  forgetAgents(): void {
    this.agentGeneration++
    this.resolving.clear()
    this.agentCache.clear()
  }

  /** Ingests one validated event; resolves with the acknowledgement once it is committed. */
  async ingestOne(key: KeyIdentity, event: IncomingEvent): Promise<EventAck> {
    // A missing agentId is a validation failure: it must not spend the burst.
    const missing = this.checkAgentRequired(key, event)
    if (missing) throw missing
    const admission = await this.limiter.take(`user:${key.userId}`, burstLimit(key), 1)
    if (admission.admitted === 0) throw rateLimited(admission.retryAfterMs / 1000)
    const prepared = await this.prepare(key, event, Date.now())
    await this.writer.append([prepared.row])
    this.recordActivity(key, [prepared])
    return ackOf(prepared.row)
  }

  /**
   * Ingests up to 500 events; each gets the result it would have got alone (202 ack or error).
   * Admitted events are committed in one insert. If that insert fails the whole call fails with 503.
   */
  async ingestBatch(key: KeyIdentity, events: unknown[]): Promise<BatchResult[]> {
    const results: (BatchResult | undefined)[] = new Array(events.length)
    const valid: number[] = []
    events.forEach((event, i) => {
      const problem = this.check(key, event)
      if (problem) results[i] = resultOf(problem)
      else valid.push(i)
    })
    const admission = valid.length
      ? await this.limiter.take(`user:${key.userId}`, burstLimit(key), valid.length)
      : { admitted: 0, retryAfterMs: 0 }
    const receivedAt = Date.now()
    const prepared: { index: number; p: Prepared }[] = []
    for (const [n, i] of valid.entries()) {
      if (n >= admission.admitted) {
        results[i] = resultOf(rateLimited(admission.retryAfterMs / 1000))
        continue
      }
      try {
        prepared.push({ index: i, p: await this.prepare(key, events[i] as IncomingEvent, receivedAt) })
      } catch (err) {
        if (!(err instanceof HttpError)) throw err
        results[i] = resultOf(err)
      }
    }
    await this.writer.append(prepared.map((x) => x.p.row))
    this.recordActivity(key, prepared.map((x) => x.p))
    for (const { index, p } of prepared) results[index] = { status: 202, ...ackOf(p.row) }
    return results as BatchResult[]
  }

  /** Schema validation of one event (used by the batch path; single events are validated by the route). */
  private check(key: KeyIdentity, event: unknown): HttpError | null {
    if (!validateEvent(event)) return validationFailed(toDetails(validateEvent.errors))
    return this.checkAgentRequired(key, event as IncomingEvent)
  }

  private checkAgentRequired(key: KeyIdentity, event: IncomingEvent): HttpError | null {
    if (event.agentId === undefined && key.agentId === null) {
      return validationFailed([{ path: ['agentId'], message: 'is required when the API key is not bound to an agent' }])
    }
    return null
  }

  private async prepare(key: KeyIdentity, event: IncomingEvent, receivedAt: number): Promise<Prepared> {
    const agent = await this.agentFor(key, event)
    const row = buildEventRow(event, { eventId: newEventId(receivedAt), userId: key.userId, agentId: agent.id, receivedAt })
    return { row, agent, framework: agent.framework === null ? event.metadata?.tool ?? null : null }
  }

  /** The event's agent; both callers have already checked that an unbound key names one. */
  private async agentFor(key: KeyIdentity, event: IncomingEvent): Promise<AgentRef> {
    if (key.agentId !== null) {
      const bound = await this.resolveCached(key.userId, key.agentId)
      if (bound.kind === 'forbidden') throw forbidden('key_agent_not_owned')
      const ref = event.agentId
      if (ref !== undefined && ref !== bound.agent.id && ref !== bound.agent.snsName && ref !== bound.agent.displayName) {
        throw forbidden('key_bound_to_other_agent')
      }
      if (bound.kind === 'deleted') throw agentDeleted()
      return bound.agent
    }
    const resolution = await this.resolveCached(key.userId, event.agentId!)
    if (resolution.kind === 'forbidden') throw forbidden(resolution.reason)
    if (resolution.kind === 'deleted') throw agentDeleted()
    return resolution.agent
  }

  /** Resolution through the LRU; concurrent misses for one name share one Postgres round trip. */
  private async resolveCached(ownerId: string, ref: string): Promise<Resolution> {
    const cacheKey = `${ownerId}\u0000${ref}`
    const cached = this.agentCache.get(cacheKey)
    if (cached) return cached
    let pending = this.resolving.get(cacheKey)
    if (!pending) {
      const started = this.agentGeneration
      pending = this.agents.resolve(ownerId, ref).then((r) => {
        if (started === this.agentGeneration) this.agentCache.set(cacheKey, r)
        return r
      }).finally(() => {
        if (this.resolving.get(cacheKey) === pending) this.resolving.delete(cacheKey)
      })
      this.resolving.set(cacheKey, pending)
    }
    return pending
  }

  private recordActivity(key: KeyIdentity, prepared: Prepared[]): void {
    const now = Date.now()
    if (prepared.length === 0) return
    // Test events from the dashboard carry no key (keyId is empty).
    if (key.keyId) this.activity.keyUsed(key.keyId, now)
    this.activity.eventsAccepted(key.userId, now, prepared.length)
    let last = ''
    for (const p of prepared) {
      this.activity.agentSeen(p.agent.id, now, p.framework)
      if (p.agent.id !== last) this.onAgentActive(key.userId, p.agent.id)
      last = p.agent.id
    }
  }
}

function ackOf(row: EventRow): EventAck {
  return { id: row.event_id, accepted: true, agentId: row.agent_id, eventId: row.event_id }
}

function resultOf(err: HttpError): BatchResult {
  return { status: err.statusCode, ...err.body() }
}
