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

interface AnomalyOptions {
  everyMs: number
  /** INGEST_SHIP_MIN_INTERVAL_MS: an agent check waits this long (plus a second) for its events to be shipped. */
  shipIntervalMs: number
}

/** How long a queued agent check waits on this instance's shipper for the user's acknowledged events. */
const SETTLE_TIMEOUT_MS = 10_000

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
    // An agent check reads ClickHouse: where this process acknowledged the user's events, they are
    // shipped first (as for a /v1/me read), so a busy machine's slow insert does not hide them.
    processor: anomalyProcessor(service, Date.now, async (userId) => {
      if (app.hasDecorator('shipper')) await app.shipper.waitForUser(userId, SETTLE_TIMEOUT_MS)
    }),
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
    // The delay lets the rest of a burst land, and be shipped by any instance, before the agent is evaluated.
    queue.add('agent', { kind: 'agent', userId, agentId }, { ...agentCheckOptions(agentId), delay: opts.shipIntervalMs + 1_000 })
      .catch((err) => app.log.warn({ err, agentId }, 'could not schedule an agent anomaly check; the next tick covers it'))
  }

  app.decorate('anomaly', service)
  app.decorate('anomalyQueue', queue)
  app.decorate('agentActive', agentActive)
}, { name: 'anomaly', dependencies: ['repositories', 'queues'] })
