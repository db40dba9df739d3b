import type { JobsOptions, Queue } from 'bullmq'
import type { DeliveryQueue } from '../services/notification-publisher.ts'

/**
 * The notify queue's contract. Two kinds of job:
 * - `deliver`: the attempts of one delivery. Its job id is the delivery's id, so queuing a delivery
 *   again while its job exists changes nothing. After a failed attempt with attempts left, the same
 *   job is delayed until the next one (the schedule of `retryDelayMs`); a receiver that fails is not
 *   a failed job. BullMQ's own retries are for the service's faults (Postgres down mid-attempt).
 * - `sweep`: every SWEEP_EVERY_MS, from a job scheduler: queues again the deliveries whose next
 *   attempt is SWEEP_GRACE_MS overdue (a job lost with Redis, or never queued). Postgres holds every
 *   delivery and its attempts; the queue only schedules them.
 */
export const NOTIFY_QUEUE = 'notify'
export const SWEEP_SCHEDULER_ID = 'notify-sweep'
export const SWEEP_EVERY_MS = 60_000
export const SWEEP_GRACE_MS = 300_000

export type NotifyJobData = { kind: 'deliver'; deliveryId: string } | { kind: 'sweep' }

export const NOTIFY_JOB_OPTIONS: JobsOptions = {
  attempts: 3,
  backoff: { type: 'exponential', delay: 10_000 },
  removeOnComplete: { count: 1000 },
  removeOnFail: { count: 1000 },
}

export const deliveryJobOptions = (deliveryId: string): JobsOptions => ({ jobId: deliveryId })

/** The publisher's queue on BullMQ: a `deliver` job per delivery, its id the delivery's. */
export function deliveryQueue (queue: Queue<NotifyJobData>): DeliveryQueue {
  return {
    async enqueue (deliveryId) {
      const job = await queue.add('deliver', { kind: 'deliver', deliveryId }, deliveryJobOptions(deliveryId))
      // add() leaves an existing job of that id as it is: one that failed for a fault of the service
      // (Postgres down, its own retries used up) goes again, with its retries.
      if (await job.isFailed()) await job.retry('failed', { resetAttemptsMade: true })
    },
  }
}
