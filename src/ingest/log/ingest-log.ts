import type { LogRow, LogSpan, PositionRange, RowBytes } from './entry-codec.ts'

/**
 * The log refused an append: it is full (or closing), or it cannot be written. Nothing of the append
 * is kept; the caller may retry after `retryAfterSeconds` (the HTTP layer answers 503 with Retry-After).
 */
export class IngestLogRefused extends Error {
  constructor (readonly reason: 'ingest_log_full' | 'ingest_log_unavailable', readonly retryAfterSeconds = 5) {
    super(reason === 'ingest_log_full' ? 'the ingest backlog is full, retry with backoff' : 'the ingest log cannot be written, retry with backoff')
    this.name = 'IngestLogRefused'
  }
}

/**
 * A write (beginInsert, markShipped, quarantineRows) or read reached the log after its close began.
 * Nothing was written: the shipper's recorded range, if any, stays as it was and ships at the next start.
 */
export class IngestLogClosed extends Error {
  constructor () {
    super('the ingest log is closed; nothing was written')
    this.name = 'IngestLogClosed'
  }
}

export const logUnavailable = (retryAfterSeconds = 5) => new IngestLogRefused('ingest_log_unavailable', retryAfterSeconds)
export const logFull = (retryAfterSeconds = 5) => new IngestLogRefused('ingest_log_full', retryAfterSeconds)

export interface LogStats {
  /** Rows appended and not yet shipped. */
  rows: number
  /** Bytes of the entries still held (entries are trimmed whole). */
  bytes: number
  /** When the oldest unshipped row was appended (unix ms), null when nothing is waiting. */
  oldestAppendedAt: number | null
  quarantined: number
  /** The last append refused (the log full, or a commit that could not be written: a full disk), and when (unix ms); null before any. */
  lastRefusal: { reason: IngestLogRefused['reason']; at: number } | null
}

/**
 * The instance's ingest log (ARCHITECTURE §1): acknowledged events not yet in ClickHouse.
 *
 * Every row appended gets a position, 1, 2, 3… for the life of the log, in the order of the append
 * calls. The shipper is its one reader: it reads rows after `shipped`, records the range it is about
 * to insert (`beginInsert`), inserts it under a token made of `logId` and the range, then marks the
 * range shipped. A range recorded and not marked shipped is `inflight`, and is re-sent first and
 * exactly (`readRange`) by the next shipper: delivery is at least once, and ClickHouse's
 * deduplication of the token makes it exactly once.
 */
export interface IngestLog {
  /** Random id of this log, the same for its whole life: two logs never share a deduplication token. */
  readonly logId: string
  /** Every row at or below this position is in ClickHouse or quarantined; changes only by markShipped. */
  readonly shipped: number
  /** The range recorded by beginInsert and not yet marked shipped (it survives a restart), else null. */
  readonly inflight: PositionRange | null
  /** The position of the last row readable (its append has resolved, or is resolving). */
  readonly lastPosition: number
  /**
   * Appends rows as consecutive positions, after those of every earlier call; resolves with the last
   * one once the rows are durable, or throws IngestLogRefused and keeps none of them.
   */
  append (rows: RowBytes): Promise<number>
  /**
   * Rows from position `after + 1` in position order, only rows whose append resolved, up to the caps
   * (bytes count each line and its newline) but at least one row when there is one.
   */
  read (after: number, maxRows: number, maxBytes: number): Promise<LogSpan[]>
  /** The rows of a recorded range, exactly as they were first read (for the replay of `inflight`). */
  readRange (range: PositionRange): Promise<LogSpan[]>
  /** Sets `inflight` at once; resolves once the range is durable. */
  beginInsert (range: PositionRange): Promise<void>
  /**
   * Sets `shipped` (never lower) and clears `inflight` at once; resolves once that is durable and the
   * rows it covers are trimmed. Records are durable in call order: a later beginInsert never before it.
   */
  markShipped (position: number): Promise<void>
  /** Keeps rows the engine refused with the reason, durable when it resolves, for an operator. */
  quarantineRows (rows: LogRow[], reason: string): Promise<void>
  /** The backlog now (for health, metrics and logs). */
  stats (): LogStats
  /**
   * Refuses appends from now on (IngestLogRefused) and every other write and read (IngestLogClosed);
   * resolves once everything written before is flushed and the log released.
   */
  close (): Promise<void>
}
