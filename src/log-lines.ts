// What log lines hold of an error, and how often a line said again and again is written.

/**
 * An error as a log line shows it: its type, code, message and (unless `stack: false`) stack, and
 * nothing else it carries (node-postgres hangs its client, with the connection's cancel key, on it).
 */
export function errorSummary (err: unknown, opts: { stack?: boolean } = {}): { type?: string; code?: string; message: string; stack?: string } {
  const e = err as { name?: unknown; code?: unknown; message?: unknown; stack?: unknown }
  return {
    ...(typeof e.name === 'string' ? { type: e.name } : {}),
    ...(typeof e.code === 'string' ? { code: e.code } : {}),
    message: typeof e.message === 'string' ? e.message : String(err),
    ...(opts.stack !== false && typeof e.stack === 'string' ? { stack: e.stack } : {}),
  }
}

/**
 * Lets a line that every request of an outage would write through at most once every `everyMs`,
 * counting the ones it holds back.
 */
export class LogThrottle {
  private at = -Infinity
  private held = 0

  constructor (private readonly everyMs: number) {}

  /** The lines held back since the last one let through, when this one goes through; else null (held back). */
  pass (): number | null {
    const now = performance.now()
    if (now - this.at < this.everyMs) {
      this.held++
      return null
    }
    this.at = now
    const held = this.held
    this.held = 0
    return held
  }
}

/** A LogThrottle per key (a step, a reason): each kind of line goes through at most once every `everyMs`. */
export class KeyedLogThrottle<K> {
  private readonly throttles = new Map<K, LogThrottle>()

  constructor (private readonly everyMs: number) {}

  /** LogThrottle.pass of `key`'s lines. */
  pass (key: K): number | null {
    let throttle = this.throttles.get(key)
    if (!throttle) this.throttles.set(key, throttle = new LogThrottle(this.everyMs))
    return throttle.pass()
  }
}
