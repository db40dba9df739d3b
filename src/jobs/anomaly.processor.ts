import type { Job } from 'bullmq'
import type { AnomalyService, EvaluationResult } from '../services/anomaly-service.ts'
import type { AnomalyJobData } from './anomaly.queue.ts'

/**
 * The thin processor: one job, one call into the anomaly service, at the job's processing time. An
 * agent check first lets `settle` make the user's acknowledged events readable.
 */
export function anomalyProcessor (service: AnomalyService, clock: () => number = Date.now, settle: (userId: string) => Promise<void> = async () => {}) {
  return async (job: Job<AnomalyJobData>): Promise<EvaluationResult> => {
    const data = job.data
    if (data.kind === 'agent') {
      await settle(data.userId)
      return service.evaluateUser(data.userId, clock(), [data.agentId])
    }
    return service.tick(clock())
  }
}
