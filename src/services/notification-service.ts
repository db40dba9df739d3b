import type { FastifyBaseLogger } from 'fastify'
import { pageOf } from '../domain/cursor.ts'
import { newMessageId } from '../domain/ids.ts'
import {
  DELIVERY_ATTEMPTS, EVENT_TYPES, TEST_EVENT, alertEvent, clusterCreatedEvent, eventKey, maskCredential, pagerDutyEvent, parseDestination, retryDelayMs, slackMessage, testEvent,
  type ChannelKind, type EventType, type NotificationEvent,
} from '../domain/notifications.ts'
import { newSigningSecret, signedHeaders } from '../domain/standard-webhooks.ts'
import { HttpError, conflict, notFound, validationFailed } from '../http-error.ts'
import type { AgentsRepository } from '../storage/agents-repository.ts'
import type { AlertStateChange, AlertsRepository } from '../storage/alerts-repository.ts'
import type { NewCluster } from '../storage/anomaly-repository.ts'
import type { Channel, ChannelChange, ChannelsRepository, Delivery } from '../storage/channels-repository.ts'
import { withPostgresLock } from '../storage/migration-lock.ts'
import { startOf } from './dashboard-service.ts'
import { destinationProblem, type NotificationSender, type OutgoingRequest } from './notification-sender.ts'

/** Channels a user may have: each event fans out to all of them. */
const MAX_CHANNELS = 20
// An arbitrary constant (next to the migration locks): one instance at a time encrypts stored secrets at start.
const SECRETS_SEALING_LOCK = 738_201_120

/** The notify queue as the service uses it. */
export interface DeliveryQueue {
  /** Schedules the attempts of a delivery; adding one already queued changes nothing. */
  enqueue(deliveryId: string): Promise<void>
}

export interface NotificationOptions {
  /** Base address of the dashboard, for the links in events. */
  dashboardUrl: string
  pagerdutyEventsUrl: string
  allowPrivateNetworks: boolean
}

export interface ChannelInput {
  kind: ChannelKind
  url?: string | undefined
  routingKey?: string | undefined
  label?: string | undefined
  events?: EventType[] | undefined
}

/** What became of one attempt (or of a job that found nothing to attempt), and when to try again (retrying only). */
export interface Attempt {
  outcome: 'delivered' | 'retrying' | 'failed' | 'skipped' | 'gone' | 'done'
  retryInMs: number | null
}

/**
 * A channel as its owner sees it: Slack URLs and PagerDuty keys grant posting, so they are masked. A
 * credential the service cannot decrypt reads as null (its deliveries say why).
 */
function presentChannel (c: Channel) {
  return {
    id: c.id,
    kind: c.kind,
    label: c.label,
    url: c.url === null ? null : c.kind === 'slack' ? maskCredential(c.url) : c.url,
    routingKey: c.routingKey === null ? null : maskCredential(c.routingKey),
    events: c.events,
    enabled: c.enabled,
    disabledReason: c.disabledReason,
    disabledAt: c.disabledAt,
    lastSuccessAt: c.lastSuccessAt,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
  }
}

/** How long since an instant, in words: minutes under an hour, else hours. */
function durationSince (fromIso: string, now: number): string {
  const h = (now - Date.parse(fromIso)) / 3_600_000
  return h < 1 ? `${Math.max(1, Math.round(h * 60))} min` : `${h.toFixed(1)} h`
}

/**
 * Notification channels and deliveries. Publishing turns a state change into one delivery per
 * subscribed channel (at most one per channel and change: the delivery log's unique key) and queues
 * it; the notify worker makes the attempts. Postgres holds every delivery, so a job lost with Redis
 * is found again by the sweep.
 */
export class NotificationService {
  constructor (
    private readonly channels: ChannelsRepository,
    private readonly alerts: AlertsRepository,
    private readonly agents: AgentsRepository,
    private readonly sender: NotificationSender,
    private readonly queue: DeliveryQueue,
    private readonly opts: NotificationOptions,
    private readonly log: FastifyBaseLogger,
  ) {}

  // The channels API.

  /** A new channel; a webhook channel's signing secret is in this answer only. */
  async create (userId: string, input: ChannelInput) {
    this.checkFields(input.kind, input, true)
    if (input.url !== undefined) await this.checkDestination(input.url)
    const signingSecret = input.kind === 'webhook' ? newSigningSecret() : null
    const channel = await this.channels.create(userId, {
      kind: input.kind,
      label: input.label ?? '',
      url: input.url ?? null,
      routingKey: input.routingKey ?? null,
      signingSecret,
      events: input.events ?? [...EVENT_TYPES],
    }, MAX_CHANNELS)
    if (!channel) throw conflict('too_many_channels', `you have ${MAX_CHANNELS} notification channels, the most allowed; delete one before adding another`)
    return signingSecret ? { ...presentChannel(channel), secret: signingSecret } : presentChannel(channel)
  }

  async list (userId: string) {
    return { channels: (await this.channels.list(userId)).map(presentChannel) }
  }

  async update (userId: string, id: string, change: ChannelChange) {
    const current = await this.owned(userId, id)
    this.checkFields(current.kind, change, false)
    if (change.url !== undefined) await this.checkDestination(change.url)
    const updated = await this.channels.update(userId, id, change)
    if (!updated) throw notFound()
    return presentChannel(updated)
  }

  async delete (userId: string, id: string): Promise<void> {
    if (!(await this.channels.delete(userId, id))) throw notFound()
  }

  /** Queues a test delivery (one attempt, also to a disabled channel, so it can be checked before enabling it). */
  async test (userId: string, id: string): Promise<Delivery> {
    const channel = await this.owned(userId, id)
    const messageId = newMessageId()
    const event = testEvent({ id: channel.id, kind: channel.kind, label: channel.label }, this.opts.dashboardUrl, new Date())
    // A test's key is its own message id, so it is never a duplicate.
    const delivery = await this.channels.addDelivery(channel.id, { id: messageId, eventKey: eventKey(event, messageId), event, maxAttempts: 1 })
    await this.enqueue(delivery!)
    return delivery!
  }

  async deliveries (userId: string, id: string, q: { limit: number; cursor?: string | undefined }) {
    await this.owned(userId, id)
    const start = startOf('deliveries', q.cursor, Date.now())
    const rows = await this.channels.deliveries(id, q.limit + 1, start.after)
    const page = pageOf('deliveries', start.asOf, rows, q.limit, (d) => ({ ms: Date.parse(d.createdAt), id: d.id }))
    return { deliveries: page.items, nextCursor: page.nextCursor }
  }

  /** The user's channel; anyone else's, like an unknown one, is a 404. */
  private async owned (userId: string, id: string): Promise<Channel> {
    const channel = await this.channels.get(userId, id)
    if (!channel) throw notFound()
    return channel
  }

  /** Each kind takes its own destination field: a URL for webhooks and Slack, a routing key for PagerDuty. */
  private checkFields (kind: ChannelKind, input: { url?: string | undefined; routingKey?: string | undefined }, creating: boolean): void {
    const wanted = kind === 'pagerduty' ? 'routingKey' : 'url'
    const other = kind === 'pagerduty' ? 'url' : 'routingKey'
    const details = []
    if (creating && input[wanted] === undefined) details.push({ path: [wanted], message: `is required for a ${kind} channel` })
    if (input[other] !== undefined) details.push({ path: [other], message: `is not used by a ${kind} channel` })
    if (details.length > 0) throw validationFailed(details)
  }

  /** A URL the sender can use: one that parses (else 400 `validation_failed`) and is public (else 400 `destination_refused`). */
  private async checkDestination (text: string): Promise<void> {
    const parsed = parseDestination(text)
    if ('problem' in parsed) throw new HttpError(400, 'validation_failed', { message: `url ${parsed.problem}`, details: [{ path: ['url'], message: parsed.problem }] })
    const problem = await destinationProblem(parsed.url, this.opts.allowPrivateNetworks)
    if (problem) throw new HttpError(400, 'destination_refused', { message: problem })
  }

  // Publishing: listeners of the alerts and clusters repositories (they must not throw).

  /** An alert opened or cleared: an event for each to its owner's channels. */
  readonly onAlertStateChange = async (change: AlertStateChange): Promise<void> => {
    try {
      for (const { userId, alert } of await this.alerts.withOwners(change.ids)) {
        if (alert.agentDeleted) continue
        await this.publish(userId, alertEvent(change.change, alert, alert.agent, this.opts.dashboardUrl, new Date()))
      }
    } catch (err) {
      this.log.error({ err, change }, 'could not publish alert notifications')
    }
  }

  /** Clusters seen for the first time: `error_cluster.created` for each. */
  readonly onClustersAnnounced = async (clusters: NewCluster[]): Promise<void> => {
    try {
      for (const c of clusters) {
        const agent = await this.agents.getOwned(c.userId, c.agentId)
        if (!agent) continue
        const cluster = {
          fingerprint: c.fingerprint,
          status: 'open' as const,
          sampleMessage: c.sample || null,
          count: c.count,
          firstSeen: new Date(c.firstSeenMs).toISOString(),
          lastSeen: new Date(c.lastSeenMs).toISOString(),
          resolvedAt: null,
        }
        await this.publish(c.userId, clusterCreatedEvent(cluster, { id: agent.id, displayName: agent.displayName }, this.opts.dashboardUrl, new Date()))
      }
    } catch (err) {
      this.log.error({ err, clusters: clusters.length }, 'could not publish error cluster notifications')
    }
  }

  /** One delivery per enabled channel of the user that takes the event, unless that channel already has it. */
  async publish (userId: string, event: NotificationEvent): Promise<Delivery[]> {
    const added: Delivery[] = []
    for (const channel of await this.channels.subscribed(userId, event.type)) {
      const id = newMessageId()
      const delivery = await this.channels.addDelivery(channel.id, { id, eventKey: eventKey(event, id), event, maxAttempts: DELIVERY_ATTEMPTS })
      if (!delivery) continue
      await this.enqueue(delivery)
      added.push(delivery)
    }
    return added
  }

  private async enqueue (delivery: Delivery): Promise<void> {
    try {
      await this.queue.enqueue(delivery.id)
    } catch (err) {
      // The delivery is in Postgres: the sweep queues it again within a few minutes.
      this.log.warn({ err, delivery: delivery.id }, 'could not queue a notification delivery; the sweep will')
    }
  }

  // The worker's side.

  /**
   * One attempt of a delivery. A failure before the last attempt leaves it `retrying` (the caller
   * schedules the next attempt `retryInMs` later); the last failure leaves it `failed`, and disables the channel when
   * nothing reached it since the delivery's first attempt: a run of failures as long as the whole
   * retry schedule (about 22 h 45 min). Test deliveries are tried once and never disable a channel.
   */
  async attempt (deliveryId: string): Promise<Attempt> {
    const found = await this.channels.forAttempt(deliveryId)
    if (!found) return { outcome: 'gone', retryInMs: null }
    const { delivery, event, channel } = found
    if (delivery.status !== 'pending' && delivery.status !== 'retrying') return { outcome: 'done', retryInMs: null }
    const isTest = event.type === TEST_EVENT
    // A row written by hand (or by a later release, rolled back) may hold something else: it is
    // finished with the reason instead of failing its job at every attempt.
    if (!isTest && !(EVENT_TYPES as readonly string[]).includes(event.type)) {
      await this.channels.skip(deliveryId, 'the stored payload is not a notification event')
      return { outcome: 'skipped', retryInMs: null }
    }
    if (!channel.enabled && !isTest) {
      await this.channels.skip(deliveryId, 'the channel was disabled before this attempt')
      return { outcome: 'skipped', retryInMs: null }
    }
    if (channel.unreadable) {
      // The key that encrypted a credential is not configured (or the stored value was altered): no
      // attempt can succeed until an operator fixes the keys, so the delivery fails now, saying why.
      // Not a fault of the destination: it does not count towards disabling the channel.
      const error = `the channel cannot be used: ${channel.unreadable}`
      this.log.error({ channel: channel.id, kind: channel.kind, delivery: deliveryId, reason: channel.unreadable }, 'a notification channel\'s stored secret cannot be decrypted; its delivery failed')
      await this.channels.recordAttempt(deliveryId, { status: 'failed', statusCode: null, error, response: null, retryInMs: null })
      return { outcome: 'failed', retryInMs: null }
    }
    const result = await this.sender.send(this.request(channel, delivery.id, event))
    const attemptNo = delivery.attempts + 1
    // A destination that cannot be used (not a URL, or refused) fails the same way every time: no retries.
    const status = result.ok ? 'delivered' : attemptNo >= delivery.maxAttempts || result.permanent ? 'failed' : 'retrying'
    const retryInMs = status === 'retrying' ? retryDelayMs(attemptNo) : null
    const after = await this.channels.recordAttempt(deliveryId, { status, statusCode: result.statusCode, error: result.error, response: result.response, retryInMs })
    if (status === 'delivered') await this.channels.markSucceeded(channel.id)
    if (status === 'failed' && !isTest && !result.permanent) await this.disableAfterRun(channel, after, result.error)
    return { outcome: status, retryInMs }
  }

  private async disableAfterRun (channel: Channel, delivery: Delivery, lastError: string | null): Promise<void> {
    const since = delivery.firstAttemptAt ?? delivery.createdAt
    const reason = `every attempt for ${durationSince(since, Date.now())} failed (${delivery.attempts} attempts; last: ${lastError ?? 'unknown'}); ` +
      'fix the destination, then enable the channel again'
    if (await this.channels.disableAfterRun(channel.id, since, reason)) {
      this.log.warn({ channel: channel.id, kind: channel.kind, reason }, 'notification channel disabled after a run of failures')
    }
  }

  /** The HTTP request of an attempt: the event as each kind of channel takes it. */
  private request (channel: Channel, deliveryId: string, event: NotificationEvent): OutgoingRequest {
    if (channel.kind === 'pagerduty') {
      return { url: this.opts.pagerdutyEventsUrl, headers: {}, body: JSON.stringify(pagerDutyEvent(event, channel.routingKey!)) }
    }
    if (channel.kind === 'slack') return { url: channel.url!, headers: {}, body: JSON.stringify(slackMessage(event)) }
    const body = JSON.stringify(event)
    // Signed per attempt: the timestamp is the attempt's, the id the same on every retry.
    return { url: channel.url!, headers: { ...signedHeaders(channel.signingSecret!, deliveryId, Math.floor(Date.now() / 1000), body) }, body }
  }

  /**
   * Encrypts with SECRETS_KEY the stored credentials still in clear (stored before encryption) or
   * under a key of SECRETS_PREVIOUS_KEYS, one instance at a time (a Postgres advisory lock): run at
   * start, it is the migration of stored credentials and the re-encryption after a key rotation.
   */
  async sealStoredSecrets (db: Parameters<typeof withPostgresLock>[0]): Promise<void> {
    const report = await withPostgresLock(db, SECRETS_SEALING_LOCK, () => this.channels.sealPending())
    if (report.sealed > 0) this.log.info({ channels: report.sealed }, 'notification channel secrets encrypted with the current SECRETS_KEY')
    for (const { id, reason } of report.unreadable) {
      this.log.error({ channel: id, reason }, 'a notification channel\'s stored secret cannot be decrypted with SECRETS_KEY or SECRETS_PREVIOUS_KEYS; its deliveries will fail')
    }
  }

  /** Queues again the deliveries whose next attempt is overdue (their job was lost, or never queued). */
  async sweep (graceMs: number): Promise<number> {
    const overdue = await this.channels.overdue(graceMs, 500)
    for (const id of overdue) await this.queue.enqueue(id)
    return overdue.length
  }
}
