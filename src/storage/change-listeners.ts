/** A listener of a repository's writes: told what changed once the write has succeeded. */
export type ChangeListener<C> = (change: C) => unknown

/**
 * The listeners a writing repository tells after each successful write (`onChanged`), so that the
 * caches of what it wrote are dropped by whoever holds them, not by every caller of the write.
 * Listeners run one after another, in the order they subscribed, and the write's promise settles
 * only once they have: a change is forgotten by the caches before the caller answers. A listener
 * that throws fails the write's call (the write itself stays done), as a failed invalidation by the
 * caller would.
 */
export class ChangeListeners<C> {
  private readonly listeners: ChangeListener<C>[] = []

  /** Subscribes a listener; the function returned unsubscribes it. */
  add (listener: ChangeListener<C>): () => void {
    this.listeners.push(listener)
    return () => {
      const i = this.listeners.indexOf(listener)
      if (i >= 0) this.listeners.splice(i, 1)
    }
  }

  /** Tells every listener, in order, waiting for each. */
  async emit (change: C): Promise<void> {
    for (const listener of [...this.listeners]) await listener(change)
  }
}
