import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis, Result } from 'ioredis'
import type { RowBytes } from '../ingest/log/entry-codec.ts'
import { compareEntries, type LiveId } from '../domain/live-events.ts'

/**
 * One accepted request's rows of one user, as every instance receives them: the id of its entry in
 * the user's replay stream (`<ms>-<seq>`: ordered per user across instances) and its ingest log
 * lines (JSONCompactEachRow, src/domain/event-line.ts).
 */
export interface LiveBatch { entry: string; lines: string[] }

export interface LiveHubOptions {
  /** Batches a user's replay stream keeps for Last-Event-ID (the newest). */
  replayBatches: number
  /** And for how long (ms): older entries are dropped. */
  replayMs: number
  /** How long an opening stream waits for every instance to know its user is watched (ms). */
  handshakeMs: number
  /**
   * How long a watched user's acknowledged requests are gathered before they go out in one call
   * (ms); 0: those of one turn of the event loop. Each call costs the instance about as much as tens
   * of events' own ingestion, so under load a window of a few ms is most of what a stream costs.
   */
  publishWindowMs?: number
}

/**
 * Appends one batch to the user's replay stream (trimmed to ARGV[2] entries and ARGV[3] ms, by
 * Redis' clock, so every instance agrees) and publishes it on the user's channel with its entry id:
 * the payload crosses the network once, and the id orders it for every reader. Each entry also names
 * the one before it ('p') and how many events that one held ('pc'; its own count is 'c', ARGV[4]),
 * so a resume from the newest entry trimmed knows whether it missed nothing: only when the reader
 * had that entry whole.
 */
const APPEND_AND_PUBLISH = `
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local prev, prevCount = '', ''
if last[1] then
  prev = last[1][1]
  local fields = last[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 'c' then prevCount = fields[i + 1] end
  end
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[2], '*', 'r', ARGV[1], 'p', prev, 'c', ARGV[4], 'pc', prevCount)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XTRIM', KEYS[1], 'MINID', tostring(now - tonumber(ARGV[3])))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PUBLISH', KEYS[2], id .. '\\n' .. ARGV[1])
return id
`

declare module 'ioredis' {
  interface RedisCommander<Context> {
    liveAppend(stream: string, channel: string, rows: Buffer, maxBatches: number, windowMs: number, count: number): Result<string, Context>
  }
}

type Listener = (batch: LiveBatch) => void

/**
 * The live tail's fan-out between instances, over one shared Redis.
 *
 * - **Who is watched.** Every instance keeps the set of users with an open stream on any instance
 *   (announced on a control channel, renewed while streams are open, and announced once more when
 *   an instance's last stream of the user closes, so that every instance goes on publishing for
 *   longer than the replay window after it and a reader that reconnects within the window misses
 *   nothing; an instance that starts asks, and is told of the users streaming and of those whose
 *   last stream closed within the window). Only their batches are published: for everyone else the
 *   ingest path pays one map lookup.
 * - **Publishing** (`acknowledged`, called once per accepted request after its log commit): one Redis
 *   call per user and turn of the event loop (the requests one log commit acknowledged go together),
 *   not awaited, that appends the rows to the user's replay stream and publishes them on the user's
 *   channel. A failure loses the batch for live readers only (it is in the ingest log).
 * - **Receiving**: this instance subscribes to the channels of the users it holds streams for and
 *   hands each batch to their listeners. An opening stream waits (at most `handshakeMs`) until every
 *   instance has acknowledged that its user is watched, so every event acknowledged after the
 *   stream is open reaches it, whichever instance took it.
 */
export class LiveHub {
  private readonly control: string
  /** User → when this instance stops publishing their batches (unix ms, this clock). */
  private readonly watched = new Map<string, number>()
  /** User → this instance's listeners of their channel. */
  private readonly listeners = new Map<string, Set<Listener>>()
  /** Subscriptions under way, so that a second stream of a user waits for the first's. */
  private readonly subscribing = new Map<string, Promise<unknown>>()
  private readonly handshakes = new Map<string, { acks: number; expected: number; done: () => void }>()
  /** Requests' rows waiting for the end of this turn or publishing window, per user, and their events' count. */
  private readonly outgoing = new Map<string, { parts: Buffer[]; rows: number }>()
  /** User → when this instance's last stream of theirs closed (this clock), within the replay window. */
  private readonly closedAt = new Map<string, number>()
  private flushTimer: NodeJS.Timeout | undefined
  private readonly renewal: NodeJS.Timeout
  private closed = false

  constructor (
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
    private readonly prefix: string,
    private readonly opts: LiveHubOptions,
    private readonly log: FastifyBaseLogger,
    private readonly now: () => number = Date.now,
  ) {
    this.control = `${prefix}live:ctl`
    publisher.defineCommand('liveAppend', { numberOfKeys: 2, lua: APPEND_AND_PUBLISH })
    subscriber.on('messageBuffer', (channel: Buffer, message: Buffer) => this.received(channel.toString(), message))
    // Users watched from here are announced again well within the time others keep them.
    this.renewal = setInterval(() => this.announceAll(), Math.max(1000, Math.floor(this.keepMs() / 3)))
    this.renewal.unref()
  }

  /** How long a user stays watched after an announcement. */
  private keepMs (): number {
    return this.opts.replayMs + 10_000
  }

  /** Subscribes to the control channel and asks the other instances which users they watch. */
  async start (): Promise<void> {
    await this.subscriber.subscribe(this.control)
    await this.publisher.publish(this.control, '?')
  }

  /** Stops announcing; streams are ended by their owners. */
  close (): void {
    this.closed = true
    clearInterval(this.renewal)
    // What the window still holds goes out now: the streams are ended after this.
    this.flush()
    for (const h of this.handshakes.values()) h.done()
  }

  /** True while some instance holds (or held within the replay window) a stream of the user. */
  isWatched (userId: string): boolean {
    const until = this.watched.get(userId)
    if (until === undefined) return false
    if (until > this.now()) return true
    this.watched.delete(userId)
    return false
  }

  /**
   * Called once per accepted request after its rows are in the log: publishes them if the user is
   * watched, at the end of the current turn (or of the publishing window) with the user's other
   * requests acknowledged in it. Never waits and never throws.
   */
  acknowledged (userId: string, rows: RowBytes): void {
    if (rows.rows === 0 || !this.isWatched(userId)) return
    // The requests of a user acknowledged together (one group commit of the log resumes them all
    // in the same turn) go out in one call, after they have all been answered.
    const pending = this.outgoing.get(userId)
    if (pending) {
      pending.parts.push(rows.bytes)
      pending.rows += rows.rows
      return
    }
    this.outgoing.set(userId, { parts: [rows.bytes], rows: rows.rows })
    if (this.outgoing.size > 1) return
    const windowMs = this.opts.publishWindowMs ?? 0
    if (windowMs === 0) {
      queueMicrotask(() => this.flush())
    } else {
      this.flushTimer = setTimeout(() => this.flush(), windowMs)
      this.flushTimer.unref()
    }
  }

  private flush (): void {
    clearTimeout(this.flushTimer)
    this.flushTimer = undefined
    for (const [userId, { parts, rows }] of this.outgoing) {
      const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts.flatMap((p, i) => (i === 0 ? [p] : [NEWLINE, p])))
      this.publisher.liveAppend(this.streamKey(userId), this.channel(userId), bytes, this.opts.replayBatches, this.opts.replayMs, rows)
        .catch((err: unknown) => this.log.warn({ err, userId }, 'live tail: a batch could not be published; streams miss it'))
    }
    this.outgoing.clear()
  }

  /**
   * Starts listening to a user's batches here, and makes sure every instance publishes them; resolves
   * once it is so (or after handshakeMs). Returns the function that stops listening.
   */
  async listen (userId: string, listener: Listener): Promise<() => void> {
    let set = this.listeners.get(userId)
    if (!set) {
      set = new Set()
      this.listeners.set(userId, set)
    }
    set.add(listener)
    const stop = () => {
      const s = this.listeners.get(userId)
      if (!s?.delete(listener) || s.size > 0) return
      this.listeners.delete(userId)
      void this.subscriber.unsubscribe(this.channel(userId)).catch(() => {})
      // Every instance goes on publishing the user's batches for the replay window from now (and a
      // little longer), not from the last renewal: a reader that reconnects within it resumes whole.
      this.closedAt.set(userId, this.now())
      void this.announce(userId, false).catch((err: unknown) => { if (!this.closed) this.log.warn({ err }, 'live tail: could not announce a closed stream\'s user') })
    }
    try {
      let subscribing = this.subscribing.get(userId)
      if (!subscribing) {
        subscribing = this.subscriber.subscribe(this.channel(userId)).finally(() => this.subscribing.delete(userId))
        this.subscribing.set(userId, subscribing)
      }
      await subscribing
      await this.announce(userId, true)
    } catch (err) {
      stop()
      throw err
    }
    return stop
  }

  /**
   * Up to `count` batches of the user's replay stream after `entry` (with `inclusive`, that entry
   * too, so that the rest of it can be sent after the reader's event `index` in it), oldest first:
   * one chunk of a paced replay. `complete` is false when events after the reader's were dropped
   * (the window passed, more batches came than it keeps, or the entry itself was dropped before the
   * reader had it whole).
   */
  async replay (userId: string, entry: string, count: number, inclusive: boolean, index = Infinity): Promise<{ batches: LiveBatch[]; complete: boolean }> {
    const key = this.streamKey(userId)
    const [first, rest] = await Promise.all([
      this.publisher.xrange(key, '-', '+', 'COUNT', 1),
      this.publisher.xrangeBuffer(key, inclusive ? entry : `(${entry}`, '+', 'COUNT', count),
    ])
    const batches = rest.map(([id, fields]) => ({ entry: id.toString(), lines: linesOf(fields[1]!) }))
    const oldest = first[0]?.[0]
    const [ms = 0] = entry.split('-').map(Number)
    // Dropped: the oldest kept entry is newer than the one asked for and does not follow it (the
    // entry it names as the one before), or follows it but the reader had not read it to its end
    // (an entry written before counts were kept is taken as unread), or none is kept and the one
    // asked for is older than the window.
    const fields = first[0]?.[1]
    const readWhole = () => {
      if (!inclusive) return true
      const before = fieldOf(fields!, 'pc')
      return before !== undefined && before !== '' && index + 1 >= Number(before)
    }
    const complete = oldest !== undefined
      ? compareEntries(oldest, entry) <= 0 || (fieldOf(fields!, 'p') === entry && readWhole())
      : ms >= this.now() - this.opts.replayMs
    return { batches, complete }
  }

  /**
   * Whether the stream could have given an id: not after the newest entry kept (and, in that entry,
   * not past its last event), or, when none is kept (the window passed), not ahead of this instance's
   * clock by more than the window (the ids' times are Redis' clock). Redis out of reach: true (the
   * stream then fails to open as it would).
   */
  async couldHaveGiven (userId: string, id: LiveId): Promise<boolean> {
    let newest: [id: Buffer, fields: Buffer[]] | undefined
    try {
      newest = (await this.publisher.xrevrangeBuffer(this.streamKey(userId), '+', '-', 'COUNT', 1))[0]
    } catch {
      return true
    }
    if (newest !== undefined) {
      const order = compareEntries(id.entry, newest[0].toString())
      // The rows are the entry's first field, as replay() reads them.
      return order < 0 || (order === 0 && id.index < linesOf(newest[1][1]!).length)
    }
    const [ms = 0] = id.entry.split('-').map(Number)
    return ms <= this.now() + this.opts.replayMs
  }

  private streamKey (userId: string): string {
    return `${this.prefix}live:r:${userId}`
  }

  private channel (userId: string): string {
    return `${this.prefix}live:u:${userId}`
  }

  /** Tells every instance the user is watched; with `wait`, until each has said it knows (or handshakeMs). */
  private async announce (userId: string, wait: boolean): Promise<void> {
    if (!wait) {
      await this.publisher.publish(this.control, `w ${userId}`)
      return
    }
    const nonce = randomUUID()
    let timer: NodeJS.Timeout | undefined
    const acked = new Promise<void>((resolve) => {
      const h = { acks: 0, expected: Infinity, done: resolve }
      this.handshakes.set(nonce, h)
      timer = setTimeout(resolve, this.opts.handshakeMs)
    })
    try {
      // PUBLISH answers how many subscribers got the message: one per instance (each subscribes to the
      // control channel once), this one included.
      const instances = await this.publisher.publish(this.control, `w ${userId} ${nonce}`)
      const h = this.handshakes.get(nonce)
      if (h) {
        h.expected = instances
        if (h.acks >= instances) h.done()
      }
      await acked
    } finally {
      clearTimeout(timer)
      this.handshakes.delete(nonce)
    }
  }

  /**
   * Renews the users streaming from here on every instance; `closedToo` (an instance that starts
   * asks) also those whose last stream here closed within the replay window, whom a reader may yet
   * resume.
   */
  private announceAll (closedToo = false): void {
    if (this.closed) return
    // Users no longer watched are forgotten here too (not only when they next send an event).
    const now = this.now()
    for (const [userId, until] of this.watched) if (until <= now) this.watched.delete(userId)
    for (const [userId, at] of this.closedAt) if (at <= now - this.opts.replayMs || this.listeners.has(userId)) this.closedAt.delete(userId)
    const users = closedToo ? [...this.listeners.keys(), ...this.closedAt.keys()] : this.listeners.keys()
    for (const userId of users) {
      void this.announce(userId, false).catch((err: unknown) => this.log.warn({ err }, 'live tail: could not announce a watched user'))
    }
  }

  private received (channel: string, message: Buffer): void {
    if (channel === this.control) {
      this.controlMessage(message.toString())
      return
    }
    const userId = channel.slice(`${this.prefix}live:u:`.length)
    const set = this.listeners.get(userId)
    if (!set || set.size === 0) return
    const nl = message.indexOf(10)
    const batch = { entry: message.subarray(0, nl).toString(), lines: linesOf(message.subarray(nl + 1)) }
    for (const listener of set) {
      try {
        listener(batch)
      } catch (err) {
        this.log.error({ err }, 'live tail: a stream failed on a batch')
      }
    }
  }

  private controlMessage (text: string): void {
    const [kind, a, b] = text.split(' ')
    if (kind === 'w' && a) {
      this.watched.set(a, this.now() + this.keepMs())
      if (b) void this.publisher.publish(this.control, `a ${b}`).catch(() => {})
    } else if (kind === 'a' && a) {
      const h = this.handshakes.get(a)
      if (h && ++h.acks >= h.expected) h.done()
    } else if (kind === '?') {
      this.announceAll(true)
    }
  }
}

const NEWLINE = Buffer.from('\n')

function linesOf (bytes: Buffer): string[] {
  return bytes.length === 0 ? [] : bytes.toString('utf8').split('\n')
}

/** A stream entry's field by name (its fields come as name, value, name, value…), undefined when absent. */
function fieldOf (fields: string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1]
  return undefined
}
