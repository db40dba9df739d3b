import fp from 'fastify-plugin'
import { Queue, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import { AnomalyService } from '../services/anomaly-service.ts'
import { AGENT_CHECK_DEBOUNCE_MS, ANOMALY_JOB_OPTIONS, ANOMALY_QUEUE, TICK_SCHEDULER_ID, agentCheckOptions, type AnomalyJobData } from '../jobs/anomaly.queue.ts'
import { anomalyProcessor } from '../jobs/anomaly.processor.ts'

declare module 'fastify' {
  interface FastifyInstance {
    anomaly: AnomalyService
    anomalyQueue: Queue<AnomalyJobData>
    /** Schedules a debounced check of an agent that just sent events (at most one a minute per agent). */
    agentActive: (userId: string, agentId: string) => void
  }
}

// Longest time between two checks that the tick scheduler still exists in Redis.
const SCHEDULER_CHECK_MAX_MS = 30_000

export interface QueuesOptions { redisUrl: string; prefix: string; worker: boolean; everyMs: number }

/**
 * BullMQ: the anomaly queue (every role enqueues debounced agent checks) and, in the worker role, its
 * worker and the tick scheduler. Jobs are idempotent, so a retried or duplicated job is harmless.
 */
export default fp(async function queues (app, opts: QueuesOptions) {
  const anomaly = new AnomalyService(app.agents, app.alerts, app.anomalyReads, app.errorClusters, app.log)
  const connection = new Redis(opts.redisUrl, { maxRetriesPerRequest: null })
  connection.on('error', (err) => app.log.error({ err }, 'queue Redis connection error'))
  const prefix = `${opts.prefix}bull`
  const queue = new Queue<AnomalyJobData>(ANOMALY_QUEUE, { connection, prefix, defaultJobOptions: ANOMALY_JOB_OPTIONS })
  queue.on('error', (err) => app.log.error({ err }, 'anomaly queue error'))

  // In-process debounce first, so a busy agent costs one Redis call a minute, not one per event;
  // BullMQ's deduplication then keeps it to one job a minute across instances.
  const lastEnqueued = new Map<string, number>()
  const agentActive = (userId: string, agentId: string) => {
    const now = Date.now()
    if (now - (lastEnqueued.get(agentId) ?? 0) < AGENT_CHECK_DEBOUNCE_MS) return
    lastEnqueued.set(agentId, now)
    if (lastEnqueued.size > 100_000) lastEnqueued.clear()
    // A short delay lets the rest of a burst land before the agent is evaluated.
    queue.add('agent', { kind: 'agent', userId, agentId }, { ...agentCheckOptions(agentId), delay: 1_000 })
      .catch((err) => app.log.warn({ err, agentId }, 'could not schedule an agent anomaly check; the next tick covers it'))
  }

  let worker: Worker<AnomalyJobData> | undefined
  if (opts.worker) {
    const workerConnection = new Redis(opts.redisUrl, { maxRetriesPerRequest: null })
    workerConnection.on('error', (err) => app.log.error({ err }, 'worker Redis connection error'))
    worker = new Worker<AnomalyJobData>(ANOMALY_QUEUE, anomalyProcessor(anomaly), { connection: workerConnection, prefix, concurrency: 2 })
    worker.on('failed', (job, err) => app.log.error({ err, job: job?.name, attempts: job?.attemptsMade }, 'anomaly job failed'))
    worker.on('error', (err) => app.log.error({ err }, 'anomaly worker error'))
    const upsertTick = () => queue.upsertJobScheduler(TICK_SCHEDULER_ID, { every: opts.everyMs }, { name: 'tick', data: { kind: 'tick' } })
    await upsertTick()
    // The scheduler lives only in Redis: a Redis restarted empty or flushed loses it, and ticks (silence
    // alerts, snooze ends) would stop until this process restarts. So check for it as often as it
    // ticks (at most every 30 s) and re-create it when gone; upserting is idempotent across workers.
    let checking = false
    const keepScheduler = setInterval(() => {
      if (checking) return
      checking = true
      queue.getJobScheduler(TICK_SCHEDULER_ID)
        .then(async (found) => {
          if (found) return
          await upsertTick()
          app.log.warn('the anomaly tick scheduler was missing from Redis; re-created it')
        })
        .catch((err) => app.log.warn({ err }, 'could not check the anomaly tick scheduler; trying again later'))
        .finally(() => { checking = false })
    }, Math.min(opts.everyMs, SCHEDULER_CHECK_MAX_MS))
    app.addHook('onClose', async () => {
      clearInterval(keepScheduler)
      await worker!.close()
      workerConnection.disconnect()
    })
  }

  app.decorate('anomaly', anomaly)
  app.decorate('anomalyQueue', queue)
  app.decorate('agentActive', agentActive)
  app.addHook('onClose', async () => {
    await queue.close()
    connection.disconnect()
  })
}, { name: 'queues', dependencies: ['repositories', 'redis'] })
