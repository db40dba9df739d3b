import type { Redis } from 'ioredis'

/** What is logged of an outage: one warning when Redis stops answering, one line when it answers again. */
export interface OutageLog {
  warn(obj: object, msg: string): void
  info(obj: object, msg: string): void
}

/** After a failure, commands are not tried again for this long. */
const SKIP_AFTER_FAILURE_MS = 1000

/**
 * Redis for what ingestion can do without: the memory of retries (span ids, Idempotency-Key
 * records). A command that cannot be sent (the connection is not ready) or fails answers undefined
 * and the request goes on without it; for a second after a failure no command is tried, so a Redis
 * that stalls costs one request its command timeout, not every request. One warning when commands
 * start failing, one line when one succeeds again: one pair per outage, not a line per request.
 */
export class BestEffortRedis {
  private failing = false
  private skipUntil = 0

  /** `now` is the clock the pause after a failure is measured on (the tests' own clock, or the process's). */
  constructor (readonly redis: Redis, private readonly log: OutageLog, private readonly now: () => number = Date.now) {}

  /** Runs `command`, or answers undefined when Redis is out of reach or the command failed. */
  async run<R> (command: (redis: Redis) => Promise<R>): Promise<R | undefined> {
    if (this.redis.status !== 'ready' || this.now() < this.skipUntil) {
      this.failed(new Error(`Redis connection is ${this.redis.status}`))
      return undefined
    }
    try {
      const result = await command(this.redis)
      if (this.failing) {
        this.failing = false
        this.log.info({}, 'Redis answers again: retries are recognised again by every instance')
      }
      return result
    } catch (err) {
      this.failed(err)
      return undefined
    }
  }

  private failed (err: unknown): void {
    const now = this.now()
    if (now >= this.skipUntil) this.skipUntil = now + SKIP_AFTER_FAILURE_MS
    if (this.failing) return
    this.failing = true
    this.log.warn({ err }, 'Redis unreachable: re-sent spans and Idempotency-Key retries are stored again (at least once) until it is back')
  }
}
