import { close, closeSync, constants, fdatasync, fsync, fsyncSync, ftruncate, ftruncateSync, open, openSync, readdirSync, readFileSync, readSync, statSync, unlink, unlinkSync, writeSync, writev } from 'node:fs'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { entryHeader } from './entry-codec.ts'

/**
 * The ingest log's entries on disk: append-only segment files of records, each written and synced by
 * one `writev` on a file opened with O_DSYNC (one system call and one trip through libuv's pool a
 * commit), read back by position through an index kept in memory.
 *
 * A record is a 16-byte header (crc32 of the 12 bytes after it | the entry's length, u32 | the
 * entry's key, the position of its first row, f64) and the entry (entry-codec.ts, which has a
 * checksum of its own). Segments are named by a sequence number (`000000000001.seg`, …); one is
 * written at a time, a new one after a restart, past SEGMENT_MAX_BYTES, or once everything in the
 * current one has shipped. A segment is deleted once every row in it has shipped.
 *
 * At open every segment is scanned: bytes that are not a whole record (a write torn by a power loss,
 * a damaged disk) end the segment's records, and are indexed as one damaged entry, which the log
 * quarantines when it reads it; nothing after them in that segment is trusted.
 */

const RECORD_HEADER_BYTES = 16
/** A segment takes no new record once it holds this much. */
const SEGMENT_MAX_BYTES = 64 * 1024 * 1024
/** A segment whose rows have all shipped is closed and deleted once it holds at least this much. */
const ROLL_SHIPPED_BYTES = 1024 * 1024
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_APPEND | constants.O_DSYNC
const SEGMENT_NAME = /^(\d{12})\.seg$/

interface Segment {
  seq: number
  path: string
  /** Bytes of whole records in it. */
  size: number
  /** The last position its indexed records hold (0 when none). */
  last: number
  readFd: number | null
}

/** An entry to write: its key (first position), row count, when its first append came, and its bytes. */
export interface EntryToWrite { key: number; rows: number; appendedAt: number; entry: Buffer }

/** An indexed entry: where its bytes are. */
export interface IndexedEntry { key: number; rows: number; appendedAt: number; bytes: number }

/**
 * Where each entry is, in key order, as columns (about 40 bytes an entry: a backlog of a million
 * single-event commits takes some 40 MB). Shipped entries are dropped from the front.
 */
class EntryIndex {
  keys = new Float64Array(1024)
  rows = new Uint32Array(1024)
  appendedAt = new Float64Array(1024)
  offsets = new Float64Array(1024)
  lengths = new Uint32Array(1024)
  gone = new Uint8Array(1024)
  segments: Segment[] = []
  head = 0
  end = 0

  push (key: number, rows: number, appendedAt: number, segment: Segment, offset: number, length: number): void {
    if (this.end === this.keys.length) this.grow()
    const i = this.end++
    this.keys[i] = key
    this.rows[i] = rows
    this.appendedAt[i] = appendedAt
    this.offsets[i] = offset
    this.lengths[i] = length
    this.gone[i] = 0
    this.segments[i] = segment
  }

  /** The first index at or after `head` whose entry holds `position` or starts after it, else `end`. */
  from (position: number): number {
    let lo = this.head
    let hi = this.end
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (this.keys[mid]! + this.rows[mid]! - 1 < position) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** Drops the entries wholly at or below `shipped` from the front; the bytes they took. */
  dropUpTo (shipped: number): number {
    let bytes = 0
    while (this.head < this.end && this.keys[this.head]! + this.rows[this.head]! - 1 <= shipped) {
      if (this.gone[this.head] === 0) bytes += this.lengths[this.head]! + RECORD_HEADER_BYTES
      this.segments[this.head] = undefined as unknown as Segment
      this.head++
    }
    if (this.head === this.end) this.head = this.end = 0
    else if (this.head > 4096 && this.head * 2 > this.end) this.compact()
    return bytes
  }

  private grow (): void {
    const size = this.keys.length * 2
    const wider = <A extends Float64Array | Uint32Array | Uint8Array>(a: A, Make: new (n: number) => A): A => {
      const b = new Make(size)
      b.set(a)
      return b
    }
    this.keys = wider(this.keys, Float64Array)
    this.rows = wider(this.rows, Uint32Array)
    this.appendedAt = wider(this.appendedAt, Float64Array)
    this.offsets = wider(this.offsets, Float64Array)
    this.lengths = wider(this.lengths, Uint32Array)
    this.gone = wider(this.gone, Uint8Array)
  }

  private compact (): void {
    const { head, end } = this
    for (const a of [this.keys, this.rows, this.appendedAt, this.offsets, this.lengths, this.gone]) a.copyWithin(0, head, end)
    this.segments = this.segments.slice(head, end)
    this.head = 0
    this.end = end - head
  }
}

const call = <T>(fn: (cb: (err: NodeJS.ErrnoException | null, value: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))))

export class SegmentFiles {
  private readonly index = new EntryIndex()
  private segments: Segment[] = []
  private writing: { segment: Segment; fd: number } | null = null
  private nextSeq: number
  private writes = 0
  /** Bytes of the entries held (record headers included), shipped ones excepted. */
  bytes = 0
  /** Bytes of an unfinished write cut off the newest segment at open (0 when none). */
  cutBytes = 0

  private constructor (private readonly dir: string) {
    this.nextSeq = 1
  }

  /**
   * Opens the segments under `dir` (which exists), indexing every record in them. `shipped` (the
   * log's) tells where a damaged run of bytes that starts a segment is, when the segments before it
   * have been deleted; `acknowledged` (at least `shipped`: the end of the insert under way) is a
   * position known to have been acknowledged, so bytes that should hold it are damage, never a write
   * the process did not finish.
   */
  static open (dir: string, shipped: number, acknowledged = shipped): SegmentFiles {
    const files = new SegmentFiles(dir)
    const found = readdirSync(dir).map((name) => SEGMENT_NAME.exec(name)).filter((m) => m !== null)
      .map((m) => Number(m[1])).sort((a, b) => a - b)
    // The newest segment holding bytes: a newer, empty one (made for a write that never came) is not
    // where an unfinished write can be.
    let newest = found.length - 1
    while (newest > 0 && statSync(files.pathOf(found[newest]!)).size === 0) newest--
    const scanned: { segment: Segment; records: { key: number; rows: number; appendedAt: number; offset: number; length: number }[]; damaged: { offset: number; length: number } | null }[] = []
    let lastRecorded = shipped
    for (const [n, seq] of found.entries()) {
      const segment: Segment = { seq, path: files.pathOf(seq), size: 0, last: 0, readFd: null }
      files.nextSeq = seq + 1
      const buf = readFileSync(segment.path)
      const records = []
      let at = 0
      for (let record = recordAt(buf, at); record; record = recordAt(buf, at)) {
        const header = entryHeader(record.entry)
        const rows = header?.rows || 1
        records.push({ key: record.key, rows, appendedAt: header?.appendedAt ?? 0, offset: at + RECORD_HEADER_BYTES, length: record.entry.length })
        lastRecorded = Math.max(lastRecorded, record.key + rows - 1)
        at += RECORD_HEADER_BYTES + record.entry.length
      }
      let damaged = at < buf.length ? { offset: at, length: buf.length - at } : null
      // The newest segment may end in a write the process did not live to finish (a kill or a crash
      // part-way through its system call): never acknowledged, so cut off, not quarantined; unless
      // positions known to be acknowledged have no record (they were in those bytes).
      if (damaged && n === newest && lastRecorded >= acknowledged && unfinishedWriteAt(buf, at)) {
        cutSync(segment.path, at)
        files.cutBytes = buf.length - at
        damaged = null
      }
      if (at === 0 && !damaged) {
        unlinkSync(segment.path) // made for a commit that failed, or that did not finish
        continue
      }
      segment.size = damaged ? buf.length : at
      scanned.push({ segment, records, damaged })
    }
    let last = 0
    scanned.forEach(({ segment, records, damaged }, i) => {
      files.segments.push(segment)
      for (const r of records) {
        files.index.push(r.key, r.rows, r.appendedAt, segment, r.offset, r.length)
        files.bytes += RECORD_HEADER_BYTES + r.length
        last = segment.last = r.key + r.rows - 1
      }
      if (!damaged) return
      // Not a whole record: the rest of this segment is one damaged entry, at the next position not
      // shipped, unless the positions up to the next segment's first record have all shipped (it was
      // quarantined before).
      const key = Math.max(last, shipped) + 1
      const following = scanned.slice(i + 1).find((s) => s.records.length > 0)?.records[0]?.key ?? Infinity
      if (key >= following) return
      files.index.push(key, 1, 0, segment, damaged.offset, damaged.length)
      files.bytes += RECORD_HEADER_BYTES + damaged.length // as dropped and forgotten entries count it
      last = segment.last = key
    })
    return files
  }

  /** The position of the last row on disk (0 when none). */
  get lastPosition (): number {
    return this.index.end > this.index.head ? this.index.keys[this.index.end - 1]! + this.index.rows[this.index.end - 1]! - 1 : 0
  }

  /**
   * Writes entries (in key order, after every entry written before) as records at the end of the
   * current segment, with one `writev`, synced (O_DSYNC) when it resolves. A write that fails is
   * undone (the segment cut back to where it ended), or, if that fails too, the segment is left and
   * the next write starts another; the entries are not indexed either way.
   */
  async write (entries: EntryToWrite[]): Promise<void> {
    let size = 0
    for (const e of entries) size += RECORD_HEADER_BYTES + e.entry.length
    this.writes++
    try {
      if (this.writing && this.writing.segment.size > 0 && this.writing.segment.size + size > SEGMENT_MAX_BYTES) this.retire()
      const { segment, fd } = this.writing ?? await this.start()
      try {
        await this.append(fd, records(entries), size)
      } catch (err) {
        await this.undo(fd, segment.size)
        throw err
      }
      this.indexWritten(segment, entries, size)
    } finally {
      this.writes--
    }
  }

  /** As `write`, blocking (for the start, when entries of an earlier release's format are moved here). */
  writeSync (entries: EntryToWrite[]): void {
    const segment = this.nextSegment()
    const fd = openSync(segment.path, WRITE_FLAGS, 0o600)
    try {
      syncDirectorySync(this.dir)
    } catch (err) {
      closeSync(fd)
      unlinkSync(segment.path)
      throw err
    }
    this.begin(segment, fd)
    const bytes = Buffer.concat(records(entries))
    for (let done = 0; done < bytes.length;) done += writeSync(fd, bytes, done)
    this.indexWritten(segment, entries, bytes.length)
  }

  private indexWritten (segment: Segment, entries: EntryToWrite[], size: number): void {
    let offset = segment.size
    for (const e of entries) {
      this.index.push(e.key, e.rows, e.appendedAt, segment, offset + RECORD_HEADER_BYTES, e.entry.length)
      offset += RECORD_HEADER_BYTES + e.entry.length
    }
    segment.size = offset
    segment.last = entries[entries.length - 1]!.key + entries[entries.length - 1]!.rows - 1
    this.bytes += size
  }

  /** Writes `buffers` (`size` bytes) at the end of the file, going on after a short write. */
  private async append (fd: number, buffers: Buffer[], size: number): Promise<void> {
    let left = buffers
    let remaining = size
    while (remaining > 0) {
      const written = await call<number>((cb) => writev(fd, left, cb))
      remaining -= written
      if (remaining === 0) return
      left = skipBytes(left, written)
    }
  }

  /** Cuts the segment back to `size` bytes after a failed write, or leaves it when that fails too. */
  private async undo (fd: number, size: number): Promise<void> {
    try {
      await call<void>((cb) => ftruncate(fd, size, (err) => cb(err, undefined)))
      await call<void>((cb) => fdatasync(fd, (err) => cb(err, undefined)))
    } catch {
      this.retire() // what it holds past `size` is never indexed while this process runs
    }
  }

  /** Starts a new segment for writing; its name is durable before anything is written to it. */
  private async start (): Promise<{ segment: Segment; fd: number }> {
    const segment = this.nextSegment()
    const fd = await call<number>((cb) => open(segment.path, WRITE_FLAGS, 0o600, cb))
    try {
      await syncDirectory(this.dir)
    } catch (err) {
      close(fd, () => {})
      unlink(segment.path, () => {})
      throw err
    }
    return this.begin(segment, fd)
  }

  /** The next segment, empty and not yet on disk. */
  private nextSegment (): Segment {
    const seq = this.nextSeq++
    return { seq, path: this.pathOf(seq), size: 0, last: 0, readFd: null }
  }

  /** Makes a segment whose file is durable the one written to. */
  private begin (segment: Segment, fd: number): { segment: Segment; fd: number } {
    this.segments.push(segment)
    this.writing = { segment, fd }
    return this.writing
  }

  /** Stops writing the current segment (its records stay). */
  private retire (): void {
    if (!this.writing) return
    close(this.writing.fd, () => {})
    this.writing = null
  }

  /** The entries from the one holding `position` on, in key order, without their bytes. */
  * entriesFrom (position: number): Generator<IndexedEntry & { at: number }> {
    const ix = this.index
    for (let i = ix.from(position); i < ix.end; i++) {
      if (ix.gone[i] === 1) continue
      yield { at: i, key: ix.keys[i]!, rows: ix.rows[i]!, appendedAt: ix.appendedAt[i]!, bytes: ix.lengths[i]! + RECORD_HEADER_BYTES }
    }
  }

  /** The bytes of the entry at index `at` (from entriesFrom), read from its segment. */
  read (at: number): Buffer {
    const ix = this.index
    const segment = ix.segments[at]!
    segment.readFd ??= openSync(segment.path, 'r')
    const length = ix.lengths[at]!
    const buf = Buffer.allocUnsafe(length)
    let done = 0
    while (done < length) {
      const n = readSync(segment.readFd, buf, done, length - done, ix.offsets[at]! + done)
      if (n === 0) return buf.subarray(0, done) // shorter than recorded: decoded as damaged
      done += n
    }
    return buf
  }

  /**
   * Forgets the entry whose first position is `key` (a damaged entry, quarantined): it is not read
   * again while this process runs. By key, not index: the index may have been compacted since the read.
   */
  forget (key: number): void {
    const at = this.index.from(key)
    if (at >= this.index.end || this.index.keys[at] !== key || this.index.gone[at] === 1) return
    this.index.gone[at] = 1
    this.bytes -= this.index.lengths[at]! + RECORD_HEADER_BYTES
  }

  /** When the oldest entry holding a row after `shipped` was appended (null when none). */
  oldestAfter (shipped: number): number | null {
    const first = this.entriesFrom(shipped + 1).next()
    return first.done ? null : first.value.appendedAt || null
  }

  /** Forgets the entries wholly at or below `shipped` (their bytes are free from now on). */
  dropShipped (shipped: number): void {
    this.bytes -= this.index.dropUpTo(shipped)
  }

  /**
   * Deletes the segments whose rows have all shipped, once that is durably recorded: the segment
   * being written too, if it holds ROLL_SHIPPED_BYTES and no write is under way (the next write
   * starts another).
   */
  async deleteShipped (shipped: number): Promise<void> {
    const done: Segment[] = []
    while (this.segments.length > 0) {
      const segment = this.segments[0]!
      if (segment.last > shipped) break
      if (segment === this.writing?.segment) {
        if (this.writes > 0 || segment.size < ROLL_SHIPPED_BYTES) break
        this.retire()
      }
      done.push(this.segments.shift()!)
    }
    for (const segment of done) {
      if (segment.readFd !== null) closeSync(segment.readFd)
      await call<void>((cb) => unlink(segment.path, (err) => cb(err, undefined))).catch(() => {})
    }
  }

  /** Closes every file (after the last write has resolved). */
  close (): void {
    this.retire()
    for (const segment of this.segments) {
      if (segment.readFd !== null) closeSync(segment.readFd)
      segment.readFd = null
    }
  }

  private pathOf (seq: number): string {
    return join(this.dir, `${String(seq).padStart(12, '0')}.seg`)
  }

  /** The keys of the records on disk under `dir`, in order (for tests and operators). */
  static keysOn (dir: string): { key: number; bytes: number }[] {
    const files = SegmentFiles.open(dir, 0)
    const keys = [...files.entriesFrom(0)].map((e) => ({ key: e.key, bytes: e.bytes - RECORD_HEADER_BYTES }))
    files.close()
    return keys
  }
}

/** Entries as records: each entry behind its record header. */
function records (entries: EntryToWrite[]): Buffer[] {
  const buffers: Buffer[] = []
  for (const e of entries) {
    const header = Buffer.allocUnsafe(RECORD_HEADER_BYTES)
    header.writeUInt32LE(e.entry.length, 4)
    header.writeDoubleLE(e.key, 8)
    header.writeUInt32LE(crc32(header.subarray(4)), 0)
    buffers.push(header, e.entry)
  }
  return buffers
}

/** The record at `at` in a segment's bytes, or null when what is there is not a whole record. */
function recordAt (buf: Buffer, at: number): { key: number; entry: Buffer } | null {
  if (buf.length - at < RECORD_HEADER_BYTES) return null
  if (buf.readUInt32LE(at) !== crc32(buf.subarray(at + 4, at + RECORD_HEADER_BYTES))) return null
  const length = buf.readUInt32LE(at + 4)
  const start = at + RECORD_HEADER_BYTES
  if (start + length > buf.length) return null
  return { key: buf.readDoubleLE(at + 8), entry: buf.subarray(start, start + length) }
}

/**
 * Whether what follows a segment's last whole record, at `at`, is a write that did not finish: a
 * record too short for its header or for its length (a prefix of a record), or a run of zero bytes
 * (a size the file system extended before a power loss wrote the data). Anything else is damage.
 */
function unfinishedWriteAt (buf: Buffer, at: number): boolean {
  if (buf.length - at < RECORD_HEADER_BYTES) return true
  if (buf.readUInt32LE(at) === crc32(buf.subarray(at + 4, at + RECORD_HEADER_BYTES))) return true // whole header, length past the end
  return buf.subarray(at).every((b) => b === 0)
}

/** Buffers less their first `n` bytes. */
function skipBytes (buffers: Buffer[], n: number): Buffer[] {
  let i = 0
  while (n >= buffers[i]!.length) n -= buffers[i++]!.length
  return [buffers[i]!.subarray(n), ...buffers.slice(i + 1)]
}

/** Cuts a file to `size` bytes, durably (a cut lost to a power loss would come back as damage). */
function cutSync (path: string, size: number): void {
  const fd = openSync(path, 'r+')
  try {
    ftruncateSync(fd, size)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** Makes a directory's entries (a new file's name) durable. */
async function syncDirectory (dir: string): Promise<void> {
  const fd = await call<number>((cb) => open(dir, constants.O_RDONLY, cb))
  try {
    await call<void>((cb) => fsync(fd, (err) => cb(err, undefined)))
  } finally {
    close(fd, () => {})
  }
}

/** As `syncDirectory`, blocking. */
function syncDirectorySync (dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY)
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}
