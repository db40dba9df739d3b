import type { Redis } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'

/**
 * Tells every instance sharing a Redis to drop cached entries (revoked keys, changed agents), so a
 * change made on one instance holds on all of them at once. In-process copies also expire on their
 * own within CACHE_TTL_MS, so a lost message delays a change by at most that long.
 */
export class InvalidationBus {
  private readonly handlers = new Map<string, ((id: string) => void)[]>()
  private readonly channel: string

  constructor (private readonly publisher: Redis, private readonly subscriber: Redis, prefix: string, log: FastifyBaseLogger) {
    this.channel = `${prefix}invalidate`
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return
      const sep = message.indexOf(':')
      const topic = message.slice(0, sep)
      const id = message.slice(sep + 1)
      for (const handler of this.handlers.get(topic) ?? []) {
        try {
          handler(id)
        } catch (err) {
          log.error({ err, topic }, 'cache invalidation handler failed')
        }
      }
    })
  }

  async start (): Promise<void> {
    await this.subscriber.subscribe(this.channel)
  }

  on (topic: string, handler: (id: string) => void): void {
    const list = this.handlers.get(topic) ?? []
    list.push(handler)
    this.handlers.set(topic, list)
  }

  async publish (topic: string, id: string): Promise<void> {
    await this.publisher.publish(this.channel, `${topic}:${id}`)
  }
}
