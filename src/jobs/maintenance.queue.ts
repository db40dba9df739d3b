import type { JobsOptions } from 'bullmq'

/**
 * The maintenance queue's contract, two kinds of job, each from a job scheduler (upserted, so
 * restarts and several worker processes never duplicate it); both idempotent:
 * - `names`: copy agent names and user handles changed in Postgres to ClickHouse (every NAMES_SYNC_EVERY_MS);
 * - `retention`: delete old cleared alerts and waitlist sign-ups (hourly).
 */
export const MAINTENANCE_QUEUE = 'maintenance'
export const NAMES_SCHEDULER_ID = 'names-sync'
export const RETENTION_SCHEDULER_ID = 'retention'
export const RETENTION_EVERY_MS = 3_600_000

export type MaintenanceJobData = { kind: 'names' } | { kind: 'retention' }

export const MAINTENANCE_JOB_OPTIONS: JobsOptions = {
  attempts: 3,
  backoff: { type: 'exponential', delay: 10_000 },
  removeOnComplete: { count: 100 },
  removeOnFail: { count: 100 },
}
