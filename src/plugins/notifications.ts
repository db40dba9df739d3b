import fp from 'fastify-plugin'
import type { Queue } from 'bullmq'
import { NotificationService, type DeliveryQueue, type NotificationOptions } from '../services/notification-service.ts'
import { NotificationSender } from '../services/notification-sender.ts'
import { NOTIFY_JOB_OPTIONS, NOTIFY_QUEUE, SWEEP_EVERY_MS, SWEEP_SCHEDULER_ID, deliveryJobOptions, type NotifyJobData } from '../jobs/notify.queue.ts'
import { notifyProcessor } from '../jobs/notify.processor.ts'

declare module 'fastify' {
  interface FastifyInstance {
    notifications: NotificationService
    notifyQueue: Queue<NotifyJobData>
  }
}

/**
 * Notification channels on the notify queue: every role publishes (alert and cluster changes become
 * deliveries) and serves the channels API; the worker role makes the attempts and runs the sweep.
 */
export default fp(async function notifications (app, opts: NotificationOptions) {
  const sender = new NotificationSender({ allowPrivateNetworks: opts.allowPrivateNetworks })
  // The service queues deliveries and the queue's processor calls the service: the queue is bound below.
  const bound: { queue?: Queue<NotifyJobData> } = {}
  const deliveries: DeliveryQueue = {
    async enqueue (deliveryId) {
      const job = await bound.queue!.add('deliver', { kind: 'deliver', deliveryId }, deliveryJobOptions(deliveryId))
      // add() leaves an existing job of that id as it is: one that failed for a fault of the service
      // (Postgres down, its own retries used up) goes again, with its retries.
      if (await job.isFailed()) await job.retry('failed', { resetAttemptsMade: true })
    },
  }
  const service = new NotificationService(app.channels, app.alerts, app.agents, sender, deliveries, opts, app.log)
  // Before any delivery: credentials stored in clear, or under a previous key, are encrypted with SECRETS_KEY.
  await service.sealStoredSecrets(app.db)
  const queue = await app.queues.add<NotifyJobData>({
    name: NOTIFY_QUEUE,
    defaultJobOptions: NOTIFY_JOB_OPTIONS,
    processor: notifyProcessor(service),
    // Attempts wait on receivers (up to 5 s each), not on this process.
    concurrency: 10,
    schedules: [{ id: SWEEP_SCHEDULER_ID, everyMs: SWEEP_EVERY_MS, name: 'sweep', data: { kind: 'sweep' } }],
  })
  bound.queue = queue
  app.alerts.onStateChange(service.onAlertStateChange)
  app.errorClusters.onAnnounced(service.onClustersAnnounced)
  app.decorate('notifications', service)
  app.decorate('notifyQueue', queue)
  // Waits for attempts in flight; the queues (registered earlier) close after this.
  app.addHook('onClose', async () => { await sender.close() })
}, { name: 'notifications', dependencies: ['repositories', 'queues'] })
