import { pino } from 'pino'
import type { FastifyBaseLogger } from 'fastify'
import { EVENT_TYPES, type ChannelKind, type NotificationEvent } from '../../src/domain/notifications.ts'
import type { AttemptResult, NotificationSender, OutgoingRequest } from '../../src/services/notification-sender.ts'
import type { DeliveryQueue } from '../../src/services/notification-publisher.ts'
import type { AttemptRecord, Channel, ChannelsRepository, Delivery } from '../../src/storage/channels-repository.ts'

/** A clock the test moves by hand. */
export class FakeClock {
  constructor (public ms = Date.parse('2026-03-01T12:00:00.000Z')) {}
  readonly now = () => this.ms
  get iso () { return new Date(this.ms).toISOString() }
}

export function channelOf (fields: Partial<Channel> & { kind: ChannelKind }, clock: FakeClock): Channel {
  return {
    id: `chan-${Math.random().toString(36).slice(2, 10)}`,
    userId: 'user-1',
    label: '',
    url: fields.kind === 'pagerduty' ? null : 'https://hooks.example.com/x',
    routingKey: fields.kind === 'pagerduty' ? 'routing-key-1' : null,
    signingSecret: fields.kind === 'webhook' ? 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' : null,
    previousSigningSecret: null,
    previousSecretUntil: null,
    unreadable: null,
    events: [...EVENT_TYPES],
    enabled: true,
    disabledReason: null,
    disabledAt: null,
    lastSuccessAt: null,
    createdAt: clock.iso,
    updatedAt: clock.iso,
    ...fields,
  }
}

type Stored = { delivery: Delivery; event: NotificationEvent; eventKey: string }

/**
 * The channels repository's delivery side in memory, with the same rules as the Postgres one: a
 * delivery unique per channel and key, attempts counted on the row, a channel disabled only when
 * nothing reached it since the run began. Every write is also kept in `calls`.
 */
export class FakeChannels implements Pick<ChannelsRepository,
  'subscribed' | 'addDelivery' | 'overdue' | 'forAttempt' | 'skip' | 'recordAttempt' | 'markSucceeded' | 'disableAfterRun'> {
  readonly channels = new Map<string, Channel>()
  readonly deliveries = new Map<string, Stored>()
  readonly calls: { method: string; args: unknown[] }[] = []

  constructor (private readonly clock: FakeClock) {}

  add (channel: Channel): Channel {
    this.channels.set(channel.id, channel)
    return channel
  }

  /** Stores a delivery as addDelivery would, with its event as given (any payload a row may hold). */
  store (channelId: string, id: string, event: NotificationEvent, fields: Partial<Delivery> = {}): Delivery {
    const delivery: Delivery = {
      id,
      channelId,
      event: event.type,
      status: 'pending',
      attempts: 0,
      maxAttempts: 8,
      lastStatusCode: null,
      lastError: null,
      lastResponse: null,
      createdAt: this.clock.iso,
      firstAttemptAt: null,
      lastAttemptAt: null,
      nextAttemptAt: null,
      finishedAt: null,
      ...fields,
    }
    this.deliveries.set(id, { delivery, event, eventKey: id })
    return delivery
  }

  calledWith (method: string) {
    return this.calls.filter((c) => c.method === method).map((c) => c.args)
  }

  async subscribed (userId: string, eventType: string): Promise<Channel[]> {
    return [...this.channels.values()].filter((c) => c.userId === userId && c.enabled && (c.events as string[]).includes(eventType))
  }

  async addDelivery (channelId: string, d: { id: string; eventKey: string; event: NotificationEvent; maxAttempts: number }): Promise<Delivery | null> {
    this.calls.push({ method: 'addDelivery', args: [channelId, d] })
    if ([...this.deliveries.values()].some((s) => s.delivery.channelId === channelId && s.eventKey === d.eventKey)) return null
    const delivery = this.store(channelId, d.id, d.event, { maxAttempts: d.maxAttempts })
    this.deliveries.get(d.id)!.eventKey = d.eventKey
    return { ...delivery }
  }

  async overdue (graceMs: number, limit: number): Promise<string[]> {
    return [...this.deliveries.values()]
      .filter(({ delivery: d }) => ['pending', 'retrying'].includes(d.status) && Date.parse(d.nextAttemptAt ?? d.createdAt) < this.clock.ms - graceMs)
      .slice(0, limit)
      .map(({ delivery }) => delivery.id)
  }

  async forAttempt (deliveryId: string) {
    const stored = this.deliveries.get(deliveryId)
    const channel = stored && this.channels.get(stored.delivery.channelId)
    return stored && channel ? { delivery: { ...stored.delivery }, event: stored.event, channel: { ...channel } } : null
  }

  async skip (deliveryId: string, reason: string): Promise<void> {
    this.calls.push({ method: 'skip', args: [deliveryId, reason] })
    const d = this.deliveries.get(deliveryId)!.delivery
    Object.assign(d, { status: 'skipped', lastError: reason, nextAttemptAt: null, finishedAt: this.clock.iso })
  }

  async recordAttempt (deliveryId: string, a: AttemptRecord): Promise<Delivery> {
    this.calls.push({ method: 'recordAttempt', args: [deliveryId, a] })
    const d = this.deliveries.get(deliveryId)!.delivery
    Object.assign(d, {
      attempts: d.attempts + 1,
      status: a.status,
      lastStatusCode: a.statusCode,
      lastError: a.error,
      lastResponse: a.response,
      firstAttemptAt: d.firstAttemptAt ?? this.clock.iso,
      lastAttemptAt: this.clock.iso,
      nextAttemptAt: a.retryInMs === null ? null : new Date(this.clock.ms + a.retryInMs).toISOString(),
      finishedAt: a.status === 'retrying' ? null : this.clock.iso,
    })
    return { ...d }
  }

  async markSucceeded (channelId: string): Promise<void> {
    this.calls.push({ method: 'markSucceeded', args: [channelId] })
    this.channels.get(channelId)!.lastSuccessAt = this.clock.iso
  }

  async disableAfterRun (channelId: string, failingSince: string, reason: string): Promise<boolean> {
    this.calls.push({ method: 'disableAfterRun', args: [channelId, failingSince, reason] })
    const c = this.channels.get(channelId)!
    if (!c.enabled || (c.lastSuccessAt !== null && Date.parse(c.lastSuccessAt) >= Date.parse(failingSince))) return false
    Object.assign(c, { enabled: false, disabledReason: reason, disabledAt: this.clock.iso })
    return true
  }
}

/** The notify queue: what was queued, in order; `failing` makes every enqueue throw. */
export class FakeQueue implements DeliveryQueue {
  readonly enqueued: string[] = []
  failing: Error | null = null

  async enqueue (deliveryId: string): Promise<void> {
    if (this.failing) throw this.failing
    this.enqueued.push(deliveryId)
  }
}

/** The sender: keeps each request and answers from a script (then `ok`). */
export class FakeSender implements Pick<NotificationSender, 'send'> {
  readonly requests: OutgoingRequest[] = []
  constructor (private readonly script: Partial<AttemptResult>[] = []) {}

  async send (req: OutgoingRequest): Promise<AttemptResult> {
    this.requests.push(req)
    const next = this.script.shift() ?? {}
    const ok = next.ok ?? true
    return { ok, statusCode: ok ? 200 : null, error: ok ? null : 'failed', response: ok ? 'ok' : null, permanent: false, ...next }
  }
}

/** A logger whose lines are kept, parsed. */
export function recordingLog (): { log: FastifyBaseLogger; lines: { level: number; msg: string; [k: string]: unknown }[] } {
  const lines: { level: number; msg: string }[] = []
  const sink = { write: (line: string) => { lines.push(JSON.parse(line)) } }
  return { log: pino({ level: 'trace' }, sink) as unknown as FastifyBaseLogger, lines }
}

/** pino's level numbers, by name. */
export const LEVEL = { info: 30, warn: 40, error: 50 } as const
