import type { FastifyBaseLogger } from 'fastify'
import { logRows, spanRows, splitSpans, type LogSpan, type PositionRange } from './log/entry-codec.ts'
import type { IngestLog } from './log/ingest-log.ts'
import { kindRuns } from './log/row-kinds.ts'
import { isClickHouseRequestTimeout } from '../domain/network-errors.ts'

/**
 * Inserts one block of JSONCompactEachRow lines (UTF-8, each ending in a newline) under a
 * deduplication token; resolves once committed. The shipper reuses the body's memory for its next
 * block once the promise has settled: copy it to keep it.
 */
export type InsertBlock = (body: Buffer, token: string, rows: number) => Promise<void>

export interface ShipperOptions {
  maxRows: number
  maxBytes: number
  /**
   * Least time (ms) from one block's read of the log to the next one's: fewer, larger inserts at the
   * cost of visibility. The insert's own time counts in it, so a row waits at most this interval plus
   * one insert. 0 ships back to back, and so does a shipper that finds a full block (maxRows or
   * maxBytes) already waiting, or whose insert took the whole interval.
   */
  minIntervalMs: number
  /** The clock (ms) the interval is measured on; default performance.now. */
  now?: () => number
}

/**
 * ClickHouse errors that mean "these rows cannot be stored as sent", raised while the block is parsed
 * and before anything is written. Only these split a batch; anything else (unknown table, disk full,
 * memory, too many parts, network, timeouts) is an outage and the same block is retried with the same
 * token. Parse errors are refusals by their code alone; conversion errors only when the engine says it
 * met them reading the input, since a materialized view could raise the same codes after `events`
 * was written, and halving that block would store its rows twice.
 */
const PARSE_ERROR_CODES = new Set([
  6, // CANNOT_PARSE_TEXT
  25, // CANNOT_PARSE_ESCAPE_SEQUENCE
  26, // CANNOT_PARSE_QUOTED_STRING
  27, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  32, // ATTEMPT_TO_READ_AFTER_EOF
  33, // CANNOT_READ_ALL_DATA
  38, // CANNOT_PARSE_DATE
  41, // CANNOT_PARSE_DATETIME
  72, // CANNOT_PARSE_NUMBER
  117, // INCORRECT_DATA
  131, // TOO_LARGE_STRING_SIZE
])
const CONVERSION_ERROR_CODES = new Set([
  53, // TYPE_MISMATCH
  69, // ARGUMENT_OUT_OF_BOUND (e.g. a decimal too big for its column)
  70, // CANNOT_CONVERT_TYPE
  321, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
  349, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
  407, // DECIMAL_OVERFLOW
])
const READING_INPUT = /while reading the value of key|\(at row \d+\)|Cannot parse input/i

/** A ClickHouse server error (its code is a number, as text) saying the rows themselves cannot be stored. */
export function isRowRefusal (err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code !== 'string' || !/^\d+$/.test(code)) return false
  const n = Number(code)
  return PARSE_ERROR_CODES.has(n) || (CONVERSION_ERROR_CODES.has(n) && READING_INPUT.test(String((err as Error).message)))
}

export interface ShipperStatus {
  /**
   * Set while inserts fail: since when, how many attempts, the last error's message (for the log)
   * and its code (ClickHouse's error name or the socket error code: safe to show unauthenticated).
   */
  retrying: { since: number; attempts: number; error: string; code: string } | null
}

/**
 * Moves the ingest log into ClickHouse (ARCHITECTURE §1): in position order, one insert in flight,
 * each block as large as what is waiting (row and byte caps). Before an insert the block's range is
 * synced to the log, and the block carries a deduplication token made of the log's id and that
 * range, so the block re-sent after a crash is dropped by ClickHouse if it had already landed. A
 * block the engine refuses row by row is split until the refused rows are found; they go to the
 * quarantine and the rest ships. Outages are retried with backoff until they end.
 */
export class EventShipper {
  private loopDone: Promise<void> | null = null
  private stopping = false
  /**
   * A stop gave up waiting for the insert under way; the log is closed next. Whatever that insert
   * returns, nothing more is written to the log: its range stays recorded and ships at the next start.
   */
  private abandoned = false
  /** The block whose insert is under way: its range, and since when (Date.now()). */
  private underWay: { range: PositionRange; since: number } | null = null
  private wake: (() => void) | null = null
  private notifiedWhileBusy = false
  private interrupt: (() => void) | null = null
  /** Ends the pause between inserts early: someone waits for rows to be shipped. */
  private cutShort: (() => void) | null = null
  private waiters: { position: number; resolve: () => void }[] = []
  /** Per user, the last position this instance acknowledged (read-your-writes). */
  private acknowledgedByUser = new Map<string, number>()
  private state: ShipperStatus = { retrying: null }
  private lastRetryLog = 0
  /** The memory blocks are written into, reused from insert to insert (fresh pages cost the kernel time). */
  private blockBuffer = Buffer.alloc(0)

  constructor (
    private readonly log: IngestLog,
    private readonly insert: InsertBlock,
    private readonly opts: ShipperOptions,
    private readonly logger: FastifyBaseLogger,
    /** Inserts a block of score rows (src/domain/score-row.ts) into `scores`; without it, score rows are refused by the events' insert. */
    private readonly insertScores: InsertBlock = insert,
  ) {}

  start (): void {
    if (!this.loopDone) this.loopDone = this.loop()
  }

  get status (): ShipperStatus { return this.state }

  /** Rows were appended: ship them. */
  notify (): void {
    const wake = this.wake
    this.wake = null
    if (wake) wake()
    else this.notifiedWhileBusy = true
  }

  /** Remembers that `userId` was acknowledged up to `position` on this instance. */
  acknowledged (userId: string, position: number): void {
    if ((this.acknowledgedByUser.get(userId) ?? 0) < position) this.acknowledgedByUser.set(userId, position)
    this.notify()
  }

  /**
   * Resolves once everything this instance acknowledged to `userId` is in ClickHouse, or after
   * `timeoutMs`; says which.
   */
  async waitForUser (userId: string, timeoutMs: number): Promise<boolean> {
    const position = this.acknowledgedByUser.get(userId)
    if (position === undefined || position <= this.log.shipped) return true
    return this.waitFor(position, timeoutMs)
  }

  /** Ships what is waiting, for at most `timeoutMs`; true when the log was emptied. */
  drain (timeoutMs: number): Promise<boolean> {
    this.notify()
    this.cutShort?.()
    return this.waitFor(this.log.lastPosition, timeoutMs)
  }

  /**
   * Stops after the insert under way, waiting for it at most `timeoutMs`; true once stopped. When the
   * wait runs out the shipper writes nothing more to the log (which may then be closed): the block
   * under way stays recorded and is re-sent at the next start, where ClickHouse drops it if this
   * insert landed. That is logged, once.
   */
  async stop (timeoutMs: number): Promise<boolean> {
    this.stopping = true
    this.notify()
    this.interrupt?.()
    if (!this.loopDone) return true
    let timer: NodeJS.Timeout | undefined
    const stopped = await Promise.race([
      this.loopDone.then(() => true, () => true),
      new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), timeoutMs) }),
    ])
    clearTimeout(timer)
    if (!stopped && !this.abandoned) {
      this.abandoned = true
      const underWay = this.underWay
      this.logger.warn({
        rows: underWay?.range ?? null,
        insertRunningMs: underWay ? Date.now() - underWay.since : null,
        hint: 'a slow insert: see system.processes and system.query_log in ClickHouse; INGEST_DRAIN_TIMEOUT_MS sets how long shutdown ships',
      }, 'shutdown stopped waiting for a ClickHouse insert under way; its rows stay in the ingest log and are re-sent at the next start, where ClickHouse drops them if this insert landed')
    }
    return stopped
  }

  private waitFor (position: number, timeoutMs: number): Promise<boolean> {
    if (position <= this.log.shipped) return Promise.resolve(true)
    return new Promise<boolean>((resolve) => {
      const waiter = {
        position,
        resolve: () => {
          clearTimeout(timer)
          resolve(true)
        },
      }
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter)
        resolve(false)
      }, timeoutMs)
      this.waiters.push(waiter)
      this.cutShort?.()
    })
  }

  private async loop (): Promise<void> {
    let backoffMs = 100
    /** Average size of a row of the last block shipped, to tell whether a full block is waiting. */
    let lineBytes = 0
    const now = this.opts.now ?? (() => performance.now())
    /** When the last block was read from the log: the next one is read `minIntervalMs` after it. */
    let readAt = 0
    while (!this.stopping) {
      try {
        const inflight = this.log.inflight
        readAt = now()
        this.notifiedWhileBusy = false // this read sees every row appended before it
        const spans = inflight
          ? await this.log.readRange(inflight)
          : await this.log.read(this.log.shipped, this.opts.maxRows, this.opts.maxBytes)
        if (spans.length === 0) {
          // A recorded range whose entries were all quarantined as damaged: nothing left to send.
          if (inflight) this.advance(inflight.to)
          else await this.idle()
          continue
        }
        await this.ship(spans)
        if (this.abandoned) return
        lineBytes = spans.reduce((n, s) => n + s.bytes.length + 1, 0) / spanRows(spans)
        backoffMs = 100
        if (this.state.retrying) {
          this.logger.info({ downForMs: Date.now() - this.state.retrying.since, attempts: this.state.retrying.attempts }, 'ClickHouse accepts inserts again; shipping the ingest backlog')
          this.state.retrying = null
        }
      } catch (err) {
        // The failure of an insert given up on (ClickHouse closing under it, the log closed): not an outage.
        if (this.abandoned) return
        this.noteFailure(err)
        await this.pause(backoffMs)
        backoffMs = Math.min(backoffMs * 2, 5_000)
        continue
      }
      // The pause makes inserts larger; when a full block is already waiting it would only make the
      // backlog grow, so the next insert starts at once (under sustained load inserts run back to back).
      // The pause is what is left of the interval after the insert, so that a row appended just after
      // a block was read waits one interval and one insert, not two inserts and the interval.
      const waiting = this.log.lastPosition - this.log.shipped
      const fullBlockWaiting = waiting >= this.opts.maxRows || waiting * lineBytes >= this.opts.maxBytes
      const pauseMs = this.opts.minIntervalMs - (now() - readAt)
      if (pauseMs > 0 && !fullBlockWaiting) await this.pause(pauseMs, true)
    }
  }

  /**
   * Inserts rows as one block; on a row refusal, halves it until the refused rows are isolated. A
   * block holding score rows as well as event rows is shipped as its runs of one kind, one after the
   * other, each recorded and tokened by its own range: the same rows always cut into the same runs,
   * so a replay re-sends exactly the run that was under way.
   */
  private async ship (spans: LogSpan[], kind?: 'events' | 'scores'): Promise<void> {
    if (kind === undefined) {
      for (const run of kindRuns(spans)) {
        if (this.abandoned) return
        await this.ship(run.spans, run.kind)
      }
      return
    }
    const lastSpan = spans[spans.length - 1]!
    const range: PositionRange = { from: spans[0]!.position, to: lastSpan.position + lastSpan.rows - 1 }
    const rows = spanRows(spans)
    if (this.abandoned) return
    await this.log.beginInsert(range)
    this.underWay = { range, since: Date.now() }
    try {
      await (kind === 'scores' ? this.insertScores : this.insert)(this.block(spans), `${this.log.logId}:${range.from}-${range.to}`, rows)
    } catch (err) {
      if (this.abandoned) return
      if (!isRowRefusal(err)) throw err
      if (rows > 1) {
        const [head, rest] = splitSpans(spans, rows >> 1)
        await this.ship(head, kind)
        await this.ship(rest, kind)
        return
      }
      const reason = String((err as Error).message).slice(0, 2_000)
      await this.log.quarantineRows(logRows(spans), reason)
      this.logger.error({ position: range.from, code: (err as { code?: unknown }).code, reason: reason.slice(0, 300) },
        `ClickHouse refused ${kind === 'scores' ? 'a score' : 'an event'} row; it is quarantined in the ingest log and the rest ships`)
      this.advance(range.to)
      return
    } finally {
      this.underWay = null
    }
    this.advance(range.to)
  }

  /** The insert's body: the spans' lines, each ending in a newline, in the reused block buffer. */
  private block (spans: LogSpan[]): Buffer {
    let size = 0
    for (const span of spans) size += span.bytes.length + 1
    if (this.blockBuffer.length < size) this.blockBuffer = Buffer.allocUnsafeSlow(Math.max(size, Math.min(2 * this.blockBuffer.length, this.opts.maxBytes)))
    let at = 0
    for (const span of spans) {
      at += span.bytes.copy(this.blockBuffer, at)
      this.blockBuffer[at++] = 10 // '\n'
    }
    return this.blockBuffer.subarray(0, size)
  }

  /** Marks rows shipped; waiters are told once the log has recorded it (and trimmed what it covers). */
  private advance (position: number): void {
    if (this.abandoned) return // the log is closed or closing: the range stays recorded
    this.log.markShipped(position)
      .catch((err) => this.logger.error({ err, position }, 'could not record shipped rows in the ingest log; they will be re-sent and deduplicated'))
      .finally(() => this.wakeWaiters())
  }

  private wakeWaiters (): void {
    const shipped = this.log.shipped
    if (this.waiters.length) {
      const still: typeof this.waiters = []
      for (const w of this.waiters) (w.position <= shipped ? w.resolve() : still.push(w))
      this.waiters = still
    }
    if (this.acknowledgedByUser.size > 1_000) {
      for (const [user, p] of this.acknowledgedByUser) if (p <= shipped) this.acknowledgedByUser.delete(user)
    }
  }

  private noteFailure (err: unknown): void {
    const now = Date.now()
    const message = String((err as Error)?.message ?? err).slice(0, 500)
    const e = err as { type?: unknown; code?: unknown } | null
    // The client's own request timeout carries no code: a stalled server is named for what it is.
    const code = String(typeof e?.type === 'string' && e.type ? e.type : e?.code ?? (isClickHouseRequestTimeout(err) ? 'TIMEOUT' : 'unknown')).slice(0, 64)
    if (!this.state.retrying) {
      this.state.retrying = { since: now, attempts: 1, error: message, code }
      this.logger.error({ err }, 'ClickHouse insert failed; events stay in the ingest log and the insert is retried with backoff')
      this.lastRetryLog = now
      return
    }
    this.state.retrying.attempts++
    this.state.retrying.error = message
    this.state.retrying.code = code
    if (now - this.lastRetryLog >= 30_000) {
      this.lastRetryLog = now
      const stats = this.log.stats()
      this.logger.error({ error: message, attempts: this.state.retrying.attempts, backlogRows: stats.rows, backlogBytes: stats.bytes },
        'ClickHouse inserts still failing; ingestion continues into the ingest log')
    }
  }

  /** Waits for new rows, unless some arrived since the loop last looked (a notify while it was busy). */
  private idle (): Promise<void> {
    if (this.stopping || this.notifiedWhileBusy) {
      this.notifiedWhileBusy = false
      return Promise.resolve()
    }
    return new Promise((resolve) => { this.wake = resolve })
  }

  /**
   * Sleeps. New rows do not cut it short; stopping does, and so does a reader waiting for its rows
   * when `forReaders` (the pause between inserts, but not the backoff after a failure).
   */
  private pause (ms: number, forReaders = false): Promise<void> {
    if (this.stopping || (forReaders && this.waiters.length > 0)) return Promise.resolve()
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer)
        this.interrupt = null
        this.cutShort = null
        resolve()
      }
      const timer = setTimeout(done, ms)
      this.interrupt = done
      if (forReaders) this.cutShort = done
    })
  }
}
