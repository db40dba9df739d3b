import { randomBytes } from 'node:crypto'
import { collectSpans, type Entry, type LogRow, type LogSpan, type PositionRange, type RowBytes } from '../../src/ingest/log/entry-codec.ts'
import { IngestLogClosed, logFull, type IngestLog, type LogStats } from '../../src/ingest/log/ingest-log.ts'

/** Resolves on a later turn of the event loop, as a write to disk would. */
const later = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * An IngestLog in memory, for tests of its users: the same positions, ordering, caps and replay of
 * `inflight` as the LMDB log, and reads cut by the same code (collectSpans); nothing survives the
 * process. An append becomes readable on a later turn of the event loop, as a commit does, and
 * appends are refused once `maxBytes` of rows wait (503, like a full log on disk).
 */
export class MemoryIngestLog implements IngestLog {
  readonly logId = randomBytes(6).toString('hex')
  /** Rows the shipper quarantined, with the reason, in the order it did. */
  readonly quarantine: { row: LogRow; reason: string }[] = []
  /** Appends not wholly shipped, in position order, each one entry. */
  private entries: (Entry & { appendedAt: number })[] = []
  private next = 1
  private last = 0
  private shippedTo = 0
  private recorded: PositionRange | null = null
  private bytes = 0
  private closed = false

  constructor (private readonly maxBytes = Infinity) {}

  get shipped (): number { return this.shippedTo }
  get inflight (): PositionRange | null { return this.recorded }
  get lastPosition (): number { return this.last }

  async append (rows: RowBytes): Promise<number> {
    if (this.closed) throw logFull()
    if (rows.rows === 0) return this.next - 1
    if (this.bytes + rows.bytes.length > this.maxBytes) throw logFull()
    const key = this.next
    this.next += rows.rows
    // The log owns what it keeps: the caller may reuse its buffer.
    const payload = Buffer.from(rows.bytes)
    this.bytes += payload.length
    await later()
    // Callbacks of setImmediate run in call order, so entries are pushed in position order.
    this.entries.push({ key, rows: rows.rows, payload, appendedAt: Date.now() })
    this.last = key + rows.rows - 1
    return this.last
  }

  async read (after: number, maxRows: number, maxBytes: number, upTo = Infinity): Promise<LogSpan[]> {
    if (this.closed) throw new IngestLogClosed()
    return collectSpans(this.entries, after, maxRows, maxBytes, Math.min(upTo, this.last))
  }

  readRange (range: PositionRange): Promise<LogSpan[]> {
    return this.read(range.from - 1, Infinity, Infinity, range.to)
  }

  async beginInsert (range: PositionRange): Promise<void> {
    if (this.closed) throw new IngestLogClosed()
    this.recorded = range
    await later()
  }

  async markShipped (position: number): Promise<void> {
    if (this.closed) throw new IngestLogClosed()
    this.shippedTo = Math.max(this.shippedTo, position)
    this.recorded = null
    // Entries are trimmed whole, once every row they hold is shipped.
    while (this.entries[0] && this.entries[0].key + this.entries[0].rows - 1 <= this.shippedTo) {
      this.bytes -= this.entries.shift()!.payload.length
    }
    await later()
  }

  async quarantineRows (rows: LogRow[], reason: string): Promise<void> {
    if (this.closed) throw new IngestLogClosed()
    for (const row of rows) this.quarantine.push({ row, reason })
    await later()
  }

  stats (): LogStats {
    return {
      rows: this.last - this.shippedTo,
      bytes: this.bytes,
      oldestAppendedAt: this.entries[0]?.appendedAt ?? null,
      quarantined: this.quarantine.length,
      lastRefusal: null,
    }
  }

  async close (): Promise<void> {
    this.closed = true
  }
}
