import fp from 'fastify-plugin'
import { Queue, Worker } from 'bullmq'
import { Redis } from 'ioredis'
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

export interface MaintenanceOptions {
  redisUrl: string
  prefix: string
  worker: boolean
  namesEveryMs: number
  retention: RetentionDays
}

// How often the worker re-upserts its schedulers (a Redis emptied by a restart loses them).
const SCHEDULER_REFRESH_MS = 60_000

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
  const connection = new Redis(opts.redisUrl, { maxRetriesPerRequest: null })
  connection.on('error', (err) => app.log.error({ err }, 'maintenance queue Redis connection error'))
  const prefix = `${opts.prefix}bull`
  const queue = new Queue<MaintenanceJobData>(MAINTENANCE_QUEUE, { connection, prefix, defaultJobOptions: MAINTENANCE_JOB_OPTIONS })
  queue.on('error', (err) => app.log.error({ err }, 'maintenance queue error'))

  if (opts.worker) {
    const workerConnection = new Redis(opts.redisUrl, { maxRetriesPerRequest: null })
    workerConnection.on('error', (err) => app.log.error({ err }, 'maintenance worker Redis connection error'))
    const worker = new Worker<MaintenanceJobData>(MAINTENANCE_QUEUE, maintenanceProcessor(tasks), { connection: workerConnection, prefix, concurrency: 1 })
    worker.on('failed', (job, err) => app.log.error({ err, job: job?.name, attempts: job?.attemptsMade }, 'maintenance job failed'))
    worker.on('error', (err) => app.log.error({ err }, 'maintenance worker error'))
    const upsert = () => Promise.all([
      queue.upsertJobScheduler(NAMES_SCHEDULER_ID, { every: opts.namesEveryMs }, { name: 'names', data: { kind: 'names' } }),
      queue.upsertJobScheduler(RETENTION_SCHEDULER_ID, { every: RETENTION_EVERY_MS }, { name: 'retention', data: { kind: 'retention' } }),
    ])
    await upsert()
    const refresh = setInterval(() => {
      upsert().catch((err) => app.log.warn({ err }, 'could not refresh the maintenance schedulers; trying again later'))
    }, SCHEDULER_REFRESH_MS)
    app.addHook('onClose', async () => {
      clearInterval(refresh)
      await worker.close()
      workerConnection.disconnect()
    })
  }
  app.decorate('maintenance', { ...tasks, queue })
  app.addHook('onClose', async () => {
    await queue.close()
    connection.disconnect()
  })
}, { name: 'maintenance', dependencies: ['postgres', 'clickhouse', 'redis'] })
