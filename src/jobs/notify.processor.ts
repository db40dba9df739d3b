import { DelayedError, type Job } from 'bullmq'
import type { NotificationPublisher } from '../services/notification-publisher.ts'
import type { NotificationWorker } from '../services/notification-worker.ts'
import { SWEEP_GRACE_MS, type NotifyJobData } from './notify.queue.ts'

/** The thin processor: a delivery's attempt (delaying the job until the next one when it failed), or the sweep. */
export function notifyProcessor (worker: Pick<NotificationWorker, 'attempt'>, publisher: Pick<NotificationPublisher, 'sweep'>) {
  return async (job: Job<NotifyJobData>, token?: string): Promise<unknown> => {
    if (job.data.kind === 'sweep') return publisher.sweep(SWEEP_GRACE_MS)
    const attempt = await worker.attempt(job.data.deliveryId)
    if (attempt.retryInMs === null) return attempt.outcome
    await job.moveToDelayed(Date.now() + attempt.retryInMs, token)
    // BullMQ's way of ending a job that moved itself to the delayed set: neither failed nor completed.
    throw new DelayedError()
  }
}
