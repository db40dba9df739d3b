import { open, type Database, type RootDatabase } from 'lmdb'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { collectSpans, decodeEntry, encodeEntry, entryHeader, HEADER_BYTES, rowBytes, type Entry, type LogRow, type LogSpan, type PositionRange, type RowBytes } from './entry-codec.ts'
import { GroupCommit, groupUpTo } from './group-commit.ts'
import { IngestLogClosed, logFull, logUnavailable, type IngestLog, type LogStats } from './ingest-log.ts'
import { takePidLock } from './pid-lock.ts'
import { QuarantineStore, type QuarantinedRow } from './quarantine-store.ts'
import { addRefused, stillRefused } from './refused-ranges.ts'
import { SegmentFiles, type EntryToWrite } from './segment-files.ts'
import { TailCache, type TailEntry } from './tail-cache.ts'
import { makeDirs } from '../../data-dir.ts'

export type { QuarantinedRow } from './quarantine-store.ts'

/**
 * The ingest log on local disk (IngestLog), synced before the 202 is sent.
 *
 * Queue logic over append-only segment files and an LMDB environment: the appends waiting for a
 * commit (group-commit.ts) are written as entries (entry-codec.ts) keyed by the position of their
 * first row, as records at the end of a segment file, one synced write a commit (segment-files.ts);
 * the shipping state and the quarantine (quarantine-store.ts), written a few times a second at most,
 * are in LMDB. Reads are served from the newest entries in memory when they can (tail-cache.ts) and
 * skip refused commits (refused-ranges.ts); marking rows shipped lets go of the entries they cover and
 * deletes the segments wholly shipped. One process owns the directory (pid-lock.ts). An entry is
 * indexed, so readable, only once its write has been synced: `read` never goes past the last commit
 * whose appends have resolved.
 */

/** What the log keeps about shipping, synced with the rows. */
interface ShipState {
  /** Random id of this log, part of every deduplication token (two logs never share a token). */
  logId: string
  /** Every row at or below this position is in ClickHouse (or quarantined). */
  shipped: number
  /** The range being inserted: after a crash exactly this range is re-sent with the same token. */
  inflight: PositionRange | null
}

/** Appends waiting for one commit are merged into entries of up to this size. */
const MERGED_ENTRY_BYTES = 4 * 1024 * 1024
const TAIL_MAX_BYTES = 64 * 1024 * 1024
const openPaths = new Set<string>()

/**
 * One process owns a log directory: a lock file naming its pid and start time. A lock whose process
 * is gone, or whose pid now belongs to a process started at another time (after a crash or reboot),
 * is stale and taken over.
 */
function lockDirectory (dir: string): () => void {
  const path = join(dir, 'LOCK')
  return takePidLock(path, (owner) => new Error(owner === null
    ? `could not lock the ingest log ${dir} (lock file ${path}): another process starting on it was taking over its stale lock; start again in a few seconds`
    : `the ingest log ${dir} belongs to running process ${owner} (lock file ${path}); give each instance its own INGEST_LOG_DIR`))
}

export interface DiskIngestLogOptions {
  dir: string
  maxBytes: number
  /** Told of each damaged entry moved to quarantine (for the operator's log). */
  onDamaged?: (info: { position: number; bytes: number }) => void
  /** Told of an unfinished write cut off the newest segment at open (never acknowledged: the process died in it). */
  onUnfinishedWrite?: (info: { bytes: number }) => void
  /** Told when a commit fails (disk full, I/O error); its appends were refused with 503. */
  onCommitFailed?: (err: unknown) => void
}

export class DiskIngestLog implements IngestLog {
  private state: ShipState
  /** The next position to hand out, and the last position whose entry is committed (holes excepted). */
  private next: number
  private lastCommitted: number
  private closed = false
  /** Appends waiting for the next commit: they become few entries, written in one transaction with one sync. */
  private readonly commits = new GroupCommit<PendingAppend>((batch) => this.commit(batch))
  private readonly tail = new TailCache(TAIL_MAX_BYTES)
  /** Positions of refused commits that may be on disk: never read (refused-ranges.ts). */
  private refused: PositionRange[] = []
  private lastRefusal: LogStats['lastRefusal'] = null
  /** The chain of segment deletions: each runs after the previous one. */
  private trimming: Promise<void> = Promise.resolve()

  private constructor (
    private readonly env: RootDatabase,
    private readonly files: SegmentFiles,
    private readonly meta: Database<ShipState, string>,
    private readonly quarantine: QuarantineStore,
    private readonly unlock: () => void,
    readonly dir: string,
    private readonly maxBytes: number,
    private readonly onDamaged: DiskIngestLogOptions['onDamaged'],
    private readonly onCommitFailed: DiskIngestLogOptions['onCommitFailed'],
  ) {
    this.state = meta.get('state') ?? { logId: randomBytes(6).toString('hex'), shipped: 0, inflight: null }
    // Entries never overlap, so the newest one says where positions go on (a damaged one counts as
    // one row), but never below the end of the insert under way: those positions were handed out,
    // and when damage took their entries, reusing them would put new rows inside a range the replay
    // then marks shipped. Entries are checked when read, and quarantined if damaged.
    files.dropShipped(this.state.shipped)
    const last = Math.max(this.state.shipped, this.state.inflight?.to ?? 0, files.lastPosition)
    this.next = last + 1
    this.lastCommitted = last
  }

  /** Opens (creating if needed) the log under `dir`; one owner per directory. */
  static open (opts: DiskIngestLogOptions): DiskIngestLog {
    makeDirs(opts.dir)
    if (openPaths.has(opts.dir)) throw new Error(`the ingest log ${opts.dir} is already open in this process`)
    const unlock = lockDirectory(opts.dir)
    try {
      // Overlapping sync: a commit is visible before its fdatasync, its puts resolve after it.
      const env = open({ path: opts.dir, overlappingSync: true, maxDbs: 4 })
      const meta = env.openDB<ShipState, string>('meta', { encoding: 'msgpack' })
      const state = meta.get('state')
      const files = SegmentFiles.open(opts.dir, state?.shipped ?? 0, Math.max(state?.shipped ?? 0, state?.inflight?.to ?? 0))
      if (files.cutBytes > 0) opts.onUnfinishedWrite?.({ bytes: files.cutBytes })
      moveLmdbEntries(env.openDB<Buffer, number>('entries', { encoding: 'binary' }), files)
      const log = new DiskIngestLog(
        env,
        files,
        meta,
        QuarantineStore.in(env),
        unlock, opts.dir, opts.maxBytes, opts.onDamaged, opts.onCommitFailed,
      )
      openPaths.add(opts.dir)
      return log
    } catch (err) {
      unlock()
      throw err
    }
  }

  get logId (): string { return this.state.logId }
  get shipped (): number { return this.state.shipped }
  get inflight (): PositionRange | null { return this.state.inflight }
  /** The position of the last row committed (appends under way and failed ones are not counted). */
  get lastPosition (): number { return this.lastCommitted }

  /**
   * Appends rows (lines, or their bytes) as one entry; resolves with the position of the last row
   * once the entry is synced to disk. Refuses (503 + Retry-After) when the log holds its maximum size.
   */
  async append (input: RowBytes | string[]): Promise<number> {
    if (this.closed) throw logFull()
    const rows = Array.isArray(input) ? rowBytes(input) : input
    if (rows.rows === 0) return this.next - 1 // nothing to keep (an empty entry would share the next one's key)
    const size = HEADER_BYTES + rows.bytes.length // the entry's size if written alone
    if (this.files.bytes + this.commits.waitingSize + size > this.maxBytes) {
      this.lastRefusal = { reason: 'ingest_log_full', at: Date.now() }
      throw logFull()
    }
    const last = this.next + rows.rows - 1
    this.next += rows.rows
    await this.commits.add({ rows, size, appendedAt: Date.now() }, size)
    return last
  }

  /**
   * Writes the appends of one group commit with one synced write, as few entries (up to
   * MERGED_ENTRY_BYTES each; an append never spans two). A failed commit refuses its appends with
   * 503; its positions become a hole that reads skip.
   */
  private async commit (batch: PendingAppend[]): Promise<void> {
    let rows = 0
    for (const p of batch) rows += p.rows.rows
    // Every position handed out so far is in this batch or committed before it.
    const first = this.next - rows
    const written: TailEntry[] = []
    const toWrite: EntryToWrite[] = []
    let key = first
    for (const group of groupUpTo(batch, (p) => p.size, MERGED_ENTRY_BYTES)) {
      const { entry, rows: entryRows } = encodeEntry(group.map((p) => p.rows), batch[0]!.appendedAt)
      written.push({ key, rows: entryRows, payload: entry.subarray(HEADER_BYTES), bytes: entry.length })
      toWrite.push({ key, rows: entryRows, appendedAt: batch[0]!.appendedAt, entry })
      key += entryRows
    }
    try {
      await this.files.write(toWrite)
    } catch (err) {
      // The tail must stay a contiguous run: these positions are a hole now. What a failed write left
      // on disk was cut off, or is in a segment no longer written; reads skip it either way.
      this.tail.drop()
      addRefused(this.refused, { from: first, to: first + rows - 1 })
      this.onCommitFailed?.(err)
      this.lastRefusal = { reason: 'ingest_log_unavailable', at: Date.now() }
      throw logUnavailable()
    }
    this.lastCommitted = Math.max(this.lastCommitted, first + rows - 1)
    for (const e of written) this.tail.keep(e)
  }

  /**
   * Reads unshipped rows in position order from `after + 1`, up to the caps (at least one row; bytes
   * count each line and its newline): from the in-memory tail when it holds position `after + 1`,
   * else from disk, where entries that cannot be decoded are quarantined whole and skipped.
   */
  async read (after: number, maxRows: number, maxBytes: number, upTo = Infinity): Promise<LogSpan[]> {
    this.refuseIfClosed()
    // Rows of a commit whose fdatasync is under way are visible on disk but not acknowledged yet.
    upTo = Math.min(upTo, this.lastCommitted)
    if (this.tail.holds(after + 1)) return collectSpans(this.tail.entries, after, maxRows, maxBytes, upTo)
    const damaged: { key: number; value: Buffer }[] = []
    const files = this.files
    function * decoded (start: number): Generator<Entry> {
      for (const { at, key } of files.entriesFrom(start)) {
        if (key > upTo) return
        const value = files.read(at)
        const entry = decodeEntry(key, value)
        if (entry) yield entry
        else damaged.push({ key, value })
      }
    }
    const spans = collectSpans(decoded(after + 1), after, maxRows, maxBytes, upTo, this.refused)
    return this.settle(spans, damaged)
  }

  /** The rows of a recorded range, exactly as they were first read (for a replay after a crash). */
  readRange (range: PositionRange): Promise<LogSpan[]> {
    return this.read(range.from - 1, Infinity, Infinity, range.to)
  }

  /** Records the range about to be inserted; resolves once that is synced. */
  async beginInsert (range: PositionRange): Promise<void> {
    this.refuseIfClosed()
    this.state = { ...this.state, inflight: range }
    await this.recordState(this.state)
  }

  /**
   * Writes the shipping state; resolves once it is on disk. With overlapping sync a put resolves
   * after its commit's sync (measured: 4-5 ms, then `flushed` in 0.07), which lmdb's documentation
   * leaves open: `flushed` says it in so many words, at no cost when it is so.
   */
  private async recordState (state: ShipState): Promise<void> {
    await this.meta.put('state', state)
    await this.meta.flushed
  }

  /**
   * Marks every row up to `position` shipped (synced with the next LMDB commit), lets go of the
   * entries wholly below it at once, and deletes the segments wholly below it once that is synced;
   * resolves when both are done. The shipper does not wait for it before its next insert: LMDB
   * commits in call order, so the next `beginInsert` cannot be durable before it.
   */
  async markShipped (position: number): Promise<void> {
    this.refuseIfClosed()
    this.state = { ...this.state, shipped: Math.max(this.state.shipped, position), inflight: null }
    const state = this.state
    this.tail.shipped(state.shipped, state.shipped >= this.lastCommitted && !this.commits.committing)
    this.refused = stillRefused(this.refused, state.shipped)
    this.files.dropShipped(state.shipped)
    const recorded = this.recordState(state)
    // A segment is deleted only once the rows it held are recorded shipped: a crash in between would
    // otherwise restart from an older `shipped` with those rows gone.
    this.trimming = this.trimming.then(() => recorded).then(() => this.closed ? undefined : this.files.deleteShipped(state.shipped)).catch(() => {})
    await Promise.all([recorded, this.trimming])
  }

  /** Keeps rows the engine refused, with the reason, so an operator can inspect or replay them. */
  async quarantineRows (rows: LogRow[], reason: string): Promise<void> {
    this.refuseIfClosed()
    await this.quarantine.put(rows, reason)
  }

  /**
   * A write handed to LMDB once the environment is closing is not refused by it: its commit runs on a
   * later turn and throws there, out of reach of any caller, and the process ends (an uncaught
   * "The environment is already closed"). So the log refuses it first.
   */
  private refuseIfClosed (): void {
    if (this.closed) throw new IngestLogClosed()
  }

  quarantined (limit = 100): QuarantinedRow[] {
    return this.quarantine.list(limit)
  }

  /**
   * The quarantine of a log directory, read without taking the log (LMDB allows readers beside its
   * owner), for an operator: `npm run ingest:quarantine`.
   */
  static readQuarantine (dir: string, limit = 1000): QuarantinedRow[] {
    return QuarantineStore.read(dir, limit)
  }

  stats (): LogStats {
    const waiting = this.lastCommitted - this.state.shipped
    const oldestAppendedAt = waiting > 0 && !this.closed ? this.files.oldestAfter(this.state.shipped) : null
    return { rows: Math.max(0, waiting), bytes: this.files.bytes, oldestAppendedAt, quarantined: this.quarantine.size, lastRefusal: this.lastRefusal }
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.commits.idle()
    await this.trimming
    this.files.close()
    await this.env.close()
    openPaths.delete(this.dir)
    this.unlock()
  }

  private async settle (spans: LogSpan[], damaged: { key: number; value: Buffer }[]): Promise<LogSpan[]> {
    for (const { key, value } of damaged) {
      await this.quarantineRows([{ position: key, line: value.toString('base64') }], `damaged log entry at position ${key} (${value.length} bytes), kept as base64`)
      this.onDamaged?.({ position: key, bytes: value.length })
      this.refuseIfClosed() // closed meanwhile: the entry is quarantined again at the next start
      this.files.forget(key)
    }
    return spans
  }
}

/**
 * Entries left in LMDB by a release that kept them there are moved to the segment files, synced,
 * before they are removed from LMDB (an entry in both after a crash in between is moved once).
 */
function moveLmdbEntries (entries: Database<Buffer, number>, files: SegmentFiles): void {
  const last = files.lastPosition
  const moved: EntryToWrite[] = []
  for (const { key, value } of entries.getRange({})) {
    if (key > last) moved.push({ key, rows: entryHeader(value)?.rows || 1, appendedAt: entryHeader(value)?.appendedAt ?? 0, entry: value })
  }
  if (moved.length > 0) files.writeSync(moved)
  if (moved.length > 0 || entries.getCount() > 0) entries.clearSync()
}

/** An append waiting for its commit: its rows, the size of its entry if written alone, and when it came. */
interface PendingAppend { rows: RowBytes; size: number; appendedAt: number }
