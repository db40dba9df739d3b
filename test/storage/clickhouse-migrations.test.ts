import t from 'tap'
import { migrateClickHouse, splitStatements } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository, INSERT_COLUMNS, eventLine } from '../../src/storage/events-repository.ts'
import { buildEventRow, type EventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'

const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
const ch = handle.client

const count = async (sql: string, params: Record<string, unknown> = {}) =>
  Number((await (await ch.query({ query: sql, query_params: params, format: 'JSONEachRow' })).json<{ n: string }>())[0]!.n)

t.test('statements split on a semicolon that ends a line, never inside a comment string', async (t) => {
  t.same(splitStatements("-- a comment\nCREATE TABLE a (x UInt8 COMMENT 'one; two') ENGINE = Memory;\n\nDROP TABLE a;"),
    ["CREATE TABLE a (x UInt8 COMMENT 'one; two') ENGINE = Memory", 'DROP TABLE a'])
})

// The columns of events as release 2 had them: the columns clickhouse/006 added are left out.
const RELEASE_2_COLUMNS = INSERT_COLUMNS.slice(0, INSERT_COLUMNS.indexOf('span_id'))
async function insertAsRelease2 (rows: EventRow[]): Promise<void> {
  await ch.insert({ table: 'events', values: rows.map((r) => Object.fromEntries(RELEASE_2_COLUMNS.map((c) => [c, r[c]]))), format: 'JSONEachRow' })
}

t.test('the error-cluster rollup is backfilled from events stored before it existed, once', async (t) => {
  t.same(await migrateClickHouse(ch, { upTo: 2 }), ['001_events.sql', '002_events_time_index.sql'], 'a store as release 2 left it')
  const userId = randomId('mig-')
  const events = new EventsRepository(ch)
  const row = (message: string) => buildEventRow({ agentId: 'a', type: 'error', errorMessage: message, toolExecuted: 'db' },
    { eventId: newEventId(), userId, agentId: 'agent-1', receivedAt: Date.now() })
  await insertAsRelease2([row('boom 1'), row('boom 2'), row('other failure'), buildEventRow({ agentId: 'a' }, { eventId: newEventId(), userId, agentId: 'agent-1', receivedAt: Date.now() })])
  const applied = await migrateClickHouse(ch)
  t.ok(applied.includes('003_error_clusters_hourly.sql'))
  t.equal(await count('SELECT sum(events) AS n FROM error_clusters_hourly WHERE user_id = {u:String}', { u: userId }), 3, 'the three old error events are in the rollup')
  t.equal(await count('SELECT uniqExact(error_fingerprint) AS n FROM error_clusters_hourly WHERE user_id = {u:String}', { u: userId }), 2)
  await events.insert([row('boom 3')])
  t.equal(await count('SELECT sum(events) AS n FROM error_clusters_hourly WHERE user_id = {u:String}', { u: userId }), 4, 'new ones come through the view, none twice')
  t.same(await migrateClickHouse(ch), [], 'a second run applies nothing')
  t.equal(await count("SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = 'usage_monthly'"), 0, 'the old monthly rollup is gone')
})

t.test('a line an older release left in the ingest log (without the span and reasoning columns) still ships, with their defaults', async (t) => {
  await migrateClickHouse(ch)
  const userId = randomId('old-line-')
  const row = buildEventRow({ agentId: 'a', model: 'gpt-4o' }, { eventId: newEventId(), userId, agentId: 'agent-1', receivedAt: Date.now() })
  const oldLine = JSON.stringify(JSON.parse(eventLine(row)).slice(0, RELEASE_2_COLUMNS.length))
  await new EventsRepository(ch).insertBlock(oldLine + '\n', `test:${randomId()}`)
  const stored = await new EventsRepository(ch).getRow(userId, row.event_id)
  t.ok(stored, 'the row is stored, not refused')
  t.same([stored!.span_id, stored!.parent_span_id, stored!.provider, Number(stored!.tokens_reasoning), stored!.source], ['', '', '', 0, 'events'])
})
