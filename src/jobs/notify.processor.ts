import type { Job } from 'bullmq'
import type { AttemptOutcome, NotificationService } from '../services/notification-service.ts'
import { SWEEP_GRACE_MS, type NotifyJobData } from './notify.queue.ts'

/** A failed attempt with attempts left: thrown so that BullMQ schedules the next one after the backoff. */
export class RetryLater extends Error {
  override name = 'RetryLater'
}

/** The thin processor: a delivery's attempt, or the sweep. */
export function notifyProcessor (service: NotificationService) {
  return async (job: Job<NotifyJobData>): Promise<AttemptOutcome | number> => {
    if (job.data.kind === 'sweep') return service.sweep(SWEEP_GRACE_MS)
    const outcome = await service.attempt(job.data.deliveryId)
    if (outcome === 'retrying') throw new RetryLater(`delivery ${job.data.deliveryId} failed; the next attempt is scheduled`)
    return outcome
  }
}
