/**
 * Group commit: appends that arrive while a commit is under way wait for the next one, and every
 * append waiting then is written by that one commit (one transaction, one sync). Under load many
 * requests share a commit; alone, an append is committed at once. `write` is given the waiting
 * appends in order, synchronously as it starts (nothing can join them while it computes where they
 * go); when it throws, every append it was given is refused with what it threw.
 */
export class GroupCommit<T> {
  private pending: { item: T; resolve: () => void; reject: (err: unknown) => void }[] = []
  private pendingSize = 0
  private running = false
  private idleWaiters: (() => void)[] = []

  constructor (private readonly write: (batch: T[]) => Promise<void>) {}

  /** The total size of the appends waiting for the next commit (as their callers counted it). */
  get waitingSize (): number { return this.pendingSize }
  /** Whether a commit is under way. */
  get committing (): boolean { return this.running }

  /** Resolves once no commit is under way or waiting (at once when none is). */
  idle (): Promise<void> {
    if (!this.running && this.pending.length === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  /** Resolves once `item` is committed; rejects with what its commit threw. */
  add (item: T, size: number): Promise<void> {
    this.pendingSize += size
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ item, resolve, reject })
      if (!this.running) void this.commitPending()
    })
  }

  /** Commits what waits, and again while more arrived meanwhile. */
  private async commitPending (): Promise<void> {
    this.running = true
    while (this.pending.length > 0) {
      const batch = this.pending
      this.pending = []
      this.pendingSize = 0
      try {
        await this.write(batch.map((p) => p.item))
      } catch (err) {
        for (const p of batch) p.reject(err)
        continue
      }
      for (const p of batch) p.resolve()
    }
    this.running = false
    const waiters = this.idleWaiters
    this.idleWaiters = []
    for (const resolve of waiters) resolve()
  }
}

/**
 * Items in order, grouped while a group's size stays within `maxSize` (an item larger than that is a
 * group of its own): how a commit's appends become few entries, since a store's cost per put is paid
 * per entry, not per request.
 */
export function groupUpTo<T> (items: T[], sizeOf: (item: T) => number, maxSize: number): T[][] {
  const groups: T[][] = []
  let group: T[] = []
  let size = 0
  for (const item of items) {
    if (group.length > 0 && size + sizeOf(item) > maxSize) {
      groups.push(group)
      group = []
      size = 0
    }
    group.push(item)
    size += sizeOf(item)
  }
  if (group.length > 0) groups.push(group)
  return groups
}
