import fp from 'fastify-plugin'
import type { Queue } from 'bullmq'
import { NamesCopier } from '../storage/names-copier.ts'
import { applyRetentionTtl, cleanPostgres, type RetentionDays } from '../storage/retention.ts'
import {
  MAINTENANCE_JOB_OPTIONS, MAINTENANCE_QUEUE, NAMES_SCHEDULER_ID, RETENTION_EVERY_MS, RETENTION_SCHEDULER_ID,
  type MaintenanceJobData,
} from '../jobs/maintenance.queue.ts'
import { maintenanceProcessor, type MaintenanceTasks } from '../jobs/maintenance.processor.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** Copies changed agent names and user handles to ClickHouse; deletes expired Postgres rows. */
    maintenance: MaintenanceTasks & { queue: Queue<MaintenanceJobData> }
  }
}

interface MaintenanceOptions {
  namesEveryMs: number
  retention: RetentionDays
}

/**
 * Retention and names for analysts. At start (every role) the ClickHouse TTLs are set from the
 * retention settings; in the worker role, BullMQ schedulers copy names to ClickHouse and clean old
 * Postgres rows.
 */
export default fp(async function maintenance (app, opts: MaintenanceOptions) {
  const changed = await applyRetentionTtl(app.clickhouse, opts.retention)
  if (changed.length) app.log.info({ tables: changed, retention: opts.retention }, 'ClickHouse retention (TTL) set')
  const copier = new NamesCopier(app.db, app.clickhouse)
  const tasks: MaintenanceTasks = {
    copyNames: () => copier.copyChanged(),
    cleanPostgres: () => cleanPostgres(app.db, opts.retention),
  }
  const queue = await app.queues.add<MaintenanceJobData>({
    name: MAINTENANCE_QUEUE,
    defaultJobOptions: MAINTENANCE_JOB_OPTIONS,
    processor: maintenanceProcessor(tasks),
    concurrency: 1,
    schedules: [
      { id: NAMES_SCHEDULER_ID, everyMs: opts.namesEveryMs, name: 'names', data: { kind: 'names' } },
      { id: RETENTION_SCHEDULER_ID, everyMs: RETENTION_EVERY_MS, name: 'retention', data: { kind: 'retention' } },
    ],
  })
  app.decorate('maintenance', { ...tasks, queue })
}, { name: 'maintenance', dependencies: ['postgres', 'clickhouse', 'queues'] })
