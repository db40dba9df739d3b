import fp from 'fastify-plugin'
import { Redis } from 'ioredis'
import type { Config } from '../config.ts'
import { AGENTS_CHANGED_TOPIC } from '../cache/agent-resolver.ts'
import { LiveHub } from './live-hub.ts'
import { LiveTail } from './live-tail.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** The live tails this instance serves (GET /v1/me/events/stream). */
    liveTail: LiveTail
  }
}

/** How long an opening stream waits for every instance to say it publishes the user's events. */
const HANDSHAKE_MS = 1000

/**
 * The live tail (docs/api.md#live-tail): the fan-out between instances over Redis (its own subscriber
 * connection), fed by the ingestion pipeline once per accepted request, and the streams this
 * instance serves. Streams end when the instance starts closing, so that they do not hold it open.
 */
export default fp(async function live (app, opts: { redisUrl: string; live: Config['live'] }) {
  const subscriber = new Redis(opts.redisUrl, { lazyConnect: true })
  let connected = false
  subscriber.on('error', (err) => { if (connected) app.redisOutage.failed('live tail', err) })
  subscriber.on('ready', () => app.redisOutage.ready())
  await subscriber.connect()
  connected = true
  const replayMs = opts.live.replaySeconds * 1000
  const hub = new LiveHub(app.redis, subscriber, app.redisPrefix, { replayBatches: opts.live.replayBatches, replayMs, handshakeMs: HANDSHAKE_MS, publishWindowMs: opts.live.publishWindowMs }, app.log)
  await hub.start()
  app.ingestion.onAcknowledged((userId, rows) => hub.acknowledged(userId, rows))
  const tail = new LiveTail(hub, { ...opts.live, retryMs: 2000 }, app.log)
  app.decorate('liveTail', tail)
  // A renamed or deleted agent (the agent cache's invalidation, on every instance): the user's
  // streams show it as GET /v1/me/events does from their next batch on.
  app.bus.on(AGENTS_CHANGED_TOPIC, (scope) => tail.agentsChanged(scope))
  app.addHook('preClose', async () => {
    hub.close()
    tail.closeAll()
  })
  app.addHook('onClose', async () => {
    subscriber.disconnect()
  })
}, { name: 'live', dependencies: ['redis', 'ingestion'] })
