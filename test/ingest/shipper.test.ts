import t from 'tap'
import pino from 'pino'
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net'
import { createClient, ClickHouseLogLevel } from '@clickhouse/client'
import { migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { rowBytes } from '../../src/ingest/log/entry-codec.ts'
import { EventShipper, isRowRefusal, type InsertBlock } from '../../src/ingest/shipper.ts'
import { MemoryIngestLog } from '../helpers/memory-ingest-log.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'
import { logLine, storedCounts } from '../helpers/stored-events.ts'

// This file's ClickHouse starts empty (in both modes): the first test ships before the tables exist, and
// applies the schema.
const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
const events = new EventsRepository(handle.client)
const logger = pino({ level: 'silent' })
const caps = { maxRows: 1000, maxBytes: 1 << 24, minIntervalMs: 0 }
const insert = (body: Buffer, token: string) => events.insertBlock(body, token)
const countFor = (userId: string) => storedCounts(handle.client, userId)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Appends the lines as one append (one request's events). */
const append = (log: MemoryIngestLog, lines: string[]) => log.append(rowBytes(lines))

/** An insert held until `release()`: the block is in flight for as long as a test needs. */
function heldInsert () {
  let release!: () => void
  const held = new Promise<void>((resolve) => { release = resolve })
  const calls: string[] = []
  const insertHeld: InsertBlock = async (body, token) => {
    calls.push(token)
    await held
    await insert(body, token)
  }
  return { insert: insertHeld, calls, release }
}

t.test('before ClickHouse has its tables, the insert is retried under the same token and nothing is marked shipped; once they exist it ships once', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('early-')
  await append(log, [logLine(user), logLine(user)])
  await append(log, Array.from({ length: 4 }, () => logLine(user)))
  const tokens: string[] = []
  // An attempt made while the schema is being applied waits for it: one landing between the
  // creation of `events` and of its views would reach the table but not the rollups, which the
  // service never does (it applies the schema before it ships).
  let migrating: Promise<unknown> | null = null
  let attempt: Promise<void> = Promise.resolve()
  const shipper = new EventShipper(log, async (body, token) => {
    tokens.push(token)
    if (migrating) await migrating
    attempt = insert(body, token)
    return attempt
  }, caps, logger)
  t.teardown(() => shipper.stop(1000))
  // Whatever becomes of this test, the ones after it find the tables.
  t.teardown(() => migrateClickHouse(handle.client))
  shipper.start()
  while (tokens.length < 2) await sleep(20)
  t.match(shipper.status.retrying, { code: 'UNKNOWN_TABLE' }, 'a missing table is an outage, not a refusal of the rows')
  t.equal(log.shipped, 0, 'nothing is marked shipped while the insert fails')
  t.same(log.inflight, { from: 1, to: 6 }, 'the block stays the recorded range')
  t.equal(log.stats().quarantined, 0)
  migrating = attempt.catch(() => {}).then(() => migrateClickHouse(handle.client))
  await migrating
  t.ok(await shipper.drain(30_000))
  t.same([...new Set(tokens)], [`${log.logId}:1-6`], 'every attempt carried the block\'s token')
  t.match(await countFor(user), { events: 6, distinct: 6, spendEvents: 6 })
  t.equal(shipper.status.retrying, null, 'recovered')
})

t.test('ships what waits in blocks cut by the row cap, in position order, each under the token of its range', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('rows-')
  const lines = Array.from({ length: 25 }, (_, i) => logLine(user, { reasoning: `row ${i}` }))
  // Appends of 7, 3, 12 and 3 rows: blocks cut inside appends and across them.
  for (const [from, to] of [[0, 7], [7, 10], [10, 22], [22, 25]]) await append(log, lines.slice(from, to))
  const blocks: { token: string; body: string }[] = []
  const shipper = new EventShipper(log, (body, token, rows) => {
    blocks.push({ token, body: body.toString() })
    t.equal(body.toString().split('\n').length - 1, rows, 'the insert is told the rows of its block')
    return insert(body, token)
  }, { ...caps, maxRows: 10 }, logger)
  shipper.start()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.same(blocks.map((b) => b.token), [`${log.logId}:1-10`, `${log.logId}:11-20`, `${log.logId}:21-25`])
  t.equal(blocks.map((b) => b.body).join(''), lines.map((l) => `${l}\n`).join(''), 'every row once, in position order, each line ending in a newline')
  t.match(await countFor(user), { events: 25, distinct: 25 })
  t.match(log.stats(), { rows: 0, bytes: 0 }, 'the shipped rows are trimmed')
})

t.test('the byte cap makes each block as large as fits; a row larger than the cap ships alone', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('bytes-')
  const small = Array.from({ length: 10 }, (_, i) => logLine(user, { reasoning: `row ${i}` }))
  const maxBytes = 3 * (Buffer.byteLength(small[0]!) + 1) + 10
  const large = logLine(user, { reasoning: 'x'.repeat(maxBytes) })
  const lines = [...small.slice(0, 5), large, ...small.slice(5)]
  await append(log, lines)
  const blocks: string[][] = []
  const shipper = new EventShipper(log, (body, token) => {
    blocks.push(body.toString().split('\n').slice(0, -1))
    return insert(body, token)
  }, { ...caps, maxBytes }, logger)
  shipper.start()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.same(blocks.flat(), lines, 'every row once, in order')
  const size = (rows: string[]) => rows.reduce((n, row) => n + Buffer.byteLength(row) + 1, 0)
  t.same(blocks.filter((b) => b.includes(large)), [[large]], 'the large row is a block of its own')
  for (let i = 0; i < blocks.length - 1; i++) {
    const block = blocks[i]!
    if (block.includes(large)) continue
    t.ok(size(block) <= maxBytes, `block ${i} is within the cap`)
    t.ok(size(block) + size([blocks[i + 1]![0]!]) > maxBytes, `block ${i} took every row that fit`)
  }
  t.equal((await countFor(user)).events, 11)
})

t.test('a block is marked shipped only once its insert returned; until then a reader of its user waits', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('held-')
  const held = heldInsert()
  const shipper = new EventShipper(log, held.insert, caps, logger)
  t.teardown(() => shipper.stop(1000))
  shipper.start()
  const last = await append(log, Array.from({ length: 4 }, () => logLine(user)))
  // What the ingestion service does after a 202.
  shipper.acknowledged(user, last)
  while (held.calls.length === 0) await sleep(10)
  t.same(log.inflight, { from: 1, to: 4 }, 'the block is recorded before its insert')
  t.equal(log.shipped, 0, 'and not marked shipped while the insert runs')
  t.equal(log.stats().rows, 4)
  t.equal(await shipper.waitForUser(user, 50), false, 'a read of the user is not told the rows are in')
  t.equal(await shipper.waitForUser(randomId('other-'), 50), true, 'a user with nothing waiting does not wait')
  const reader = shipper.waitForUser(user, 30_000)
  held.release()
  t.equal(await reader, true, 'the read goes on once the insert returned')
  t.equal(log.shipped, 4)
  t.equal(log.inflight, null)
  t.equal((await countFor(user)).events, 4)
})

t.test('stop waits for the insert under way, which is marked shipped; a stopped shipper inserts nothing more', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('stop-')
  const held = heldInsert()
  const shipper = new EventShipper(log, held.insert, caps, logger)
  shipper.start()
  await append(log, [logLine(user), logLine(user), logLine(user)])
  shipper.notify()
  while (held.calls.length === 0) await sleep(10)
  let stopped = false
  const stopping = shipper.stop(60_000).then(() => { stopped = true })
  await sleep(50)
  t.notOk(stopped, 'stop waits while the insert runs')
  held.release()
  await stopping
  t.equal(log.shipped, 3, 'the insert under way is marked shipped')
  await append(log, [logLine(user)])
  shipper.notify()
  t.equal(await shipper.drain(200), false, 'rows appended after the stop stay in the log')
  t.equal(held.calls.length, 1, 'no insert after the stop')
  t.equal(log.stats().rows, 1)
  t.equal((await countFor(user)).events, 3)
})

t.test('a row the engine refuses is quarantined; the other tenants\' rows of its block ship', async (t) => {
  const log = new MemoryIngestLog()
  const victim = randomId('victim-')
  const poisoner = randomId('poison-')
  const poison = logLine(poisoner).replace(/"(0\.\d+)"/, '"not a number"') // cost_usd ClickHouse cannot parse
  t.not(poison, logLine(poisoner))
  for (let i = 0; i < 5; i++) await append(log, [logLine(victim), logLine(victim)])
  await append(log, [poison])
  for (let i = 0; i < 5; i++) await append(log, [logLine(victim)])
  const inserts: number[] = []
  const shipper = new EventShipper(log, (body, token) => {
    inserts.push(body.toString().split('\n').length - 1)
    return insert(body, token)
  }, caps, logger)
  shipper.start()
  t.ok(await shipper.drain(10_000), 'the log drains: the poison row does not block it')
  await shipper.stop(1000)
  t.equal(inserts[0], 16, 'first the whole block was tried')
  t.equal((await countFor(victim)).events, 15, 'every row of the other tenant is stored')
  t.equal((await countFor(poisoner)).events, 0)
  t.equal(log.quarantine.length, 1)
  t.same(log.quarantine[0]!.row, { position: 11, line: poison })
  t.match(log.quarantine[0]!.reason, /cost_usd|Cannot parse|Decimal/i)
  t.equal(log.stats().quarantined, 1)
})

t.test('the pause between inserts is skipped while a full block waits, and kept for a partial one', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('sustained-')
  const blocks: number[] = []
  const shipper = new EventShipper(log, async (body, token) => {
    blocks.push(body.toString().trim().split('\n').length)
    await insert(body, token)
  }, { maxRows: 10, maxBytes: 1 << 24, minIntervalMs: 60_000 }, logger)
  t.teardown(() => shipper.stop(1000))
  await append(log, Array.from({ length: 35 }, () => logLine(user)))
  shipper.start()
  for (let i = 0; i < 500 && log.shipped < 30; i++) await sleep(10)
  t.equal(log.shipped, 30, 'three full blocks shipped back to back, with no 60 s pause between them')
  await sleep(300)
  t.equal(log.shipped, 30, 'the last 5 rows (less than a block) wait for the pause')
  t.ok(await shipper.drain(10_000), 'a drain cuts the pause short')
  t.same(blocks, [10, 10, 10, 5])
  t.equal((await countFor(user)).events, 35)
})

t.test('an insert that landed but whose answer was lost is retried with the same block; nothing lost, nothing doubled', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('outage-')
  let failures = 3
  const tokens: string[] = []
  const shipper = new EventShipper(log, async (body, token) => {
    tokens.push(token)
    await insert(body, token)
    if (failures-- > 0) throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })
  }, caps, logger)
  shipper.start()
  await append(log, Array.from({ length: 5 }, () => logLine(user)))
  shipper.notify()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.equal(new Set(tokens).size, 1, 'every attempt carried the same token')
  t.equal(tokens.length, 4)
  t.match(await countFor(user), { events: 5, spendEvents: 5 })
  t.equal(shipper.status.retrying, null, 'recovered')
})

t.test('regression: an insert that wrote events but failed in a view is retried without doubling events, and the rollup catches up', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('partial-')
  // The view's target refuses parts (as when the disk fills between the table's part and the
  // view's): the insert writes `events`, then fails in spend_daily_mv with TOO_MANY_PARTS.
  await handle.client.command({ query: 'ALTER TABLE spend_daily MODIFY SETTING parts_to_throw_insert = 1' })
  let restored = false
  const restore = async () => {
    if (!restored) await handle.client.command({ query: 'ALTER TABLE spend_daily RESET SETTING parts_to_throw_insert' })
    restored = true
  }
  t.teardown(restore)
  const attempts: string[] = []
  const shipper = new EventShipper(log, (body, token) => {
    attempts.push(token)
    return insert(body, token)
  }, caps, logger)
  shipper.start()
  await append(log, Array.from({ length: 7 }, () => logLine(user)))
  shipper.notify()
  while (attempts.length < 2) await sleep(20)
  t.ok(shipper.status.retrying, 'the failure is an outage: retried, not quarantined')
  // Whether the refused insert left its `events` part behind depends on which sink of the insert
  // pipeline finished first; either way it is all or nothing, and the outcome below must not differ.
  const written = (await countFor(user)).events
  t.ok(written === 0 || written === 7, `the failed insert wrote all of the block or none of it (${written})`)
  await restore()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.equal(new Set(attempts).size, 1, 'every attempt was the same block with the same token')
  const counts = await countFor(user)
  t.equal(counts.events, 7, 'events once, though the first attempt had written them')
  t.equal(counts.spendEvents, 7, 'spend_daily caught up and equals the sum over events')
  t.same([counts.hourlyEvents, counts.sessionEvents, counts.traceEvents], [7, 7, 7], 'and so did every other rollup')
  t.equal(log.stats().quarantined, 0)
})

t.test('only errors met reading the input split a block; the same codes from elsewhere are outages', async (t) => {
  const ch = (code: string, message: string) => Object.assign(new Error(message), { code })
  t.ok(isRowRefusal(ch('27', 'Cannot parse input: expected \',\' before: ...')))
  t.ok(isRowRefusal(ch('69', 'Decimal value is too big: 1 digits were read: \'1\'e40. (while reading the value of key cost_usd)')))
  t.notOk(isRowRefusal(ch('69', 'Decimal value is too big in a view')), 'a conversion error raised after parsing (in a view) is not the rows\' fault')
  t.notOk(isRowRefusal(ch('60', 'Table default.events does not exist')))
  t.notOk(isRowRefusal(ch('252', 'Too many parts')))
  t.notOk(isRowRefusal(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })))
})

t.test('a ClickHouse that takes the connection and never answers is named TIMEOUT in the status, not unknown', async (t) => {
  const sockets: Socket[] = []
  const stalled = createTcpServer((socket) => { sockets.push(socket) })
  await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve))
  const client = createClient({ url: `http://127.0.0.1:${(stalled.address() as AddressInfo).port}`, request_timeout: 200, log: { level: ClickHouseLogLevel.OFF } })
  t.teardown(async () => {
    for (const s of sockets) s.destroy()
    stalled.close()
    await client.close()
  })
  const log = new MemoryIngestLog()
  await append(log, [logLine(randomId('stalled-'))])
  const stalledEvents = new EventsRepository(client)
  const shipper = new EventShipper(log, (body, token) => stalledEvents.insertBlock(body, token), caps, logger)
  t.teardown(() => shipper.stop(1000))
  shipper.start()
  const deadline = Date.now() + 10_000
  while (!shipper.status.retrying && Date.now() < deadline) await sleep(20)
  t.match(shipper.status.retrying, { code: 'TIMEOUT', error: /Timeout error/ })
  t.equal(log.shipped, 0)
})

t.test('the interval runs from one block\'s read to the next: an insert that took the whole interval is followed at once', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('interval-')
  let clock = 0
  const blocks: number[] = []
  let insertMs = 60_000
  const shipper = new EventShipper(log, async (body, token) => {
    blocks.push(body.toString().trim().split('\n').length)
    clock += insertMs // the insert's time, on the shipper's clock
    await insert(body, token)
  }, { maxRows: 1000, maxBytes: 1 << 24, minIntervalMs: 60_000, now: () => clock }, logger)
  t.teardown(() => shipper.stop(1000))
  const shipped = async (n: number) => {
    for (let i = 0; i < 500 && log.shipped < n; i++) await sleep(10)
    return log.shipped
  }
  // An insert that takes the whole interval: the next block is read as soon as it returns.
  await append(log, [logLine(user)])
  shipper.start()
  t.equal(await shipped(1), 1, 'an idle shipper ships at once')
  await append(log, [logLine(user), logLine(user)])
  shipper.notify()
  t.equal(await shipped(3), 3, 'shipped with no pause after an insert as long as the interval')
  // A quick insert: what arrives after it waits for the rest of the interval.
  insertMs = 0
  await append(log, [logLine(user)])
  shipper.notify()
  t.equal(await shipped(4), 4, 'shipped at once again')
  await append(log, [logLine(user)])
  shipper.notify()
  await sleep(300)
  t.equal(log.shipped, 4, 'after a quick insert the next row waits for the interval')
  t.ok(await shipper.drain(10_000), 'a drain cuts the pause short')
  t.same(blocks, [1, 2, 1, 1])
  t.equal((await countFor(user)).events, 5)
})
