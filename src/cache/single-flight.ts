/**
 * Concurrent calls for one key share one run of the work: the first starts it, the others get the same
 * promise until it settles. The one place the service coalesces concurrent misses (response caches,
 * shared lookups, upstream fetches).
 */
export class SingleFlight<T> {
  private readonly running = new Map<string, Promise<T>>()

  run (key: string, work: () => Promise<T>): Promise<T> {
    const current = this.running.get(key)
    if (current) return current
    const started = work().finally(() => {
      if (this.running.get(key) === started) this.running.delete(key)
    })
    this.running.set(key, started)
    return started
  }

  /** Lets the next call for the keys matching `which` start a new run (a run under way still settles for its callers). */
  forget (which: (key: string) => boolean = () => true): void {
    for (const key of [...this.running.keys()]) if (which(key)) this.running.delete(key)
  }
}
