/**
 * Slows password guessing on the analysts' port, per client address. Each failed login doubles the
 * wait before that address's next attempt is checked (from `baseMs` up to `maxMs`); attempts sent
 * meanwhile queue as if each one before them had failed (the k-th in flight from a fresh address
 * waits baseMs·(2^(k-1) − 1), each gap capped at `maxMs`), so sending many at once checks no more
 * passwords than sending them one after another; an
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
  /** Attempts admitted and not yet settled (each is counted as a failure when spacing the next). */
  pending: number
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
    const now = this.now()
    const entry = this.touch(address, now)
    const at = Math.max(now, entry.nextAt)
    if (at - now > this.opts.maxQueueMs) return null
    // The next attempt waits its turn behind this one, as if this one and every one before it fails.
    entry.pending++
    entry.nextAt = at + this.delay(entry.failures + entry.pending)
    return at - now
  }

  /** The address's entry (a fresh one when unknown, the idlest forgotten past maxAddresses), as the most recently used. */
  private touch (address: string, now: number): Entry {
    let entry = this.live(address)
    if (!entry) {
      if (this.entries.size >= this.opts.maxAddresses) {
        // A Map iterates in insertion order, and each touch re-inserts: the first is the idlest.
        const idlest = this.entries.keys().next().value
        if (idlest !== undefined) this.entries.delete(idlest)
      }
      entry = { failures: 0, pending: 0, nextAt: now, lastAt: now }
    }
    this.entries.delete(address)
    entry.lastAt = now
    this.entries.set(address, entry)
    return entry
  }

  /** Records a failed login; returns the address's failures so far. */
  failed (address: string): number {
    const now = this.now()
    const entry = this.touch(address, now)
    entry.pending = Math.max(0, entry.pending - 1)
    entry.failures++
    entry.nextAt = Math.max(entry.nextAt, now + this.delay(entry.failures))
    return entry.failures
  }

  /** A successful login clears the address's failures. */
  succeeded (address: string): void {
    this.entries.delete(address)
  }
}
