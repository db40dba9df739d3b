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

/**
 * One chunk of a user's replay stream after `entry` (`inclusive`: that entry too, read up to its
 * event `index`), oldest first.
 */
export type ReplayRead = (entry: string, count: number, inclusive: boolean, index: number) => Promise<{ batches: LiveBatch[]; complete: boolean }>

/** The user's agents as the stream shows them: names (deleted agents' too) and the deleted ones, whose events are left out. */
export interface StreamAgents {
  names: ReadonlyMap<string, string>
  hidden: ReadonlySet<string>
}

/**
 * How many times `bufferBytes` of batches may queue behind one under way: two parallel requests of
 * 500 events of a few KB each are about 2-3 MB, over ten times the default buffer.
 */
const QUEUED_BUFFERS = 16

/** Batches read from the replay stream at a time while resuming. */
const REPLAY_CHUNK = 8

/** What a batch's lines weigh against `bufferBytes` (UTF-16 units, as their length counts). */
function linesLength (batch: LiveBatch): number {
  let n = 0
  for (const line of batch.lines) n += line.length
  return n
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
 * never waits for a stream: a batch is written, queued or counted as missed at once. A batch that
 * finds the reader within `bufferBytes` is written up to that much unread, and its rest once the
 * reader has taken that: a batch larger than the buffer is not a slow reader. Batches that come
 * meanwhile (parallel requests; several at once after an agent's name is looked up) queue behind it,
 * the batches themselves (shared by the user's streams), up to QUEUED_BUFFERS × `bufferBytes` of
 * their lines; past that the reader is behind, and what is queued and what comes until it has caught
 * up is counted as missed. (Node writes a tick's writes to the socket only at the end of the tick, so
 * what is written in one synchronous pass is all unread at first, however fast the reader.)
 *
 * Until `start` is called (after the replay of a resumed stream), batches are held, then sent in
 * order without those the replay already sent. The replay is paced by the reader: read from Redis a
 * chunk at a time and written only while less than `bufferBytes` is waiting (else it waits for
 * 'drain'), so a reader that keeps up gets everything still kept, and one that does not holds at most
 * `bufferBytes` written plus `bufferBytes` of held batches (beyond, the held batches are dropped and
 * read again from Redis, where every published batch is).
 */
export class LiveStream {
  private held: LiveBatch[] | null = []
  private heldBytes = 0
  /** Counts the times held batches were dropped, so the replay knows to read Redis once more. */
  private heldDrops = 0
  /** Wakes a replay waiting for the reader (on 'drain' or close). */
  private wake: (() => void) | null = null
  /** The newest batch sent (or skipped), so that a batch that came both ways is sent once. */
  private lastEntry: string | null = null
  private missed: { count: number; first: string; last: string } | null = null
  /**
   * The rest of a batch written until the buffer was full, then the batches that came after it:
   * written on 'drain', in order. Null when nothing waits.
   */
  private queue: { batch: LiveBatch; from: number }[] | null = null
  private queuedBytes = 0
  private readonly heartbeat: NodeJS.Timeout
  /** Batches waiting while the names of agents new to this stream are looked up. */
  private waiting: LiveBatch[] | null = null
  /** Set when the user's agents changed (renamed, deleted): read again before the next batch. */
  private stale = false
  closed = false

  constructor (
    private readonly res: ServerResponse,
    private readonly filters: SearchFilters,
    private agents: StreamAgents,
    private readonly agentsOf: () => Promise<StreamAgents>,
    private readonly opts: LiveStreamOptions,
  ) {
    this.heartbeat = setInterval(() => {
      if (!this.overBudget()) this.res.write(': heartbeat\n\n')
    }, opts.heartbeatMs)
    this.heartbeat.unref()
    res.on('drain', () => this.drained())
  }

  /** The user's agents changed (a rename, a deletion): the next batch is shown with them as they are now. */
  agentsChanged (): void {
    this.stale = true
  }

  /** A batch from the hub: held until start, else written now. */
  push (batch: LiveBatch): void {
    if (this.closed) return
    if (this.held) {
      this.held.push(batch)
      this.heldBytes += linesLength(batch)
      if (this.heldBytes > this.opts.bufferBytes) {
        // A replay the reader is slow to take: these are in the replay stream, read from there later.
        this.held = []
        this.heldBytes = 0
        this.heldDrops++
      }
    } else {
      this.deliver(batch, 0)
    }
  }

  /**
   * Replays what was missed since `after`, a chunk at a time, as fast as the reader takes it, until
   * the replay stream has no more (call `start` next). Tells a gap (of unknown size) where entries
   * were dropped from the replay stream before they could be read.
   */
  async replay (read: ReplayRead, after: LiveId): Promise<void> {
    let from = after
    let inclusive = true
    for (;;) {
      const drops = this.heldDrops
      const chunk = await read(from.entry, REPLAY_CHUNK, inclusive, from.index)
      if (this.closed) return
      if (!chunk.complete) this.windowPassed(from)
      for (const batch of chunk.batches) {
        await this.replayBatch(batch, inclusive && batch.entry === after.entry ? after.index + 1 : 0)
        if (this.closed) return
        from = { entry: batch.entry, index: batch.lines.length - 1 }
        inclusive = false
      }
      // Caught up, unless held batches were dropped since this chunk was asked for.
      if (chunk.batches.length < REPLAY_CHUNK && this.heldDrops === drops) return
    }
  }

  /** From now on batches go out as they come, after those held meanwhile (without any the replay sent). */
  start (): void {
    const held = this.held ?? []
    this.held = null
    this.heldBytes = 0
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
    this.queue = null
    clearInterval(this.heartbeat)
    this.res.end()
    this.wake?.()
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
    if (this.needsAgents(batch)) {
      // An agent created after the stream opened, or one renamed or deleted: the agents as they are
      // first, then this batch and those after it.
      this.waiting = [batch]
      void this.readAgents().finally(() => {
        const waiting = this.waiting ?? []
        this.waiting = null
        for (const [i, b] of waiting.entries()) this.send(b, i === 0 ? from : 0)
      })
      return
    }
    this.send(batch, from)
  }

  /** One batch of a replay: every matching event written, waiting for the reader whenever `bufferBytes` is waiting. */
  private async replayBatch (batch: LiveBatch, from: number): Promise<void> {
    if (this.lastEntry !== null && compareEntries(batch.entry, this.lastEntry) <= 0) return
    const events = eventsOf(batch)
    if (this.needsAgents(batch)) await this.readAgents()
    this.lastEntry = batch.entry
    for (let i = from; i < events.length; i++) {
      const e = events[i]!
      if (!this.shows(e)) continue
      while (this.overBudget() && !this.closed) await new Promise<void>((resolve) => { this.wake = resolve })
      this.wake = null
      if (this.closed) return
      this.res.write(`id: ${formatLiveId({ entry: batch.entry, index: i })}\ndata: ${JSON.stringify({ ...e, agent: agentOf(this.agents.names, e.agentId) })}\n\n`)
    }
  }

  /** Whether the batch must wait for the user's agents to be read: one of its agents is new here, or they changed. */
  private needsAgents (batch: LiveBatch): boolean {
    return this.stale || eventsOf(batch).some((e) => !this.agents.names.has(e.agentId))
  }

  /** Reads the user's agents again; on a failure the ones known are kept (an unknown agent is shown by its id). */
  private async readAgents (): Promise<void> {
    // A change told while this read is under way marks the stream stale again.
    this.stale = false
    try {
      this.agents = await this.agentsOf()
    } catch {
      // Kept as they were.
    }
  }

  /** Whether an event goes to this reader: it matches the filters and its agent was not deleted (as GET /v1/me/events leaves it out). */
  private shows (e: DashboardEvent): boolean {
    return eventMatches(e, this.filters) && !this.agents.hidden.has(e.agentId)
  }

  private send (batch: LiveBatch, from: number): void {
    if (this.closed) return
    if (this.lastEntry !== null && compareEntries(batch.entry, this.lastEntry) <= 0) return
    this.lastEntry = batch.entry
    // A reader not yet told of what it missed misses this one too (the gap comes before anything newer).
    if (this.missed) return this.count(batch, from)
    if (this.queue) return this.enqueue(batch, from)
    // More than the buffer unread: the reader is behind.
    if (this.overBudget()) return this.count(batch, from)
    this.writeFrom(batch, from)
  }

  /** Queues a batch behind the rest of one under way; past QUEUED_BUFFERS × `bufferBytes` queued, the reader is behind. */
  private enqueue (batch: LiveBatch, from: number): void {
    this.queue!.push({ batch, from })
    this.queuedBytes += linesLength(batch)
    if (this.queuedBytes <= QUEUED_BUFFERS * this.opts.bufferBytes) return
    // Missed: the batches queued behind the rest (which is still written), and all until 'drain'.
    for (const queued of this.queue!.splice(1)) this.count(queued.batch, queued.from)
    this.queuedBytes = 0
  }

  /** Counts the batch's matching events from `from` as missed. */
  private count (batch: LiveBatch, from: number): void {
    const events = eventsOf(batch)
    for (let i = from; i < events.length; i++) {
      if (!this.shows(events[i]!)) continue
      const id = formatLiveId({ entry: batch.entry, index: i })
      if (this.missed) {
        this.missed.count++
        this.missed.last = id
      } else {
        this.missed = { count: 1, first: id, last: id }
      }
    }
  }

  /**
   * Writes the batch's matching events from `from` until the buffer is full; then the rest of it
   * waits at the head of the queue. Answers whether it was written whole.
   */
  private writeFrom (batch: LiveBatch, from: number): boolean {
    const events = eventsOf(batch)
    for (let i = from; i < events.length; i++) {
      const e = events[i]!
      if (!this.shows(e)) continue
      if (this.overBudget()) {
        if (this.queue) this.queue.unshift({ batch, from: i })
        else this.queue = [{ batch, from: i }]
        return false
      }
      this.res.write(`id: ${formatLiveId({ entry: batch.entry, index: i })}\ndata: ${JSON.stringify({ ...e, agent: agentOf(this.agents.names, e.agentId) })}\n\n`)
    }
    return true
  }

  private drained (): void {
    const wake = this.wake
    this.wake = null
    wake?.()
    if (this.closed) return
    // What waits, in order, until the buffer is full again (then the rest after the next 'drain').
    const queue = this.queue ?? []
    this.queue = null
    this.queuedBytes = 0
    for (let i = 0; i < queue.length; i++) {
      if (this.writeFrom(queue[i]!.batch, queue[i]!.from)) continue
      for (const next of queue.slice(i + 1)) {
        this.queue!.push(next)
        this.queuedBytes += linesLength(next.batch)
      }
      return
    }
    if (!this.missed) return
    const { count, first, last } = this.missed
    this.missed = null
    this.res.write(`event: gap\ndata: ${JSON.stringify({ missed: count, first, last })}\n\n`)
  }
}
