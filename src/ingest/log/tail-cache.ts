import type { Entry } from './entry-codec.ts'

/** A committed entry as the tail keeps it: with the bytes it takes on disk. */
export type TailEntry = Entry & { bytes: number }

/**
 * The newest committed entries, kept in memory so the shipper need not read back and decode what was
 * just written. Always a contiguous run ending at the newest commit: dropped whole when it grows past
 * `maxBytes` or when a commit leaves a hole (the shipper then reads the disk), and kept again once
 * the shipper has caught up.
 */
export class TailCache {
  private list: TailEntry[] = []
  private size = 0
  private off = false

  constructor (private readonly maxBytes: number) {}

  /** The entries kept, in position order. */
  get entries (): readonly TailEntry[] { return this.list }

  /** Whether a read from `position` can be served from memory. */
  holds (position: number): boolean {
    const head = this.list[0]
    return head !== undefined && head.key <= position
  }

  /** Keeps a newly committed entry (unless the tail is off). */
  keep (entry: TailEntry): void {
    if (this.off) return
    this.list.push(entry)
    this.size += entry.bytes
    if (this.size > this.maxBytes) this.drop()
  }

  /** Stops keeping entries until the shipper has caught up (see shipped). */
  drop (): void {
    this.list = []
    this.size = 0
    this.off = true
  }

  /**
   * Every row up to `shipped` has shipped: the entries wholly below it are let go, and a tail that
   * was dropped is kept again once `caughtUp` (nothing committed or under way is unshipped).
   */
  shipped (shipped: number, caughtUp: boolean): void {
    let done = 0
    for (const e of this.list) {
      if (e.key + e.rows - 1 > shipped) break
      this.size -= e.bytes
      done++
    }
    if (done > 0) this.list.splice(0, done)
    if (this.off && caughtUp) this.off = false
  }
}
