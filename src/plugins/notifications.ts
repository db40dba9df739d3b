import fp from 'fastify-plugin'
import type { Queue } from 'bullmq'
import { NotificationChannels, type ChannelsOptions } from '../services/notification-channels.ts'
import { NotificationPublisher, type PublisherOptions } from '../services/notification-publisher.ts'
import { NotificationSender } from '../services/notification-sender.ts'
import { NotificationWorker, type WorkerOptions } from '../services/notification-worker.ts'
import { NOTIFY_JOB_OPTIONS, NOTIFY_QUEUE, SWEEP_EVERY_MS, SWEEP_SCHEDULER_ID, deliveryQueue, type NotifyJobData } from '../jobs/notify.queue.ts'
import { notifyProcessor } from '../jobs/notify.processor.ts'

declare module 'fastify' {
  interface FastifyInstance {
    notifications: Notifications
    notifyQueue: Queue<NotifyJobData>
  }
}

export type NotificationOptions = ChannelsOptions & PublisherOptions & WorkerOptions & {
  /** Attempts this process makes at once (NOTIFY_CONCURRENCY). */
  concurrency?: number
}

/**
 * Notifications as the app reaches them: the channels API (the routes), and by name what the plugin
 * runs (publishing from the repositories' listeners, an attempt and the sweep from the notify jobs,
 * the sealing of stored secrets at start), for tools and tests.
 */
export interface Notifications {
  channels: NotificationChannels
  publish: NotificationPublisher['publish']
  sweep: NotificationPublisher['sweep']
  attempt: NotificationWorker['attempt']
  sealStoredSecrets: NotificationChannels['sealStoredSecrets']
}

/**
 * Notification channels on the notify queue: every role publishes (alert and cluster changes become
 * deliveries) and serves the channels API; the worker role makes the attempts and runs the sweep.
 * Built in the order they need each other: the queue, the publisher (the one that queues), the
 * worker and the channels API, then the queue's worker.
 */
export default fp(async function notifications (app, opts: NotificationOptions) {
  const queue = app.queues.queue<NotifyJobData>({ name: NOTIFY_QUEUE, defaultJobOptions: NOTIFY_JOB_OPTIONS })
  const publisher = new NotificationPublisher(app.channels, app.alerts, app.agents, deliveryQueue(queue), opts, app.log)
  const sender = new NotificationSender({ allowPrivateNetworks: opts.allowPrivateNetworks })
  const worker = new NotificationWorker(app.channels, sender, opts, app.log)
  const channels = new NotificationChannels(app.channels, publisher, opts, app.log)
  // Before any delivery: credentials stored in clear, or under a previous key, are encrypted with SECRETS_KEY.
  await channels.sealStoredSecrets(app.db)
  await app.queues.work(queue, {
    processor: notifyProcessor(worker, publisher),
    // Attempts wait on receivers (up to 5 s each), not on this process: enough at once that a few
    // receivers that hang (a slot each for 5 s) do not hold back everyone else's notifications.
    concurrency: opts.concurrency ?? 50,
    schedules: [{ id: SWEEP_SCHEDULER_ID, everyMs: SWEEP_EVERY_MS, name: 'sweep', data: { kind: 'sweep' } }],
  })
  app.alerts.onStateChange(publisher.onAlertStateChange)
  app.errorClusters.onAnnounced(publisher.onClustersAnnounced)
  app.decorate('notifications', {
    channels,
    publish: (userId, event) => publisher.publish(userId, event),
    sweep: (graceMs) => publisher.sweep(graceMs),
    attempt: (deliveryId) => worker.attempt(deliveryId),
    sealStoredSecrets: (db) => channels.sealStoredSecrets(db),
  } satisfies Notifications)
  app.decorate('notifyQueue', queue)
  // Waits for attempts in flight; the queues (registered earlier) close after this.
  app.addHook('onClose', async () => { await sender.close() })
}, { name: 'notifications', dependencies: ['repositories', 'queues'] })
