import fp from 'fastify-plugin'
import { QueueWiring } from '../jobs/queue-wiring.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** The BullMQ wiring: plugins add their queues to it; it closes them all. */
    queues: QueueWiring
  }
}

interface QueuesOptions { redisUrl: string; prefix: string; worker: boolean }

/**
 * BullMQ, wired once for every queue (anomaly, maintenance, notify): the queues in every role; workers and
 * job schedulers in the worker role. Jobs are idempotent, so a retried or duplicated job is harmless.
 */
export default fp(async function queues (app, opts: QueuesOptions) {
  const wiring = new QueueWiring({ ...opts, log: app.log, outage: app.redisOutage })
  app.decorate('queues', wiring)
  // Registered before the plugins that enqueue, so it closes after them.
  app.addHook('onClose', async () => { await wiring.close() })
}, { name: 'queues', dependencies: ['redis'] })
