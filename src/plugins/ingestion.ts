import fp from 'fastify-plugin'
import { ActivityRecorder } from '../storage/activity-recorder.ts'
import { IngestionService } from '../services/ingestion-service.ts'

declare module 'fastify' {
  interface FastifyInstance {
    ingestion: IngestionService
    activity: ActivityRecorder
    /** Drops cached agent resolutions here and on every other instance (after a delete or rename). */
    forgetAgents: () => Promise<void>
  }
}

/** The ingestion service and its coalesced side effects. Closes before the stores it writes to. */
export default fp(async function ingestion(app, opts: { cacheTtlMs: number; activityFlushMs: number }) {
  const activity = new ActivityRecorder(app.keys, app.agents, app.users, app.log, opts.activityFlushMs)
  activity.start()
  const service = new IngestionService(app.agents, app.eventWriter, app.rateLimiter, activity, app.log, opts.cacheTtlMs, app.agentActive)
  app.decorate('activity', activity)
  app.decorate('ingestion', service)
  app.decorate('forgetAgents', async () => {
    service.forgetAgents()
    await app.bus.publish('agents', '*')
  })
  app.bus.on('agents', () => service.forgetAgents())
  // onClose hooks run in reverse registration order: this one runs before the stores close.
  app.addHook('onClose', async () => {
    await app.eventWriter.close()
    await activity.close()
  })
}, { name: 'ingestion', dependencies: ['postgres', 'clickhouse', 'redis', 'queues'] })
