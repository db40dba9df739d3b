/**
 * The ingestion side of read-your-writes: the receive clock and the requests in flight. Every request
 * gets a receive time (the time of its event ids and rows) and counts as in flight until answered;
 * `settledBefore()` hands reads an instant at or before which every request received has been
 * answered, and no later request is stamped at or before an instant it handed out. `idle()` waits
 * until nothing is in flight (shutdown, before the log is drained).
 */
export class ReadYourWrites {
  private active = 0
  private idleWaiters: (() => void)[] = []
  /** Receive times of the requests between their receive time and their answer, with counts. */
  private readonly inFlight = new Map<number, number>()
  /** Receive times are later than this: the last instant settledBefore() handed out. */
  private receiveFloor = 0

  constructor (private readonly now: () => number = Date.now) {}

  /** A receive time for a request, later than any settledBefore() handed out, and counted in flight until `answered`. */
  receive (): number {
    this.active++
    const receivedAt = Math.max(this.now(), this.receiveFloor + 1)
    this.inFlight.set(receivedAt, (this.inFlight.get(receivedAt) ?? 0) + 1)
    return receivedAt
  }

  /** The request received at `receivedAt` was answered (accepted, refused or failed). */
  answered (receivedAt: number): void {
    const n = this.inFlight.get(receivedAt)! - 1
    if (n === 0) this.inFlight.delete(receivedAt)
    else this.inFlight.set(receivedAt, n)
    if (--this.active === 0) for (const wake of this.idleWaiters.splice(0)) wake()
  }

  /**
   * An instant such that every event this instance received at or before it has been answered:
   * acknowledged (and so in the log) or refused. A read that takes its snapshot here and then waits
   * for read-your-writes sees every row of the snapshot.
   */
  settledBefore (): number {
    const now = this.now()
    let oldest = Infinity
    for (const t of this.inFlight.keys()) if (t < oldest) oldest = t
    if (oldest <= now) return oldest - 1
    // Nothing in flight: events received from now on are stamped after this instant.
    this.receiveFloor = Math.max(this.receiveFloor, now)
    return now
  }

  /** Resolves once no request is in flight. */
  async idle (): Promise<void> {
    if (this.active > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve))
  }
}
