import type { ServerResponse } from 'node:http'
import type { DashboardEvent } from '../domain/dashboard-event.ts'
import { agentOf } from '../domain/dashboard.ts'
import { compareEntries, eventMatches, eventOfLine, formatLiveId, type LiveId } from '../domain/live-events.ts'
import type { SearchFilters } from '../domain/search-filters.ts'
import type { LiveBatch } from './live-hub.ts'

export interface LiveStreamOptions {
  /** Bytes a stream may have waiting for its reader before events are dropped (and a gap told). */
  bufferBytes: number
  /** A comment line this often keeps proxies and the reader's timeouts from closing an idle stream (ms). */
  heartbeatMs: number
}

/** Each batch's events decoded once, however many streams of its user this instance holds. */
const decoded = new WeakMap<LiveBatch, DashboardEvent[]>()
function eventsOf (batch: LiveBatch): DashboardEvent[] {
  let events = decoded.get(batch)
  if (!events) {
    events = batch.lines.map(eventOfLine)
    decoded.set(batch, events)
  }
  return events
}

/**
 * One open live tail (GET /v1/me/events/stream) on its response: writes the user's matching events
 * as Server-Sent Events (`id:` and `data:` one event as GET /v1/me/events shows it), a comment as
 * heartbeat, and, when the reader falls behind by more than `bufferBytes`, drops events instead of
 * buffering them; once the reader has caught up it is told what it missed (`event: gap`). Ingestion
 * never waits for a stream: a batch is written or counted as missed at once.
 *
 * Until `start` is called (after the replay of a resumed stream), batches are held, then sent in
 * order without those the replay already sent.
 */
export class LiveStream {
  private held: LiveBatch[] | null = []
  /** The newest batch sent (or skipped), so that a batch that came both ways is sent once. */
  private lastEntry: string | null = null
  private missed: { count: number; first: string; last: string } | null = null
  private readonly heartbeat: NodeJS.Timeout
  /** Batches waiting while the names of agents new to this stream are looked up. */
  private waiting: LiveBatch[] | null = null
  closed = false

  constructor (
    private readonly res: ServerResponse,
    private readonly filters: SearchFilters,
    private names: ReadonlyMap<string, string>,
    private readonly namesOf: () => Promise<ReadonlyMap<string, string>>,
    private readonly opts: LiveStreamOptions,
  ) {
    this.heartbeat = setInterval(() => {
      if (!this.overBudget()) this.res.write(': heartbeat\n\n')
    }, opts.heartbeatMs)
    this.heartbeat.unref()
    res.on('drain', () => this.drained())
  }

  /** A batch from the hub: held until start, else written now. */
  push (batch: LiveBatch): void {
    if (this.closed) return
    if (this.held) this.held.push(batch)
    else this.deliver(batch, 0)
  }

  /** Replays what was missed since `after`, then the batches held meanwhile; from then on batches go out as they come. */
  start (replay: LiveBatch[], after: LiveId | null): void {
    for (const batch of replay) this.deliver(batch, after && batch.entry === after.entry ? after.index + 1 : 0)
    const held = this.held ?? []
    this.held = null
    for (const batch of held) this.deliver(batch, 0)
  }

  /** Tells the reader that events before these were dropped from the replay window: how many is unknown. */
  windowPassed (after: LiveId): void {
    this.write(`event: gap\ndata: ${JSON.stringify({ missed: null, after: formatLiveId(after) })}\n\n`)
  }

  write (text: string): void {
    if (!this.closed) this.res.write(text)
  }

  close (): void {
    if (this.closed) return
    this.closed = true
    clearInterval(this.heartbeat)
    this.res.end()
  }

  private overBudget (): boolean {
    return this.res.writableLength > this.opts.bufferBytes
  }

  private deliver (batch: LiveBatch, from: number): void {
    if (this.closed) return
    if (this.lastEntry !== null && compareEntries(batch.entry, this.lastEntry) <= 0) return
    if (this.waiting) {
      this.waiting.push(batch)
      return
    }
    const events = eventsOf(batch)
    if (events.some((e) => !this.names.has(e.agentId))) {
      // An agent created after the stream opened: its name first, then this batch and those after it.
      this.waiting = [batch]
      void this.namesOf().then((names) => { this.names = names }, () => {}).finally(() => {
        const waiting = this.waiting ?? []
        this.waiting = null
        for (const [i, b] of waiting.entries()) this.send(b, i === 0 ? from : 0)
      })
      return
    }
    this.send(batch, from)
  }

  private send (batch: LiveBatch, from: number): void {
    if (this.closed) return
    if (this.lastEntry !== null && compareEntries(batch.entry, this.lastEntry) <= 0) return
    this.lastEntry = batch.entry
    const events = eventsOf(batch)
    for (let i = from; i < events.length; i++) {
      const e = events[i]!
      if (!eventMatches(e, this.filters)) continue
      const id = formatLiveId({ entry: batch.entry, index: i })
      if (this.overBudget()) {
        if (this.missed) {
          this.missed.count++
          this.missed.last = id
        } else {
          this.missed = { count: 1, first: id, last: id }
        }
        continue
      }
      this.res.write(`id: ${id}\ndata: ${JSON.stringify({ ...e, agent: agentOf(this.names, e.agentId) })}\n\n`)
    }
  }

  private drained (): void {
    if (!this.missed || this.closed) return
    const { count, first, last } = this.missed
    this.missed = null
    this.res.write(`event: gap\ndata: ${JSON.stringify({ missed: count, first, last })}\n\n`)
  }
}
