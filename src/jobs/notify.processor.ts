import { DelayedError, type Job } from 'bullmq'
import type { NotificationService } from '../services/notification-service.ts'
import { SWEEP_GRACE_MS, type NotifyJobData } from './notify.queue.ts'

/** The thin processor: a delivery's attempt (delaying the job until the next one when it failed), or the sweep. */
export function notifyProcessor (service: NotificationService) {
  return async (job: Job<NotifyJobData>, token?: string): Promise<unknown> => {
    if (job.data.kind === 'sweep') return service.sweep(SWEEP_GRACE_MS)
    const attempt = await service.attempt(job.data.deliveryId)
    if (attempt.retryInMs === null) return attempt.outcome
    await job.moveToDelayed(Date.now() + attempt.retryInMs, token)
    // BullMQ's way of ending a job that moved itself to the delayed set: neither failed nor completed.
    throw new DelayedError()
  }
}
