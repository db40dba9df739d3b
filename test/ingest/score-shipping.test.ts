import t from 'tap'
import pino from 'pino'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { ScoresRepository } from '../../src/storage/scores-repository.ts'
import { rowBytes, type LogSpan } from '../../src/ingest/log/entry-codec.ts'
import { kindRuns } from '../../src/ingest/log/row-kinds.ts'
import { EventShipper } from '../../src/ingest/shipper.ts'
import { buildScoreRow, newScoreRowId, scoreLine, type IncomingScore } from '../../src/domain/score-row.ts'
import { MemoryIngestLog } from '../helpers/memory-ingest-log.ts'
import { TEST_DATA_DIR, openTestClickHouse, randomId } from '../helpers/app.ts'
import { seedClickHouseStore } from '../helpers/clickhouse-template.ts'
import { logLine, storedCounts } from '../helpers/stored-events.ts'

// Scores share the ingest log with events: a log line starting ["scr_ is a score's, and the shipper
// inserts each run of one kind into its table under the token of the run's range.
seedClickHouseStore(TEST_DATA_DIR)
const handle = openTestClickHouse()
t.teardown(() => handle.release())
const events = new EventsRepository(handle.client)
const scores = new ScoresRepository(handle.client)
const logger = pino({ level: 'silent' })
const caps = { maxRows: 1000, maxBytes: 1 << 24, minIntervalMs: 0 }

function scoreLogLine (userId: string, score: Partial<IncomingScore> = {}): string {
  const rowId = newScoreRowId()
  return scoreLine(buildScoreRow({ traceId: 'trace-1', name: 'q', value: 1, ...score }, { rowId, userId, agentId: null, receivedAt: Date.now() }))
}

const scoreCount = async (userId: string) => Number((await (await handle.client.query({
  query: 'SELECT count() AS n FROM scores WHERE user_id = {u:String}', query_params: { u: userId }, format: 'JSONEachRow',
})).json<{ n: string }>())[0]!.n)

t.test('a block of events and scores interleaved ships each run into its table, in order, each under its own range', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('mixed-')
  // One append mixing kinds (not what a request does, but what the shipper must handle), then appends of one kind.
  await log.append(rowBytes([logLine(user), logLine(user), scoreLogLine(user), logLine(user)]))
  await log.append(rowBytes([scoreLogLine(user), scoreLogLine(user)]))
  await log.append(rowBytes([logLine(user, { input: { note: '["scr_ inside an event' }, metadata: { x: ['scr_'] } })]))
  const calls: string[] = []
  const shipper = new EventShipper(log, async (body, token) => {
    calls.push(`events ${token.split(':')[1]}`)
    await events.insertBlock(body, token)
  }, caps, logger, async (body, token) => {
    calls.push(`scores ${token.split(':')[1]}`)
    await scores.insertBlock(body, token)
  })
  shipper.start()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.same(calls, ['events 1-2', 'scores 3-3', 'events 4-4', 'scores 5-6', 'events 7-7'])
  t.match(await storedCounts(handle.client, user), { events: 4, spendEvents: 4 })
  t.equal(await scoreCount(user), 3)
})

t.test('a score insert that landed but whose answer was lost is retried with the same token: stored once', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('lost-')
  let failures = 2
  const tokens: string[] = []
  const shipper = new EventShipper(log, (body, token) => events.insertBlock(body, token), caps, logger, async (body, token) => {
    tokens.push(token)
    await scores.insertBlock(body, token)
    if (failures-- > 0) throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })
  })
  shipper.start()
  await log.append(rowBytes(Array.from({ length: 4 }, (_, i) => scoreLogLine(user, { scoreId: `s${i}` }))))
  shipper.notify()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.equal(tokens.length, 3)
  t.equal(new Set(tokens).size, 1, 'every attempt carried the same token')
  t.equal(await scoreCount(user), 4, 'each write stored once')
})

t.test('a score row the engine refuses is quarantined; the rest of its run ships', async (t) => {
  const log = new MemoryIngestLog()
  const user = randomId('refused-')
  const good = [scoreLogLine(user), scoreLogLine(user)]
  // A version that is not a number: the engine cannot parse the row.
  const bad = scoreLogLine(user).replace(/^(\["scr_\w+","[^"]+","[^"]+"),\d+/, '$1,"later"')
  await log.append(rowBytes([good[0]!, bad, good[1]!]))
  const shipper = new EventShipper(log, (body, token) => events.insertBlock(body, token), caps, logger, (body, token) => scores.insertBlock(body, token))
  shipper.start()
  t.ok(await shipper.drain(10_000))
  await shipper.stop(1000)
  t.equal(await scoreCount(user), 2)
  t.equal(log.quarantine.length, 1)
  t.equal(log.quarantine[0]!.row.line, bad)
})

t.test('kindRuns: lines are told apart by their first bytes only', async (t) => {
  const lines = ['["evt_1",1]', '["scr_1",2]', '["evt_2","[\\"scr_"]', '["scr_2",3]', '["scr_3",4]']
  const bytes = Buffer.from(lines.join('\n'))
  const spans: LogSpan[] = [{ position: 10, rows: 3, bytes: bytes.subarray(0, bytes.indexOf('["scr_2') - 1) }, { position: 13, rows: 2, bytes: bytes.subarray(bytes.indexOf('["scr_2')) }]
  const runs = kindRuns(spans)
  t.same(runs.map((r) => [r.kind, r.spans.map((s) => [s.position, s.rows, s.bytes.toString()])]), [
    ['events', [[10, 1, '["evt_1",1]']]],
    ['scores', [[11, 1, '["scr_1",2]']]],
    ['events', [[12, 1, '["evt_2","[\\"scr_"]']]],
    ['scores', [[13, 2, '["scr_2",3]\n["scr_3",4]']]],
  ])
  const onlyEvents: LogSpan[] = [{ position: 1, rows: 2, bytes: Buffer.from('["evt_1",{"a":"x"}]\n["evt_2",{"b":["scr_"]}]') }]
  t.same(kindRuns(onlyEvents).map((r) => [r.kind, r.spans.length]), [['events', 1]], 'an event holding ["scr_ inside is still an event')
})
