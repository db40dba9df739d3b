import t from 'tap'
import pino from 'pino'
import { join } from 'node:path'
import { spawn, spawnSync } from 'node:child_process'
import { appendFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { open } from 'lmdb'
import { migrateClickHouse } from '../../../src/storage/clickhouse-client.ts'
import { EventsRepository, INSERT_COLUMNS, eventLine } from '../../../src/storage/events-repository.ts'
import { DiskIngestLog } from '../../../src/ingest/log/disk-ingest-log.ts'
import { encodeEntry, logRows, rowBytes } from '../../../src/ingest/log/entry-codec.ts'
import { SegmentFiles } from '../../../src/ingest/log/segment-files.ts'
import { EventShipper } from '../../../src/ingest/shipper.ts'
import { buildEventRow } from '../../../src/domain/event-row.ts'
import { TEST_DATA_DIR, openTestClickHouse, randomId } from '../../helpers/app.ts'
import { logLine, storedCounts } from '../../helpers/stored-events.ts'
import { TS_LOADER_ARGS } from '../../helpers/ts-loader.ts'

const handle = openTestClickHouse()
t.teardown(() => handle.release())
await migrateClickHouse(handle.client)
const events = new EventsRepository(handle.client)
const logger = pino({ level: 'silent' })
const caps = { maxRows: 1000, maxBytes: 1 << 24, minIntervalMs: 0 }

const countFor = (userId: string) => storedCounts(handle.client, userId)

const logDir = () => join(TEST_DATA_DIR, randomId('log-'))
const insert = (body: Buffer, token: string) => events.insertBlock(body, token)

/** Ships everything `log` holds with a new shipper, as the next start does; the tokens it sent. */
async function shipOnRestart (log: DiskIngestLog): Promise<string[]> {
  const tokens: string[] = []
  const shipper = new EventShipper(log, (body, token) => {
    tokens.push(token)
    return insert(body, token)
  }, caps, logger)
  shipper.start()
  const drained = await shipper.drain(10_000)
  await shipper.stop(1000)
  if (!drained) throw new Error('the log was not shipped within 10 s')
  return tokens
}

t.test('appends get consecutive positions; read, ship and trim; the state survives a reopen', async (t) => {
  const dir = logDir()
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  const user = randomId('u-')
  t.equal(await log.append([logLine(user), logLine(user)]), 2)
  t.equal(await log.append([logLine(user)]), 3)
  t.equal(log.stats().rows, 3)
  t.ok(log.stats().oldestAppendedAt! <= Date.now())
  const rows = logRows(await log.read(0, 2, 1 << 20))
  t.same(rows.map((r) => r.position), [1, 2], 'the row cap cuts inside an entry')
  t.same((logRows(await log.read(1, 10, 1 << 20))).map((r) => r.position), [2, 3])
  await log.markShipped(2)
  t.equal(log.stats().rows, 1)
  t.throws(() => DiskIngestLog.open({ dir, maxBytes: 1 << 30 }), /already open/, 'one owner per directory')
  await log.close()
  const again = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => again.close())
  t.equal(again.shipped, 2)
  t.equal(again.logId, log.logId, 'the log keeps its id, so replayed tokens match')
  t.same((logRows(await again.read(again.shipped, 10, 1 << 20))).map((r) => r.position), [3])
  t.equal(await again.append([logLine(user)]), 4, 'positions continue after a reopen')
})

t.test('appends that wait for the same commit share one entry: positions in call order, rows read back in order, after a reopen too', async (t) => {
  const dir = logDir()
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  const user = randomId('u-')
  const sent = Array.from({ length: 40 }, (_, i) => [logLine(user, { reasoning: `append ${i}` }), logLine(user, { reasoning: `append ${i} second` })])
  const lasts = await Promise.all(sent.map((lines) => log.append(lines)))
  t.same(lasts, sent.map((_, i) => 2 * i + 2), 'each append is told the position of its last row, in call order')
  const rows = logRows(await log.read(0, 1000, 1 << 24))
  t.same(rows.map((r) => r.line), sent.flat(), 'the rows read back in position order')
  const stored = SegmentFiles.keysOn(dir).length
  t.ok(stored < sent.length / 4, `${sent.length} concurrent appends were written as ${stored} entries`)
  await log.close()
  const reopened = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => reopened.close())
  t.same((logRows(await reopened.read(0, 1000, 1 << 24))).map((r) => r.line), sent.flat(), 'read from disk after a reopen, the same rows in the same order')
  t.equal(await reopened.append([logLine(user)]), 81, 'positions go on after the last one')
})

t.test('reads cut by rows, by bytes and by refused positions give exactly the rows a line-by-line read would, from the tail and from disk', async (t) => {
  const dir = logDir()
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  const user = randomId('u-')
  // Appends of 1 to 7 rows of varied sizes (multi-byte characters included), merged into shared entries.
  const sent = Array.from({ length: 30 }, (_, i) => Array.from({ length: 1 + (i % 7) }, (_, j) => logLine(user, { reasoning: `${i}.${j} ${'é'.repeat((i * 7 + j * 13) % 50)}` })))
  await Promise.all(sent.map((lines) => log.append(lines)))
  const all = sent.flat()
  const total = all.length
  /** The model: rows after `after`, up to `upTo`, skipping `skip`, within the caps (each line's bytes + 1). */
  const expected = (after: number, maxRows: number, maxBytes: number, upTo: number, skip: { from: number; to: number }[] = []) => {
    const out: { position: number; line: string }[] = []
    let bytes = 0
    for (let p = after + 1; p <= Math.min(upTo, total); p++) {
      if (skip.some((r) => p >= r.from && p <= r.to)) continue
      const size = Buffer.byteLength(all[p - 1]!) + 1
      if (out.length > 0 && (out.length >= maxRows || bytes + size > maxBytes)) break
      out.push({ position: p, line: all[p - 1]! })
      bytes += size
    }
    return out
  }
  const cases: [number, number, number][] = []
  for (const after of [0, 1, 5, 17, 40, total - 1]) {
    for (const maxRows of [1, 3, 10, 1000]) {
      for (const maxBytes of [1, 900, 5000, 1 << 24]) cases.push([after, maxRows, maxBytes])
    }
  }
  for (const [after, maxRows, maxBytes] of cases) {
    t.same(logRows(await log.read(after, maxRows, maxBytes)), expected(after, maxRows, maxBytes, Infinity), `from the tail: after ${after}, ${maxRows} rows, ${maxBytes} bytes`)
  }
  t.same(logRows(await log.readRange({ from: 9, to: 33 })), expected(8, Infinity, Infinity, 33), 'a recorded range')
  await log.close()
  const reopened = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => reopened.close())
  // Refused positions are only ever skipped on disk reads; set them as a refused commit would.
  const skip = [{ from: 4, to: 6 }, { from: 20, to: 20 }, { from: 50, to: 60 }];
  (reopened as unknown as { refused: typeof skip }).refused = skip
  for (const [after, maxRows, maxBytes] of cases) {
    t.same(logRows(await reopened.read(after, maxRows, maxBytes)), expected(after, maxRows, maxBytes, Infinity, skip), `from disk: after ${after}, ${maxRows} rows, ${maxBytes} bytes`)
  }
})

t.test('no row is read for shipping before its append resolves (its commit flushed), while commits overlap their flushes', async (t) => {
  // Until the first commit is flushed, reads go to disk, where committed rows are visible: a fresh
  // log per round makes that window recur.
  let seenEarly = 0
  let polls = 0
  for (let round = 0; round < 5; round++) {
    const log = DiskIngestLog.open({ dir: logDir(), maxBytes: 1 << 30 })
    const user = randomId('u-')
    let resolvedRows = 0
    const appends = Array.from({ length: 30 }, async (_, i) => {
      // Spread over several commits: each append waits a little longer than the one before.
      await new Promise((resolve) => setTimeout(resolve, i % 6))
      const last = await log.append([logLine(user, { reasoning: `append ${i}` })])
      resolvedRows = Math.max(resolvedRows, last)
    })
    const appending = { done: false }
    void Promise.all(appends).then(() => { appending.done = true })
    while (!appending.done) {
      const rows = logRows(await log.read(0, 1000, 1 << 24))
      if ((rows.at(-1)?.position ?? 0) > resolvedRows) seenEarly++
      polls++
      await new Promise((resolve) => setImmediate(resolve))
    }
    t.equal((logRows(await log.read(0, 1000, 1 << 24))).length, 30, `round ${round}: every row is readable once acknowledged`)
    await log.close()
  }
  t.ok(polls > 50, `polled ${polls} times while appending`)
  t.equal(seenEarly, 0, 'a row was never readable before its append (or a later one) had resolved')
})

t.test('a commit that fails refuses every append it held with 503, gives their bytes back, and the log goes on after the gap', async (t) => {
  const dir = logDir()
  const failures: unknown[] = []
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30, onCommitFailed: (err) => failures.push(err) })
  t.teardown(() => log.close())
  const user = randomId('u-')
  t.equal(await log.append([logLine(user, { reasoning: 'before' })]), 1)
  const bytesBefore = log.stats().bytes
  // The disk refuses the next commit's write (a full disk).
  const files = (log as unknown as { files: { append: (...args: unknown[]) => Promise<void> } }).files
  const append = files.append
  files.append = () => Promise.reject(new Error('ENOSPC: no space left on device'))
  const refused = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => log.append([logLine(user, { reasoning: `lost ${i}` })])))
  files.append = append
  t.ok(refused.every((r) => r.status === 'rejected' && (r.reason as { reason?: string }).reason === 'ingest_log_unavailable'), 'every append of the failed commit is refused (503)')
  t.ok(failures.length >= 1, 'the operator is told')
  t.equal(log.stats().bytes, bytesBefore, 'the refused entries take no room')
  t.equal(log.stats().rows, 1, 'only the row committed before is waiting')
  const next = await log.append([logLine(user, { reasoning: 'after' })])
  t.equal(next, 12, 'positions go on after the gap the refused appends left')
  const rows = logRows(await log.read(0, 100, 1 << 24))
  t.same(rows.map((r) => r.position), [1, 12], 'the rows read are the committed ones, in order')
  t.match(rows[1]!.line, /after/)
})

t.test('a commit that reached the disk but failed its sync is refused, and its rows are never read: not after a later commit, not after a reopen', async (t) => {
  const dir = logDir()
  const failures: unknown[] = []
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30, onCommitFailed: (err) => failures.push(err) })
  const user = randomId('u-')
  t.equal(await log.append([logLine(user, { reasoning: 'before' })]), 1)
  // The records reach the file, then the write is reported failed (EIO from the synced write).
  const files = (log as unknown as { files: { append: (...args: unknown[]) => Promise<void> } }).files
  const append = files.append
  files.append = function (this: unknown, ...args: unknown[]) {
    return append.apply(this, args).then(() => { throw new Error('EIO: the sync failed') })
  }
  const refused = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => log.append([logLine(user, { reasoning: `refused ${i}` })])))
  files.append = append
  t.ok(refused.every((r) => r.status === 'rejected' && (r.reason as { reason?: string }).reason === 'ingest_log_unavailable'), 'every append of the failed commit is refused (503)')
  t.ok(failures.length >= 1, 'the operator is told')
  t.equal(await log.append([logLine(user, { reasoning: 'after' })]), 12, 'positions go on after the refused ones')
  t.same((logRows(await log.read(0, 100, 1 << 24))).map((r) => r.position), [1, 12], 'the refused rows are not read (a client retrying them would store them twice)')
  await log.close()

  t.same(SegmentFiles.keysOn(dir).map((e) => e.key), [1, 12], 'their records were cut off the disk')
  const reopened = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => reopened.close())
  const rows = logRows(await reopened.read(0, 100, 1 << 24))
  t.same(rows.map((r) => r.position), [1, 12], 'nor read after a restart')
  t.match(rows[1]!.line, /after/)
})

t.test('while the disk keeps failing (the removal of refused entries fails too), refused rows are still never read', async (t) => {
  const dir = logDir()
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30, onCommitFailed: () => {} })
  t.teardown(() => log.close())
  const user = randomId('u-')
  t.equal(await log.append([logLine(user, { reasoning: 'before' })]), 1)
  const store = log as unknown as { files: { append: (...args: unknown[]) => Promise<void>; undo: (fd: number, size: number) => Promise<void> }; refused: unknown[] }
  const { append, undo } = store.files
  store.files.append = function (this: unknown, ...args: unknown[]) {
    return append.apply(this, args).then(() => { throw new Error('EIO: the sync failed') })
  }
  // Cutting the records off fails too (a file descriptor that cannot be written).
  store.files.undo = function (this: unknown, _fd: number, size: number) { return undo.call(this, -1, size) }
  // Two commits refused one after the other: positions 2-4, then 5-7.
  for (let round = 0; round < 2; round++) {
    const refused = await Promise.allSettled(Array.from({ length: 3 }, (_, i) => log.append([logLine(user, { reasoning: `refused ${round}.${i}` })])))
    t.ok(refused.every((r) => r.status === 'rejected'), `round ${round} refused`)
  }
  store.files.append = append
  store.files.undo = undo
  t.equal(store.refused.length, 1, 'adjacent refused commits are held as one range')
  t.equal(await log.append([logLine(user, { reasoning: 'after' })]), 8)
  const rows = logRows(await log.read(0, 100, 1 << 24))
  t.same(rows.map((r) => r.position), [1, 8], 'the refused rows, still on disk, are skipped')
  t.match(rows[1]!.line, /after/)
})

t.test('appends waiting for one commit are merged into entries of bounded size', async (t) => {
  const dir = logDir()
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  const user = randomId('u-')
  // 12 appends of ~1 MiB each, all waiting for the same commits.
  const big = 'x'.repeat(1 << 20)
  const lasts = await Promise.all(Array.from({ length: 12 }, (_, i) => log.append([logLine(user, { reasoning: `${i} ${big}` })])))
  t.same(lasts, Array.from({ length: 12 }, (_, i) => i + 1))
  await log.close()
  const sizes = SegmentFiles.keysOn(dir).map((e) => e.bytes)
  t.ok(sizes.length >= 3, `${sizes.length} entries`)
  t.ok(sizes.every((n) => n <= 4 * 1024 * 1024 + (1 << 20) + 1024), `no entry much above 4 MiB (${sizes.map((n) => (n / 1048576).toFixed(1)).join(', ')} MiB)`)
  const reopened = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => reopened.close())
  const rows = logRows(await reopened.read(0, 100, 1 << 30))
  t.same(rows.map((r) => r.position), Array.from({ length: 12 }, (_, i) => i + 1), 'every row reads back in order')
})

t.test('a crash between the insert and the log trim replays the same block, deduplicated in events and rollups', async (t) => {
  const dir = logDir()
  const user = randomId('crash-')
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  const lines = Array.from({ length: 30 }, (_, i) => logLine(user, i % 3 === 0 ? { outcome: 'failed', errorMessage: 'upstream 502', toolExecuted: 'http' } : {}))
  await log.append(lines.slice(0, 10))
  await log.append(lines.slice(10))
  // The insert lands, then the process dies before the shipper can record it: it never returns.
  let landed = 0
  const dying = new EventShipper(log, async (body, token) => {
    await insert(body, token)
    landed++
    await new Promise(() => {})
  }, caps, logger)
  dying.start()
  // eslint-disable-next-line no-unmodified-loop-condition -- another task changes it
  while (landed === 0) await new Promise((resolve) => setTimeout(resolve, 10))
  await dying.stop(50)
  t.same(log.inflight, { from: 1, to: 30 }, 'the block\'s range was recorded before its insert')
  await log.close()
  t.equal((await countFor(user)).events, 30, 'the block is in ClickHouse')

  const restarted = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => restarted.close())
  t.same(await shipOnRestart(restarted), [`${restarted.logId}:1-30`], 'exactly the recorded block was re-sent, with its token')
  const counts = await countFor(user)
  t.equal(counts.events, 30, 'no duplicate in events')
  t.equal(counts.distinct, 30)
  t.equal(counts.spendEvents, 30, 'spend_daily equals the sum over events')
  t.equal(counts.clusterEvents, counts.errors, 'the error rollup equals the error events')
  t.equal(counts.dailyClusterEvents, counts.errors, 'so does the daily error rollup')
  t.equal(counts.hourlyEvents, 30, 'agent_hourly equals the sum over events')
  t.same([counts.sessionEvents, counts.traceEvents], [30, 30], 'the session and trace totals count each event once')
  t.equal(counts.errors, 10)
  t.equal(restarted.stats().rows, 0)
})

t.test('regression: a shutdown that gives up on an insert under way closes the log under it; nothing is written after, and the block ships once at the next start', async (t) => {
  const dir = logDir()
  const user = randomId('held-')
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  await log.append(Array.from({ length: 5 }, () => logLine(user)))
  // A slow ClickHouse insert: it lands only once the test lets it, after the log was closed.
  let release!: () => void
  const held = new Promise<void>((resolve) => { release = resolve })
  let started!: () => void
  const underWay = new Promise<void>((resolve) => { started = resolve })
  let landed!: Promise<void>
  const lines: { msg: string; rows?: unknown }[] = []
  const shipper = new EventShipper(log, (body, token) => {
    const copy = Buffer.from(body)
    started()
    landed = held.then(() => insert(copy, token))
    return landed
  }, caps, pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) }))
  shipper.start()
  await underWay
  // The plugin's shutdown: drain, stop, close the log, each wait cut short by its timeout.
  t.equal(await shipper.drain(20), false, 'the drain gives up on the held insert')
  t.equal(await shipper.stop(20), false, 'so does the stop')
  t.match(lines, [{ msg: /stopped waiting for a ClickHouse insert/, rows: { from: 1, to: 5 } }], 'one line names the rows left to the next start')
  await log.close()
  release()
  await landed
  // Whatever the shipper does with the insert's outcome runs now; a write handed to the closed
  // environment would end the process from LMDB's next commit (setImmediate).
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
  await t.rejects(log.markShipped(5), { name: 'IngestLogClosed' }, 'the closed log refuses writes itself')
  await t.rejects(log.beginInsert({ from: 6, to: 6 }), { name: 'IngestLogClosed' })
  await t.rejects(log.quarantineRows([{ position: 1, line: 'x' }], 'test'), { name: 'IngestLogClosed' })
  t.equal(lines.length, 1, 'and the shipper logs nothing more')
  t.equal((await countFor(user)).events, 5, 'the insert landed after the shutdown')

  const restarted = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => restarted.close())
  t.same(restarted.inflight, { from: 1, to: 5 }, 'the block whose outcome the shutdown did not see is still recorded')
  t.same(await shipOnRestart(restarted), [`${restarted.logId}:1-5`], 'it is re-sent with its token')
  t.match(await countFor(user), { events: 5, distinct: 5 }, 'and stored once')
})

t.test('a close while appends wait for a commit commits them before the environment closes', async (t) => {
  const dir = logDir()
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  // The first append starts a commit; the others wait for the next one, which runs during the close.
  const appends = Array.from({ length: 5 }, (_, i) => log.append([logLine(`u${i}`)]))
  const closed = log.close()
  t.same(await Promise.all(appends), [1, 2, 3, 4, 5])
  await closed
  await t.rejects(log.append([logLine('late')]), { name: 'IngestLogRefused' }, 'appends after the close are refused')
  const reopened = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => reopened.close())
  t.equal(reopened.stats().rows, 5, 'every acknowledged append is on disk')
})

t.test('a damaged tail found at start is quarantined and the rest ships', async (t) => {
  const dir = logDir()
  const user = randomId('damaged-')
  let log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  await log.append([logLine(user), logLine(user)])
  await log.close()
  // Damage the segment the way a torn write or a bad disk would: bytes that are not a record, after the last one.
  const [segment] = readdirSync(dir).filter((name) => name.endsWith('.seg'))
  appendFileSync(join(dir, segment!), 'garbage that is no record at all')
  const damaged: number[] = []
  log = DiskIngestLog.open({ dir, maxBytes: 1 << 30, onDamaged: ({ position }) => damaged.push(position) })
  t.teardown(() => log.close())
  await log.append([logLine(user)])
  const shipper = new EventShipper(log, insert, caps, logger)
  shipper.start()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.same(damaged, [3], 'the damaged entry was reported')
  t.equal((await countFor(user)).events, 3, 'the good rows before and after it are stored')
  t.equal(log.quarantined()[0]!.position, 3)
  t.match(log.quarantined()[0]!.reason, /damaged log entry/)
})

t.test('a full log refuses appends with 503 and Retry-After, and accepts again once shipped', async (t) => {
  const log = DiskIngestLog.open({ dir: logDir(), maxBytes: 64 * 1024 })
  t.teardown(() => log.close())
  const user = randomId('full-')
  let refusal: unknown
  let accepted = 0
  for (let i = 0; i < 1000 && !refusal; i++) {
    try {
      await log.append([logLine(user)])
      accepted++
    } catch (err) {
      refusal = err
    }
  }
  t.match(refusal, { name: 'IngestLogRefused', reason: 'ingest_log_full', retryAfterSeconds: 5 })
  t.match(log.stats().lastRefusal, { reason: 'ingest_log_full', at: Number }, 'the refusal is in the stats /health reads')
  t.ok(Date.now() - log.stats().lastRefusal!.at < 10_000)
  t.ok(accepted > 10)
  const shipper = new EventShipper(log, insert, caps, logger)
  shipper.start()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.ok(await log.append([logLine(user)]), 'accepted again')
  t.equal((await countFor(user)).events, accepted)
})

t.test('a stale lock is taken over: its process is gone, or its pid now names a process started at another time', async (t) => {
  const dir = logDir()
  mkdirSync(dir, { recursive: true })
  const sleeper = spawn('sleep', ['30'])
  t.teardown(() => sleeper.kill())
  writeFileSync(join(dir, 'LOCK'), `${sleeper.pid} 1`)
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  await log.close()
  writeFileSync(join(dir, 'LOCK'), '999999999 1')
  const again = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  await again.close()
  const start = readFileSync(`/proc/${sleeper.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[19]
  writeFileSync(join(dir, 'LOCK'), `${sleeper.pid} ${start}`)
  t.throws(() => DiskIngestLog.open({ dir, maxBytes: 1 << 30 }), /belongs to running process .*LOCK/, 'a live owner keeps it')
})

t.test('a log line holds the row\'s values in the order the insert names its columns', async (t) => {
  const row = buildEventRow({ agentId: 'a', type: 'tx', reasoning: 'r', toolExecuted: 'swap', toolsConsidered: ['x'], durationMs: 5, input: { prompt: 'p' },
    transaction: 'sig', amount: { token: 'SOL', value: 1.5 }, errorMessage: 'e', outcome: 'failed', model: 'gpt-4o',
    metadata: { sessionId: 's', traceId: 'tr', privacyLevel: 'full', cwd: '/c', git: { branch: 'b' }, tool: 'claude-code', tokensBreakdown: { inputBase: 1, cacheCreation: 2, cacheRead: 3, output: 4 } } },
  { eventId: 'evt_1', userId: 'u', agentId: 'c1', receivedAt: Date.now() })
  t.equal(eventLine(row), JSON.stringify(INSERT_COLUMNS.map((c) => row[c])))
})

t.test('the quarantine can be read beside the running owner, for an operator', async (t) => {
  const dir = logDir()
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => log.close())
  await log.quarantineRows([{ position: 7, line: '["bad"]' }], 'Cannot parse input')
  const rows = DiskIngestLog.readQuarantine(dir)
  t.match(rows, [{ position: 7, line: '["bad"]', reason: 'Cannot parse input', at: String }])
  const cli = spawnSync(process.execPath, [...TS_LOADER_ARGS, 'src/cli/quarantine.ts'], { env: { ...process.env, INGEST_LOG_DIR: dir }, encoding: 'utf8' })
  t.equal(cli.status, 0, cli.stderr)
  t.match(JSON.parse(cli.stdout.trim()), { position: 7, reason: 'Cannot parse input' })
})

t.test('an entry damaged inside a segment (its checksum fails) is quarantined; the entries after it ship', async (t) => {
  const dir = logDir()
  const user = randomId('flipped-')
  let log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  await log.append([logLine(user), logLine(user)])
  await log.append([logLine(user)])
  await log.close()
  const [segment] = readdirSync(dir).filter((name) => name.endsWith('.seg'))
  const bytes = readFileSync(join(dir, segment!))
  bytes[40] = bytes[40]! ^ 0xff // inside the first entry's rows, past both headers
  writeFileSync(join(dir, segment!), bytes)
  const damaged: number[] = []
  log = DiskIngestLog.open({ dir, maxBytes: 1 << 30, onDamaged: ({ position }) => damaged.push(position) })
  t.teardown(() => log.close())
  t.equal(await log.append([logLine(user)]), 4, 'positions go on after the damaged entry\'s rows')
  const shipper = new EventShipper(log, insert, caps, logger)
  shipper.start()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.same(damaged, [1])
  t.equal((await countFor(user)).events, 2, 'the entry after it and the new one are stored')
  t.equal(log.quarantined()[0]!.position, 1)
})

t.test('entries an earlier release kept in LMDB are moved to the segment files at start, once', async (t) => {
  const dir = logDir()
  mkdirSync(dir, { recursive: true })
  const user = randomId('moved-')
  const lines = [logLine(user, { reasoning: 'one' }), logLine(user, { reasoning: 'two' }), logLine(user, { reasoning: 'three' })]
  const env = open({ path: dir, maxDbs: 4 })
  const entries = env.openDB<Buffer, number>('entries', { encoding: 'binary' })
  await entries.put(1, encodeEntry([rowBytes(lines.slice(0, 2))], Date.now()).entry)
  await entries.put(3, encodeEntry([rowBytes(lines.slice(2))], Date.now()).entry)
  await env.close()
  let log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.same(logRows(await log.read(0, 100, 1 << 24)).map((r) => r.line), lines, 'every row reads back, in order')
  t.equal(await log.append([logLine(user)]), 4, 'positions go on after them')
  await log.close()
  const raw = open({ path: dir, readOnly: true, maxDbs: 4 })
  t.equal(raw.openDB('entries', { encoding: 'binary' }).getCount(), 0, 'nothing is left in LMDB')
  await raw.close()
  log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => log.close())
  t.same(logRows(await log.read(0, 100, 1 << 24)).map((r) => r.position), [1, 2, 3, 4], 'and each row is there once after another start')
})

t.test('segments are deleted once their rows have shipped; the log goes on in a new one', async (t) => {
  const dir = logDir()
  const log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  t.teardown(() => log.close())
  const segments = () => readdirSync(dir).filter((name) => name.endsWith('.seg'))
  const big = 'x'.repeat(400 * 1024)
  for (let i = 0; i < 3; i++) await log.append([logLine('u', { reasoning: `${i} ${big}` })])
  t.equal(segments().length, 1)
  await log.markShipped(2)
  t.equal(segments().length, 1, 'a segment with a row still to ship stays')
  t.equal(log.stats().rows, 1)
  await log.markShipped(3)
  t.same(segments(), [], 'shipped through, the segment (over 1 MiB) is deleted')
  t.equal(log.stats().bytes, 0)
  t.equal(await log.append([logLine('u', { reasoning: 'after' })]), 4)
  t.equal(segments().length, 1, 'the next append starts another')
  t.same(logRows(await log.read(3, 10, 1 << 24)).map((r) => r.position), [4])
})

t.test('damage at the start of a segment whose predecessors were deleted is quarantined, not taken for shipped rows', async (t) => {
  const dir = logDir()
  let log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  const big = 'x'.repeat(400 * 1024)
  for (let i = 0; i < 3; i++) await log.append([logLine('u', { reasoning: `${i} ${big}` })])
  await log.markShipped(3) // the first segment is deleted
  await log.append([logLine('u', { reasoning: 'four' })])
  await log.append([logLine('u', { reasoning: 'five' })])
  await log.close()
  const [segment] = readdirSync(dir).filter((name) => name.endsWith('.seg'))
  const bytes = readFileSync(join(dir, segment!))
  bytes[0] = bytes[0]! ^ 0xff // the first record's header
  writeFileSync(join(dir, segment!), bytes)
  const damaged: number[] = []
  log = DiskIngestLog.open({ dir, maxBytes: 1 << 30, onDamaged: ({ position }) => damaged.push(position) })
  t.teardown(() => log.close())
  t.equal(log.stats().rows, 1, 'the damaged bytes wait to ship as one entry')
  t.same(logRows(await log.read(3, 10, 1 << 24)), [], 'nothing readable is there')
  t.same(damaged, [4], 'reported at the first position not shipped')
  t.equal(log.quarantined()[0]!.position, 4)
  t.equal(await log.append([logLine('u', { reasoning: 'six' })]), 5)
})

t.test('a write the process did not live to finish is cut off the newest segment at start, not quarantined', async (t) => {
  for (const [what, tail] of [['a record cut short', null], ['zero bytes', Buffer.alloc(4096)]] as const) {
    const dir = logDir()
    const lines = [logLine('u', { reasoning: 'one' }), logLine('u', { reasoning: 'two' })]
    let log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
    for (const line of lines) await log.append([line])
    await log.close()
    const [segment] = readdirSync(dir).filter((name) => name.endsWith('.seg'))
    const path = join(dir, segment!)
    const whole = readFileSync(path)
    // A record cut 10 bytes short of its end (the first one's bytes), after the whole ones.
    const partial = whole.subarray(0, 16 + whole.readUInt32LE(4) - 10)
    appendFileSync(path, tail ?? partial)
    const cut: number[] = []
    const damaged: number[] = []
    log = DiskIngestLog.open({ dir, maxBytes: 1 << 30, onUnfinishedWrite: ({ bytes }) => cut.push(bytes), onDamaged: ({ position }) => damaged.push(position) })
    t.same(cut, [(tail ?? partial).length], `${what}: cut off, and told`)
    t.equal(readFileSync(path).length, whole.length, `${what}: the segment is as it was`)
    t.same(logRows(await log.read(0, 10, 1 << 24)).map((r) => r.line), lines)
    t.equal(await log.append([logLine('u', { reasoning: 'three' })]), 3, `${what}: positions go on`)
    t.same([damaged, log.quarantined()], [[], []], `${what}: nothing quarantined`)
    await log.close()
  }
})

t.test('damage to rows of the insert under way: quarantined, and new rows never take their positions (they ship)', async (t) => {
  for (const [what, damage] of [
    ['a header byte flipped', (buf: Buffer, at: number) => { buf[at + 1]! ^= 0xff }],
    ['zeros from there on', (buf: Buffer, at: number) => { buf.fill(0, at) }],
  ] as const) {
    const dir = logDir()
    let log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
    await log.append(['["a1"]', '["a2"]', '["a3"]'])
    await log.markShipped(3)
    await log.append(['["b4"]', '["b5"]', '["b6"]'])
    await log.append(['["c7"]', '["c8"]'])
    await log.beginInsert({ from: 4, to: 8 }) // the insert went out; the process died before its mark
    await log.close()
    const [segment] = readdirSync(dir).filter((name) => name.endsWith('.seg'))
    const path = join(dir, segment!)
    const buf = readFileSync(path)
    damage(buf, 16 + buf.readUInt32LE(4)) // the record after the first (rows 4-6)
    writeFileSync(path, buf)
    const cut: number[] = []
    log = DiskIngestLog.open({ dir, maxBytes: 1 << 30, onUnfinishedWrite: ({ bytes }) => cut.push(bytes) })
    t.same(cut, [], `${what}: acknowledged rows were there, so not taken for an unfinished write`)
    t.equal(await log.append(['["new9"]', '["new10"]']), 10, `${what}: positions go on after the insert under way`)
    const bodies: string[] = []
    const shipper = new EventShipper(log, async (body) => { bodies.push(body.toString()) }, caps, logger)
    shipper.start()
    t.ok(await shipper.drain(10_000), `${what}: shipped`)
    await shipper.stop(1000)
    t.match(bodies.join(''), /\["new9"\]\n\["new10"\]/, `${what}: the new rows were inserted`)
    t.equal(log.shipped, 10)
    t.same(log.quarantined().map((q) => q.position), [4], `${what}: the damaged rows quarantined`)
    await log.close()
  }
})

t.test('a write cut short in the newest segment is cut off, not quarantined, when a newer empty segment was made after it', async (t) => {
  const dir = logDir()
  let log = DiskIngestLog.open({ dir, maxBytes: 1 << 30 })
  await log.append([logLine('u', { reasoning: 'one' })])
  await log.close()
  const [segment] = readdirSync(dir).filter((name) => name.endsWith('.seg'))
  const path = join(dir, segment!)
  const whole = readFileSync(path)
  appendFileSync(path, whole.subarray(0, 20)) // a record cut short
  // The next start made a segment for its first write and died before writing to it.
  writeFileSync(join(dir, segment!.replace(/\d+(?=\.seg$)/, (n) => String(Number(n) + 1).padStart(n.length, '0'))), '')
  t.equal(readdirSync(dir).filter((name) => name.endsWith('.seg')).length, 2)
  const cut: number[] = []
  const damaged: number[] = []
  log = DiskIngestLog.open({ dir, maxBytes: 1 << 30, onUnfinishedWrite: ({ bytes }) => cut.push(bytes), onDamaged: ({ position }) => damaged.push(position) })
  t.teardown(() => log.close())
  t.same(cut, [20], 'cut off, and told')
  t.same([damaged, log.quarantined()], [[], []], 'nothing quarantined')
  t.equal(await log.append([logLine('u', { reasoning: 'two' })]), 2)
})
