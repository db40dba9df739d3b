import type { FastifyBaseLogger } from 'fastify'
import { newMessageId } from '../domain/ids.ts'
import { DELIVERY_ATTEMPTS, alertEvent, clusterCreatedEvent, eventKey, testEvent, type NotificationEvent } from '../domain/notifications.ts'
import type { AgentsRepository } from '../storage/agents-repository.ts'
import type { AlertStateChange, AlertsRepository } from '../storage/alerts-repository.ts'
import type { NewCluster } from '../storage/anomaly-repository.ts'
import type { Channel, ChannelsRepository, Delivery } from '../storage/channels-repository.ts'

/** The notify queue as the publisher uses it. */
export interface DeliveryQueue {
  /** Schedules the attempts of a delivery; adding one already queued changes nothing. */
  enqueue(deliveryId: string): Promise<void>
}

export interface PublisherOptions {
  /** Base address of the dashboard, for the links in events. */
  dashboardUrl: string
}

/**
 * Publishing: turns a state change into one delivery per subscribed channel (at most one per channel
 * and change: the delivery log's unique key) and queues it; the notify worker makes the attempts.
 * The only one that queues deliveries: publishing, test sends and the sweep. Postgres holds every
 * delivery, so a job lost with Redis is found again by the sweep.
 */
export class NotificationPublisher {
  constructor (
    private readonly channels: Pick<ChannelsRepository, 'subscribed' | 'addDelivery' | 'overdue'>,
    private readonly alerts: Pick<AlertsRepository, 'withOwners'>,
    private readonly agents: Pick<AgentsRepository, 'getOwned'>,
    private readonly queue: DeliveryQueue,
    private readonly opts: PublisherOptions,
    private readonly log: FastifyBaseLogger,
    private readonly now: () => number = Date.now,
  ) {}

  // Listeners of the alerts and clusters repositories (they must not throw).

  /** An alert opened or cleared: an event for each to its owner's channels. */
  readonly onAlertStateChange = async (change: AlertStateChange): Promise<void> => {
    try {
      for (const { userId, alert } of await this.alerts.withOwners(change.ids)) {
        if (alert.agentDeleted) continue
        await this.publish(userId, alertEvent(change.change, alert, alert.agent, this.opts.dashboardUrl, new Date(this.now())))
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
        await this.publish(c.userId, clusterCreatedEvent(cluster, { id: agent.id, displayName: agent.displayName }, this.opts.dashboardUrl, new Date(this.now())))
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

  /** Queues a test delivery to the channel: one attempt, also to a disabled channel, so it can be checked before enabling it. */
  async publishTest (channel: Pick<Channel, 'id' | 'kind' | 'label'>): Promise<Delivery> {
    const messageId = newMessageId()
    const event = testEvent({ id: channel.id, kind: channel.kind, label: channel.label }, this.opts.dashboardUrl, new Date(this.now()))
    // A test's key is its own message id, so it is never a duplicate.
    const delivery = await this.channels.addDelivery(channel.id, { id: messageId, eventKey: eventKey(event, messageId), event, maxAttempts: 1 })
    await this.enqueue(delivery!)
    return delivery!
  }

  /** Queues again the deliveries whose next attempt is overdue (their job was lost, or never queued). */
  async sweep (graceMs: number): Promise<number> {
    const overdue = await this.channels.overdue(graceMs, 500)
    for (const id of overdue) await this.queue.enqueue(id)
    return overdue.length
  }

  private async enqueue (delivery: Delivery): Promise<void> {
    try {
      await this.queue.enqueue(delivery.id)
    } catch (err) {
      // The delivery is in Postgres: the sweep queues it again within a few minutes.
      this.log.warn({ err, delivery: delivery.id }, 'could not queue a notification delivery; the sweep will')
    }
  }
}
