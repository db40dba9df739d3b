import t from 'tap'
import pino from 'pino'
import { openClickHouse, migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { EventWriter } from '../../src/storage/event-writer.ts'
import { buildEventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { TEST_DATA_DIR, randomId } from '../helpers/app.ts'

const handle = openClickHouse({ dataDir: TEST_DATA_DIR })
t.teardown(() => handle.release())
await migrateClickHouse(handle.client)
const events = new EventsRepository(handle.client)
const log = pino({ level: 'silent' })

const userId = randomId('writer-')
function row(extra: Record<string, unknown> = {}) {
  return { ...buildEventRow({ agentId: 'a' }, { eventId: newEventId(), userId, agentId: 'a', receivedAt: Date.now() }), ...extra }
}

t.test('group commit: rows arriving during an insert travel together in the next one', async (t) => {
  const inserts: number[] = []
  const writer = new EventWriter(async (rows) => {
    inserts.push(rows.length)
    await events.insert(rows)
  }, { maxRows: 1000, maxBytes: 1 << 24 }, log)
  const first = writer.append([row()])
  const rest = Array.from({ length: 20 }, () => writer.append([row(), row()]))
  await Promise.all([first, ...rest])
  t.same(inserts, [1, 40], 'one insert in flight; the 20 appends that waited went as one batch')
})

t.test('caps split batches by rows, but never split one append', async (t) => {
  const inserts: number[] = []
  const writer = new EventWriter(async (rows) => {
    inserts.push(rows.length)
    await events.insert(rows)
  }, { maxRows: 5, maxBytes: 1 << 24 }, log)
  await Promise.all([writer.append([row()]), writer.append([row(), row(), row()]), writer.append([row(), row(), row()]), writer.append(Array.from({ length: 7 }, () => row()))])
  t.same(inserts, [1, 3, 3, 7])
})

t.test('a refused insert fails exactly the appends of its batch, with 503', async (t) => {
  const writer = new EventWriter((rows) => events.insert(rows), { maxRows: 1000, maxBytes: 1 << 24 }, log)
  const a = row()
  const b = row({ cost_usd: 'not a number' }) // ClickHouse refuses to parse this row
  const c = row()
  const d = row()
  const pa = writer.append([a])
  const pb = writer.append([b])
  const pc = writer.append([c])
  const results = await Promise.allSettled([pa, pb, pc])
  const pd = await writer.append([d]).then(() => 'ok')
  t.equal(results[0].status, 'fulfilled', 'the batch before is committed')
  for (const r of results.slice(1)) {
    t.equal(r.status, 'rejected')
    const err = (r as PromiseRejectedResult).reason
    t.equal(err.statusCode, 503)
    t.equal(err.headers['retry-after'], '1')
  }
  t.equal(pd, 'ok', 'the batch after is committed')
  const stored = await events.existingIds([a, b, c, d].map((r) => r.event_id))
  t.same([...stored].sort(), [a.event_id, d.event_id].sort(), 'nothing of the failed batch is half-written')
})

t.test('close waits for rows in flight and refuses new ones', async (t) => {
  const writer = new EventWriter((rows) => events.insert(rows), { maxRows: 1000, maxBytes: 1 << 24 }, log)
  const r1 = row()
  const r2 = row()
  const p1 = writer.append([r1])
  const p2 = writer.append([r2])
  await writer.close()
  const stored = await events.existingIds([r1.event_id, r2.event_id])
  t.equal(stored.size, 2, 'both were committed before close returned')
  await Promise.all([p1, p2])
  const refused = await writer.append([row()]).then(() => null, (err: { statusCode: number }) => err)
  t.equal(refused?.statusCode, 503)
})
