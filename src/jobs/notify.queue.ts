import type { BackoffStrategy, JobsOptions } from 'bullmq'
import { retryDelayMs } from '../domain/notifications.ts'

/**
 * The notify queue's contract. Two kinds of job:
 * - `deliver`: the attempts of one delivery. Its job id is the delivery's id, so queuing a delivery
 *   again while its job exists changes nothing; it has the delivery's number of attempts, spaced by
 *   the `notify` backoff (the schedule of `retryDelayMs`).
 * - `sweep`: every SWEEP_EVERY_MS, from a job scheduler: queues again the deliveries whose next
 *   attempt is SWEEP_GRACE_MS overdue (a job lost with Redis, or never queued). Postgres holds every
 *   delivery; the queue only schedules them.
 */
export const NOTIFY_QUEUE = 'notify'
export const SWEEP_SCHEDULER_ID = 'notify-sweep'
export const SWEEP_EVERY_MS = 60_000
export const SWEEP_GRACE_MS = 300_000

export type NotifyJobData = { kind: 'deliver'; deliveryId: string } | { kind: 'sweep' }

export const NOTIFY_JOB_OPTIONS: JobsOptions = {
  attempts: 1,
  removeOnComplete: { count: 1000 },
  removeOnFail: { count: 1000 },
}

export function deliveryJobOptions (delivery: { id: string; maxAttempts: number }): JobsOptions {
  return { jobId: delivery.id, attempts: delivery.maxAttempts, backoff: { type: 'notify' } }
}

/** The `notify` backoff: BullMQ asks it how long to wait after `attemptsMade` failed attempts. */
export const notifyBackoff: BackoffStrategy = (attemptsMade) => retryDelayMs(attemptsMade)
