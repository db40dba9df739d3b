import type { FastifyBaseLogger } from 'fastify'
import { EVENT_TYPES, TEST_EVENT, pagerDutyEvent, retryDelayMs, slackMessage, type NotificationEvent } from '../domain/notifications.ts'
import { signedHeaders } from '../domain/standard-webhooks.ts'
import type { Channel, ChannelsRepository, Delivery } from '../storage/channels-repository.ts'
import type { NotificationSender, OutgoingRequest } from './notification-sender.ts'

export interface WorkerOptions {
  pagerdutyEventsUrl: string
}

/** What became of one attempt (or of a job that found nothing to attempt), and when to try again (retrying only). */
export interface Attempt {
  outcome: 'delivered' | 'retrying' | 'failed' | 'skipped' | 'gone' | 'done'
  retryInMs: number | null
}

/** How long since an instant, in words: minutes under an hour, else hours. */
function durationSince (fromIso: string, now: number): string {
  const h = (now - Date.parse(fromIso)) / 3_600_000
  return h < 1 ? `${Math.max(1, Math.round(h * 60))} min` : `${h.toFixed(1)} h`
}

/**
 * The delivery worker: one attempt of a queued delivery, sent with the notification sender, its
 * result recorded on the delivery; when to try again is the caller's (the notify processor delays
 * the job). It queues nothing itself.
 */
export class NotificationWorker {
  constructor (
    private readonly channels: Pick<ChannelsRepository, 'forAttempt' | 'skip' | 'recordAttempt' | 'markSucceeded' | 'disableAfterRun'>,
    private readonly sender: Pick<NotificationSender, 'send'>,
    private readonly opts: WorkerOptions,
    private readonly log: FastifyBaseLogger,
    private readonly now: () => number = Date.now,
  ) {}

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
    if (status !== 'delivered') {
      // The user sees each attempt in the channel's deliveries; the operator, a line: a retry at info,
      // a delivery given up at warn (a test's at info: the user is looking at it).
      const line = { channel: channel.id, kind: channel.kind, delivery: deliveryId, event: event.type, attempt: attemptNo, maxAttempts: delivery.maxAttempts, statusCode: result.statusCode, error: result.error, retryInMs }
      if (status === 'retrying') this.log.info(line, 'notification delivery failed; it will be retried')
      else if (isTest) this.log.info(line, 'notification test delivery failed')
      else this.log.warn(line, 'notification delivery failed for good')
    }
    if (status === 'delivered') await this.channels.markSucceeded(channel.id)
    if (status === 'failed' && !isTest && !result.permanent) await this.disableAfterRun(channel, after, result.error)
    return { outcome: status, retryInMs }
  }

  private async disableAfterRun (channel: Channel, delivery: Delivery, lastError: string | null): Promise<void> {
    const since = delivery.firstAttemptAt ?? delivery.createdAt
    const reason = `every attempt for ${durationSince(since, this.now())} failed (${delivery.attempts} attempts; last: ${lastError ?? 'unknown'}); ` +
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
    // The new secret first, then a rotated-out one while it still signs (the repository reads it only until then).
    const secrets = channel.previousSigningSecret !== null && Date.parse(channel.previousSecretUntil!) > this.now()
      ? [channel.signingSecret!, channel.previousSigningSecret]
      : [channel.signingSecret!]
    return { url: channel.url!, headers: { ...signedHeaders(secrets, deliveryId, Math.floor(this.now() / 1000), body) }, body }
  }
}
