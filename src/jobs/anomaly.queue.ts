import type { JobsOptions } from 'bullmq'

/**
 * The anomaly queue's contract. Two kinds of job:
 * - `tick`: every ANOMALY_EVERY_MS, from a job scheduler (upserted, so restarts and several
 *   processes never duplicate it): evaluates every recently active user.
 * - `agent`: a debounced check of one agent after it sent events, at most one per agent per minute.
 */
export const ANOMALY_QUEUE = 'anomaly'
export const TICK_SCHEDULER_ID = 'anomaly-tick'
export const AGENT_CHECK_DEBOUNCE_MS = 60_000

export type AnomalyJobData =
  | { kind: 'tick' }
  | { kind: 'agent'; userId: string; agentId: string }

export const ANOMALY_JOB_OPTIONS: JobsOptions = {
  attempts: 3,
  backoff: { type: 'exponential', delay: 5_000 },
  removeOnComplete: { count: 1000 },
  removeOnFail: { count: 1000 },
}

export function agentCheckOptions (agentId: string): JobsOptions {
  return { ...ANOMALY_JOB_OPTIONS, deduplication: { id: `agent:${agentId}`, ttl: AGENT_CHECK_DEBOUNCE_MS } }
}
