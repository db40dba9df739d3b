import type { FastifyBaseLogger } from 'fastify'
import { NETWORK_ERROR_CODES } from '../domain/network-errors.ts'
import { errorSummary } from '../log-lines.ts'

/** What a Redis connection reports while it cannot reach the server, in ioredis's and BullMQ's words. */
const CONNECTION_MESSAGES = /^(Connection is closed|connect ETIMEDOUT|Stream isn't writeable|read ECONNRESET)/

/** Whether an error says the connection to Redis is gone (rather than a command or a job failing). */
export function isConnectionError (err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown }
  return (typeof e.code === 'string' && NETWORK_ERROR_CODES.has(e.code)) || (typeof e.message === 'string' && CONNECTION_MESSAGES.test(e.message))
}

/**
 * A Redis outage as the log tells it: one warning when the first of this instance's Redis connections
 * (the commands, the subscribers, the queues') fails, naming the server, then nothing for every
 * reconnection attempt of every connection, then one line when one is ready again, with how long
 * it lasted and how many errors were left out. Without it an outage wrote several lines a second.
 */
export class RedisOutageLog {
  private since: number | null = null
  private leftOut = 0

  constructor (private readonly log: Pick<FastifyBaseLogger, 'warn' | 'info'>, private readonly server: string, private readonly now: () => number = Date.now) {}

  /** The address of a Redis URL as the log names it (`host:port`, never its password). */
  static serverOf (url: string): string {
    try {
      const u = new URL(url)
      return `${u.hostname}:${u.port || '6379'}`
    } catch {
      return 'Redis'
    }
  }

  /** True while an outage is under way (reported, no connection ready since). */
  get active (): boolean {
    return this.since !== null
  }

  /** A connection's error: the outage's first is logged, the rest counted. */
  failed (source: string, err: unknown): void {
    if (this.since !== null) {
      this.leftOut++
      return
    }
    this.since = this.now()
    this.log.warn({ redis: this.server, source, error: errorSummary(err, { stack: false }) },
      `Redis at ${this.server} cannot be reached: requests that need it are answered 503 until it is back; its next errors are not logged until then`)
  }

  /** A connection is ready: the outage, if any, is over. */
  ready (): void {
    if (this.since === null) return
    this.log.info({ redis: this.server, downMs: this.now() - this.since, errorsLeftOut: this.leftOut }, `Redis at ${this.server} is reachable again`)
    this.since = null
    this.leftOut = 0
  }

  /** Reports a connection's errors and readiness here. */
  watch (connection: { on(event: 'error', listener: (err: Error) => void): unknown; on(event: 'ready', listener: () => void): unknown }, source: string): void {
    connection.on('error', (err: Error) => this.failed(source, err))
    connection.on('ready', () => this.ready())
  }
}
