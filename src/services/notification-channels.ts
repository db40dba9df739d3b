import type { FastifyBaseLogger } from 'fastify'
import { pageOf } from '../domain/cursor.ts'
import { EVENT_TYPES, maskCredential, parseDestination, type ChannelKind, type EventType } from '../domain/notifications.ts'
import { newSigningSecret } from '../domain/standard-webhooks.ts'
import { HttpError, conflict, notFound, validationFailed } from '../http-error.ts'
import type { Channel, ChannelChange, ChannelsRepository, Delivery } from '../storage/channels-repository.ts'
import { withPostgresLock } from '../storage/migration-lock.ts'
import { startOf } from './dashboard-service.ts'
import { destinationProblem } from './notification-sender.ts'
import type { NotificationPublisher } from './notification-publisher.ts'

/** Channels a user may have: each event fans out to all of them. */
const MAX_CHANNELS = 20
// An arbitrary constant (next to the migration locks): one instance at a time encrypts stored secrets at start.
const SECRETS_SEALING_LOCK = 738_201_120

export interface ChannelsOptions {
  allowPrivateNetworks: boolean
}

export interface ChannelInput {
  kind: ChannelKind
  url?: string | undefined
  routingKey?: string | undefined
  label?: string | undefined
  events?: EventType[] | undefined
}

/** How long a rotated-out signing secret signs beside the new one, by default (hours). */
export const PREVIOUS_SECRET_HOURS = 24

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
    previousSecretUntil: c.previousSecretUntil,
  }
}

/**
 * The channels API: a user's notification channels (create, list, change, delete), their delivery
 * log and test sends (queued by the publisher), and the sealing of stored credentials at start.
 */
export class NotificationChannels {
  constructor (
    private readonly channels: ChannelsRepository,
    private readonly publisher: Pick<NotificationPublisher, 'publishTest'>,
    private readonly opts: ChannelsOptions,
    private readonly log: FastifyBaseLogger,
  ) {}

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

  /**
   * A new signing secret for the user's webhook channel, in this answer only; the one it replaces
   * keeps signing beside it for `previousValidHours` (default 24, 0: stops at once), so receivers
   * can take the new one without refusing a delivery meanwhile. 409 for a channel of another kind.
   */
  async rotateSecret (userId: string, id: string, previousValidHours = PREVIOUS_SECRET_HOURS) {
    const current = await this.owned(userId, id)
    if (current.kind !== 'webhook') throw conflict('not_a_webhook', `channel ${id} is a ${current.kind} channel; only webhook channels sign their deliveries`)
    if (current.signingSecret === null) throw conflict('secret_unreadable', `channel ${id}'s signing secret cannot be read (${current.unreadable ?? 'unknown'}); delete the channel and create it again`)
    const secret = newSigningSecret()
    const rotated = await this.channels.rotateSecret(userId, id, current.signingSecret, secret, Date.now() + previousValidHours * 3_600_000)
    if (!rotated) throw conflict('rotated_meanwhile', `channel ${id}'s secret was rotated by another request meanwhile; rotate again if this one's secret is the one you want`)
    return { ...presentChannel(rotated), secret }
  }

  async delete (userId: string, id: string): Promise<void> {
    if (!(await this.channels.delete(userId, id))) throw notFound()
  }

  /** Queues a test delivery (one attempt, also to a disabled channel, so it can be checked before enabling it). */
  async test (userId: string, id: string): Promise<Delivery> {
    return this.publisher.publishTest(await this.owned(userId, id))
  }

  async deliveries (userId: string, id: string, q: { limit: number; cursor?: string | undefined }) {
    await this.owned(userId, id)
    const start = startOf('deliveries', q.cursor, Date.now())
    const rows = await this.channels.deliveries(id, q.limit + 1, start.after)
    const page = pageOf('deliveries', start.asOf, rows, q.limit, (d) => ({ ms: Date.parse(d.createdAt), id: d.id }))
    return { deliveries: page.items, nextCursor: page.nextCursor }
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
}
