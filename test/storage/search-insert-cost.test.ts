import t from 'tap'
import { migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { buildEventRow, type EventRow } from '../../src/domain/event-row.ts'
import { ROW_COLUMNS } from '../../src/domain/event-line.ts'
import { scalarLeaves, searchLeaves } from '../../src/domain/search-leaves.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'

// clickhouse/023 computes the search columns and the facet counts of an insert in fewer steps, and
// 025 from the leaves the ingest path sends (src/domain/search-leaves.ts); what they store must be
// what 018, 021 and 022 stored for the same events.
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
  { big: 1e21, tiny: 1e-7, neg: -9007199254740991, negzero: -0, huge: 2 ** 64 * 0.669, frac: 0.1 + 0.2 },
  { 2: 'two', b: 'bee', 1: 'one', '': 'empty key', ключ: 'значение', 支付: '支付失败', emoji: '🚀 done', nl: 'a\nb', ctl: '\u0001', lone: '\ud800x', sep: 'line\u2028sep' },
]
const METADATA: Record<string, unknown>[] = [
  { traceId: 'tr-1', sessionId: 's-1', env: 'prod' },
  { traceId: 'tr-2', env: 'staging', git: { branch: 'main', sha: 'abc' }, 'git.branch': 'dotted', deep: { a: { b: { c: 'gone' }, d: 'ÄÖ' } } },
  { customer: 'c "1"', retries: 3, ok: true, ratio: 0.25, none: null, tags: ['a'], tokensBreakdown: { inputBase: 1 }, privacyLevel: 'full' },
  {},
  { 10: 'ten', a: { 2: 'x', b: { 1: 'y', c: [1] } }, 'a.b': { 1: 'again' }, esc: '\\"', lone: 'x\udfff', space: ' ', big: -1e-300 },
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

/** Inserts rows as an insert that names no search leaves (a release before 025, or an analyst) does. */
async function insertWithoutLeaves (rs: EventRow[]): Promise<void> {
  await ch.insert({ table: 'events', values: rs.map((r) => Object.fromEntries(ROW_COLUMNS.map((c) => [c, r[c]]))), format: 'JSONEachRow' })
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
  await insertWithoutLeaves(rows(before, receivedAt))
  t.same(await migrateClickHouse(ch, { upTo: 23 }), ['023_search_insert_cost.sql'], '023 applied to it')
  const after = randomId('search-cost-after-')
  await insertWithoutLeaves(rows(after, receivedAt))

  const old = await columns(before)
  t.equal(old.length, INPUTS.length * METADATA.length)
  t.ok(old.some((r) => r.flat.includes('git.branch') && r.search_text.includes('tab\there')), 'the events hold what the comparison is about')
  t.same(await columns(after), old, 'the same metadata_flat and search_text for the same events')
  const oldCounts = await counts(before)
  t.ok(oldCounts.some((r) => r.facet === 'metadup'), 'a path with two values counted')
  t.same(await counts(after), oldCounts, 'the same facet counts, metadup rows included')
  t.equal(await viewsIntoFacets(), 1, 'one view feeds the facet counts')

  // 025: the same columns from the leaves an insert sends, and from the JSON when it sends none.
  t.same((await migrateClickHouse(ch, { upTo: 25 })).at(-1), '025_search_leaves_from_ingest.sql')
  const sent = randomId('search-leaves-sent-')
  await events.insert(rows(sent, receivedAt))
  const notSent = randomId('search-leaves-not-sent-')
  await insertWithoutLeaves(rows(notSent, receivedAt))
  t.same(await columns(sent), old, 'from the leaves sent: the same metadata_flat and search_text')
  t.same(await columns(notSent), old, 'without them: the same, flattened by the engine')
  t.same(await counts(sent), oldCounts, 'and the same facet counts')
})

t.test('023 run again, after 021 and 022 ran again, leaves one view and counts each event once', async (t) => {
  await migrateClickHouse(ch)
  await ch.command({ query: 'ALTER TABLE schema_migrations DELETE WHERE version IN (21, 22, 23) SETTINGS mutations_sync = 2' })
  t.same(await migrateClickHouse(ch), ['021_search_feed_and_facets.sql', '022_search_facets_path_events.sql', '023_search_insert_cost.sql'])
  t.equal(await viewsIntoFacets(), 1, 'one view feeds the facet counts')
  const receivedAt = Date.parse('2026-08-02T12:00:00Z')
  const once = randomId('search-cost-once-')
  await events.insert(rows(once, receivedAt))
  const twice = randomId('search-cost-twice-')
  await ch.command({ query: 'ALTER TABLE schema_migrations DELETE WHERE version = 23 SETTINGS mutations_sync = 2' })
  t.same(await migrateClickHouse(ch), ['023_search_insert_cost.sql'], 'and again on its own')
  await events.insert(rows(twice, receivedAt))
  const strip = (rs: Record<string, string>[]) => rs.map(({ hour, facet, key, value, n }) => ({ hour, facet, key, value, n }))
  t.same(strip(await counts(twice)), strip(await counts(once)), 'the same counts')
  const total = (await counts(once)).filter((r) => r.facet === 'total').reduce((sum, r) => sum + Number(r.n), 0)
  t.equal(total, INPUTS.length * METADATA.length, 'each event counted once')
})

t.test('numbers as the ingest path writes their leaves are the engine\'s text of them, at every magnitude', async (t) => {
  const numbers: number[] = [0, -0, 1e20, 1e21, 1e-6, 1e-7, 5e-324, Number.MAX_VALUE, 2 ** 53, 2 ** 53 + 2, 2 ** 63, 2 ** 64, -(2 ** 63), 9007199254740991, 0.1 + 0.2]
  for (let e = -320; e <= 308; e += 7) for (const m of [1, 1.5, 2.2250738585072014, 9.999999, -3.14159]) numbers.push(m * 10 ** e)
  // One object per number: the engine refuses a whole object for one number it cannot read.
  const [row] = await (await ch.query({
    query: 'SELECT arrayMap(m -> JSONExtractKeysAndValuesRaw(m), {ms:Array(String)}) AS kvs',
    query_params: { ms: numbers.map((n) => JSON.stringify({ k: n })) },
    format: 'JSONEachRow',
  })).json<{ kvs: [string, string][][] }>()
  const refused = numbers.filter((_, i) => row!.kvs[i]!.length === 0)
  const read = numbers.filter((_, i) => row!.kvs[i]!.length > 0)
  t.same(read.map((n) => scalarLeaves({ k: n })[0]), row!.kvs.filter((kv) => kv.length > 0).map((kv) => kv[0]), `the same text for the ${read.length} numbers the engine reads`)
  // What it cannot read: integers written out in full beyond 64 bits (JSON.stringify writes digits up
  // to 1e21). Its flattening then has no leaf of that object at all, and neither do the leaves sent.
  t.ok(refused.length > 0 && refused.every((n) => Number.isInteger(n) && Math.abs(n) >= 2 ** 63 && Math.abs(n) < 1e21), `refused: ${refused.join(', ')}`)
  t.same(refused.map((n) => scalarLeaves({ s: 'x', deep: { k: [n] } })), refused.map(() => []))
})

t.test('a row whose leaves hold a lone surrogate sends none: the engine flattens its JSON, which keeps it', async (t) => {
  t.same(searchLeaves({ a: 'x\ud800' }, ''), [0, [], []])
  t.same(searchLeaves({ '\udfff': 'x' }, ''), [0, [], []])
  t.same(searchLeaves({ a: 'ok' }, { q: 'x\ud800y' }), [0, [], []])
  t.same(searchLeaves({ a: 'ok 😀' }, { q: 'y' }), [1, [['a', 'ok 😀']], ['y']])
})
