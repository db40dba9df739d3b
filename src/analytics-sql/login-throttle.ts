/**
 * Slows password guessing on the analysts' port, per client address. Each failed login doubles the
 * wait before that address's next attempt is checked (from `baseMs` up to `maxMs`); attempts sent
 * meanwhile queue one `delay` apart, so sending many at once does not check more passwords; an
 * attempt that would wait more than `maxQueueMs` is refused at once without being checked. A
 * successful login clears the address. Memory is bounded: at most `maxAddresses` are remembered (the
 * one idle longest is forgotten first) and an address idle for `forgetAfterMs` starts afresh.
 */
export interface LoginThrottleOptions {
  baseMs: number
  maxMs: number
  maxQueueMs: number
  maxAddresses: number
  forgetAfterMs: number
}

export const DEFAULT_LOGIN_THROTTLE: LoginThrottleOptions = {
  baseMs: 250,
  maxMs: 15_000,
  maxQueueMs: 60_000,
  maxAddresses: 10_000,
  forgetAfterMs: 15 * 60_000,
}

interface Entry {
  failures: number
  /** When the next attempt from the address may be checked. */
  nextAt: number
  lastAt: number
}

export class LoginThrottle {
  private readonly entries = new Map<string, Entry>()

  constructor (private readonly opts: LoginThrottleOptions = DEFAULT_LOGIN_THROTTLE, private readonly now: () => number = Date.now) {}

  /** Addresses remembered now. */
  get size (): number {
    return this.entries.size
  }

  private delay (failures: number): number {
    return Math.min(this.opts.baseMs * 2 ** Math.max(0, failures - 1), this.opts.maxMs)
  }

  private live (address: string): Entry | undefined {
    const entry = this.entries.get(address)
    if (entry && this.now() - entry.lastAt > this.opts.forgetAfterMs) {
      this.entries.delete(address)
      return undefined
    }
    return entry
  }

  /**
   * How long the attempt must wait before its password is checked (0: at once), reserving its turn;
   * null when the queue of the address is too long (refuse without checking).
   */
  admit (address: string): number | null {
    const entry = this.live(address)
    if (!entry) return 0
    const now = this.now()
    const at = Math.max(now, entry.nextAt)
    if (at - now > this.opts.maxQueueMs) return null
    // The next attempt waits its turn behind this one, as if this one fails too.
    entry.nextAt = at + this.delay(entry.failures)
    return at - now
  }

  /** Records a failed login; returns the address's failures so far. */
  failed (address: string): number {
    const now = this.now()
    let entry = this.live(address)
    if (!entry) {
      if (this.entries.size >= this.opts.maxAddresses) {
        // A Map iterates in insertion order, and each touch re-inserts: the first is the idlest.
        const idlest = this.entries.keys().next().value
        if (idlest !== undefined) this.entries.delete(idlest)
      }
      entry = { failures: 0, nextAt: now, lastAt: now }
    }
    this.entries.delete(address)
    entry.failures++
    entry.lastAt = now
    entry.nextAt = Math.max(entry.nextAt, now + this.delay(entry.failures))
    this.entries.set(address, entry)
    return entry.failures
  }

  /** A successful login clears the address's failures. */
  succeeded (address: string): void {
    this.entries.delete(address)
  }
}
