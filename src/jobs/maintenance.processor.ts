import type { Job } from 'bullmq'
import type { MaintenanceJobData } from './maintenance.queue.ts'

export interface MaintenanceTasks {
  copyNames(): Promise<unknown>
  cleanPostgres(): Promise<unknown>
}

/** The thin processor: one job, one task. */
export function maintenanceProcessor (tasks: MaintenanceTasks) {
  return async (job: Job<MaintenanceJobData>): Promise<unknown> => {
    return job.data.kind === 'names' ? tasks.copyNames() : tasks.cleanPostgres()
  }
}
