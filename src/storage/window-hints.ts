import { LRUCache } from 'lru-cache'

/**
 * The windows a page is looked for in, below its start: an hour, a day, a week, then the whole
 * range. One agent's events are a small part of its user's, so its reads start at a day: an hour of
 * one agent rarely fills a page, and each window tried is one more query.
 */
export function widening (agentId: string | undefined): number[] {
  return agentId ? [86_400_000, 7 * 86_400_000, Infinity] : [3_600_000, 86_400_000, 7 * 86_400_000, Infinity]
}

/**
 * How far below its start the last page of a list had to look, per user, list and agent: the next
 * read of that list looks first in twice that span (at least a minute), then in the wider windows of
 * `widening`. A busy user's hour holds thousands of traces, of which a page shows 50: without the
 * hint every read of the list would group the whole hour, a cost that grows with the user's rate.
 * Only a hint: a window that holds too few groups is widened as before, so no answer depends on it.
 * Held in this process only (the most recent `max` lists).
 */
export class WindowHints {
  private readonly spans: LRUCache<string, number>

  constructor (max = 10_000) {
    this.spans = new LRUCache<string, number>({ max })
  }

  /** The windows to try for a list, narrowest first, ending with the whole range (Infinity). */
  windows (key: string, agentId: string | undefined): number[] {
    const fixed = widening(agentId)
    const span = this.spans.get(key)
    if (span === undefined) return fixed
    const first = Math.max(60_000, 2 * span)
    return [first, ...fixed.filter((w) => w > first)]
  }

  /** Remembers how far below its start a full page reached; undefined (a short page) forgets it. */
  learn (key: string, span: number | undefined): void {
    if (span === undefined) this.spans.delete(key)
    else this.spans.set(key, span)
  }
}
