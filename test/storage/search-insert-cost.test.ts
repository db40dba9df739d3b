import t from 'tap'
import { migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { buildEventRow, type EventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'

// clickhouse/023 computes the search columns and the facet counts of an insert in fewer steps; what
// it stores must be what 018, 021 and 022 stored for the same events.
const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
const ch = handle.client
const events = new EventsRepository(ch)
const HOUR = 3_600_000

// JSON that tells the old expressions from a careless new one: escapes, unicode, numbers written in
// other forms, nulls, arrays, empty objects, levels beyond the third, a dotted key colliding with a
// nesting, keys the facets hide.
const INPUTS: (Record<string, unknown> | undefined)[] = [
  undefined,
  { query: 'Flights to Lisbon', limit: 5, filters: { maxPrice: 300.5, airline: 'TAP', cabin: { class: 'eco', seat: { row: 3 } } } },
  { s: 'tab\there', q: 'quote"d', back: 'C:\\dir', u: 'été 😀', n: -1.5e3, b: true, f: false, z: 0, nil: null, arr: [1, { x: 2 }], empty: {}, blank: '' },
  { big: 1e21, tiny: 1e-7, neg: -9007199254740991 },
]
const METADATA: Record<string, unknown>[] = [
  { traceId: 'tr-1', sessionId: 's-1', env: 'prod' },
  { traceId: 'tr-2', env: 'staging', git: { branch: 'main', sha: 'abc' }, 'git.branch': 'dotted', deep: { a: { b: { c: 'gone' }, d: 'ÄÖ' } } },
  { customer: 'c "1"', retries: 3, ok: true, ratio: 0.25, none: null, tags: ['a'], tokensBreakdown: { inputBase: 1 }, privacyLevel: 'full' },
  {},
]

function rows (userId: string, receivedAt: number): EventRow[] {
  return INPUTS.flatMap((input, i) => METADATA.map((metadata, j) => buildEventRow({
    agentId: `agent-${j}`,
    type: (['tool', 'decision', 'error', 'reasoning'] as const)[(i + j) % 4]!,
    timestamp: receivedAt - (i * 4 + j) * HOUR / 3,
    toolExecuted: ['search', 'bash', undefined][j % 3],
    model: ['gpt-4o', undefined][i % 2],
    outcome: j === 2 ? 'failed' : 'success',
    reasoning: `Step ${i}.${j}: Looked UP the options`,
    ...(input === undefined ? {} : { input }),
    metadata: { ...metadata, n: i * 4 + j },
  }, { eventId: newEventId(receivedAt), userId, agentId: `agent-${j}`, receivedAt })))
}

/** The search columns of a user's events, in the order of their metadata's `n`. */
const columns = async (userId: string) => (await (await ch.query({
  query: "SELECT toString(metadata_flat) AS flat, search_text FROM events WHERE user_id = {u:String} ORDER BY JSONExtractInt(metadata, 'n')",
  query_params: { u: userId },
  format: 'JSONEachRow',
})).json<{ flat: string; search_text: string }>())

/** The facet counts of a user, hour by hour, as one sorted list. */
const counts = async (userId: string) => (await (await ch.query({
  query: `SELECT hour, facet, key, value, sum(events) AS n FROM search_facets_hourly WHERE user_id = {u:String}
          GROUP BY hour, facet, key, value ORDER BY hour, facet, key, value`,
  query_params: { u: userId },
  format: 'JSONEachRow',
})).json<Record<string, string>>())

const viewsIntoFacets = async () => Number((await (await ch.query({
  query: `SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND engine = 'MaterializedView'
          AND create_table_query LIKE '%search_facets_hourly%'`,
  format: 'JSONEachRow',
})).json<{ n: string }>())[0]!.n)

t.test('the search columns and facet counts of 023 are those of 018, 021 and 022', async (t) => {
  const receivedAt = Date.parse('2026-08-01T12:00:00Z')
  t.same((await migrateClickHouse(ch, { upTo: 22 })).at(-1), '022_search_facets_path_events.sql', 'a store as 022 left it')
  const before = randomId('search-cost-before-')
  await events.insert(rows(before, receivedAt))
  t.same(await migrateClickHouse(ch, { upTo: 23 }), ['023_search_insert_cost.sql'], '023 applied to it')
  const after = randomId('search-cost-after-')
  await events.insert(rows(after, receivedAt))

  const old = await columns(before)
  t.equal(old.length, INPUTS.length * METADATA.length)
  t.ok(old.some((r) => r.flat.includes('git.branch') && r.search_text.includes('tab\there')), 'the events hold what the comparison is about')
  t.same(await columns(after), old, 'the same metadata_flat and search_text for the same events')
  const oldCounts = await counts(before)
  t.ok(oldCounts.some((r) => r.facet === 'metadup'), 'a path with two values counted')
  t.same(await counts(after), oldCounts, 'the same facet counts, metadup rows included')
  t.equal(await viewsIntoFacets(), 1, 'one view feeds the facet counts')
})

t.test('023 run again, after 021 and 022 ran again, leaves one view and counts each event once', async (t) => {
  await migrateClickHouse(ch)
  await ch.command({ query: 'ALTER TABLE schema_migrations DELETE WHERE version IN (21, 22, 23, 25, 28) SETTINGS mutations_sync = 2' })
  t.same(await migrateClickHouse(ch), ['021_search_feed_and_facets.sql', '022_search_facets_path_events.sql', '023_search_insert_cost.sql', '025_search_facets_otel.sql', '028_search_facets_sessions.sql'])
  t.equal(await viewsIntoFacets(), 1, 'one view feeds the facet counts')
  const receivedAt = Date.parse('2026-08-02T12:00:00Z')
  const once = randomId('search-cost-once-')
  await events.insert(rows(once, receivedAt))
  const twice = randomId('search-cost-twice-')
  await ch.command({ query: 'ALTER TABLE schema_migrations DELETE WHERE version IN (23, 25, 28) SETTINGS mutations_sync = 2' })
  t.same(await migrateClickHouse(ch), ['023_search_insert_cost.sql', '025_search_facets_otel.sql', '028_search_facets_sessions.sql'], 'and again on their own')
  await events.insert(rows(twice, receivedAt))
  const strip = (rs: Record<string, string>[]) => rs.map(({ hour, facet, key, value, n }) => ({ hour, facet, key, value, n }))
  t.same(strip(await counts(twice)), strip(await counts(once)), 'the same counts')
  const total = (await counts(once)).filter((r) => r.facet === 'total').reduce((sum, r) => sum + Number(r.n), 0)
  t.equal(total, INPUTS.length * METADATA.length, 'each event counted once')
})
