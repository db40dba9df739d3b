import fp from 'fastify-plugin'
import type { Queue } from 'bullmq'
import { AnomalyService } from '../services/anomaly-service.ts'
import { ScoreAlertsService } from '../services/score-alerts-service.ts'
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

interface AnomalyOptions { everyMs: number }

/**
 * Anomaly detection on the anomaly queue: every role enqueues debounced agent checks; the worker role
 * also runs the tick every `everyMs`.
 */
export default fp(async function anomaly (app, opts: AnomalyOptions) {
  const scoreAlerts = new ScoreAlertsService(app.scoreConfigs, app.scores, app.agents, app.alerts, app.log)
  const service = new AnomalyService(app.agents, app.alerts, app.anomalyReads, app.errorClusters, app.log, scoreAlerts)
  const queue = await app.queues.add<AnomalyJobData>({
    name: ANOMALY_QUEUE,
    defaultJobOptions: ANOMALY_JOB_OPTIONS,
    processor: anomalyProcessor(service),
    concurrency: 2,
    schedules: [{ id: TICK_SCHEDULER_ID, everyMs: opts.everyMs, name: 'tick', data: { kind: 'tick' } }],
  })

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

  app.decorate('anomaly', service)
  app.decorate('anomalyQueue', queue)
  app.decorate('agentActive', agentActive)
}, { name: 'anomaly', dependencies: ['repositories', 'queues'] })
