import t from 'tap'
import { TupleParam } from '@clickhouse/client'
import { inlineParams } from '../../src/storage/embedded-reads.ts'
import { embeddedRawInsert } from '../../src/storage/clickhouse-client.ts'
import { openTestClickHouse } from '../helpers/app.ts'

const handle = openTestClickHouse()
t.teardown(() => handle.release())

// Whatever the client sends, parameters or literals written into the SQL (the embedded engine's
// reads), the engine reads back the very values.
const awkward = ['plain', "it's", 'back\\slash', "\\'", "'; DROP TABLE events; --", 'tab\tnew\nline\r', '{u:String}', 'ünï😀', '']

t.test('values written into the SQL read back as they were', async (t) => {
  for (const value of awkward) {
    const rs = await handle.client.query({
      query: 'SELECT {v:String} AS v, {a:Array(String)} AS a, {p:Array(Tuple(String, String))} AS p, {n:Int64} AS n, {d:Date} AS d',
      query_params: { v: value, a: [value, 'x'], p: [new TupleParam([value, 'y'])], n: -1795666566003, d: '2026-11-26' },
      format: 'JSONEachRow',
    })
    t.same(await rs.json(), [{ v: value, a: [value, 'x'], p: [[value, 'y']], n: '-1795666566003', d: '2026-11-26' }], JSON.stringify(value))
  }
})

t.test('inlineParams casts each value to its declared type, replaces only the template\'s placeholders, refuses what it cannot write', async (t) => {
  t.equal(inlineParams('SELECT {v:String}, {n:UInt32}', { v: "it's {n:UInt32}", n: 3 }), "SELECT CAST('it\\'s {n:UInt32}' AS String), CAST(3 AS UInt32)")
  t.equal(inlineParams('SELECT {a:Array(String)}', { a: [] }), 'SELECT CAST([] AS Array(String))')
  t.throws(() => inlineParams('SELECT {v:String}', {}), /v is not set/)
  t.equal(inlineParams('SELECT {v:String}', { v: 'a\u0000b' }), undefined, 'a NUL keeps the query parameterized')
  for (const [sql, value] of [['{n:UInt32}', -1], ['{n:Int64}', 1.5], ['{n:Int64}', 2 ** 63], ['{v:String}', null], ['{v:String}', true], ['{v:String}', { k: 'v' }]] as const) {
    t.equal(inlineParams(`SELECT ${sql}`, { [sql.slice(1, 2)]: value }), undefined, `${JSON.stringify(value)} as ${sql} keeps its parameter (a cast would not refuse it)`)
  }
  const refused = handle.client.query({ query: 'SELECT {n:UInt32} AS n', query_params: { n: -1 }, format: 'JSONEachRow' }).then((rs) => rs.json())
  await t.rejects(refused, 'such a value is refused as a parameter is, not wrapped into 4294967295')
  const rs = await handle.client.query({ query: 'SELECT {v:String} AS v', query_params: { v: 'a\u0000b' }, format: 'JSONEachRow' })
  t.same(await rs.json(), [{ v: 'a\u0000b' }], 'and such a query still answers')
})

t.test('a query whose values make it too long to write into the SQL still answers', async (t) => {
  const ids = Array.from({ length: 20_000 }, (_, i) => `evt_${String(i).padStart(26, '0')}`)
  const rs = await handle.client.query({ query: 'SELECT length({ids:Array(String)}) AS n', query_params: { ids }, format: 'JSONEachRow' })
  t.same(await rs.json(), [{ n: 20_000 }])
})

// Inserts, commands and the raw insert run on the engine's first session. A read issued while one
// runs goes to another session rather than queueing behind it: it answers first.
t.test('a read issued while a long insert or command runs on the first session answers before it', async (t) => {
  if (!handle.embedded) {
    t.plan(0, 'the embedded engine\'s sessions only (a server runs queries side by side); skipped in server mode')
    return
  }
  const raw = embeddedRawInsert(handle.client)!
  // Each row written to slow_source takes 0.1 s through the view: twenty rows hold the first session 2 s.
  await handle.client.command({ query: 'CREATE TABLE IF NOT EXISTS slow_source (n UInt64) ENGINE = MergeTree ORDER BY n' })
  await handle.client.command({ query: 'CREATE TABLE IF NOT EXISTS slow_sink (n UInt64) ENGINE = MergeTree ORDER BY n' })
  await handle.client.command({ query: 'CREATE MATERIALIZED VIEW IF NOT EXISTS slow_view TO slow_sink AS SELECT n FROM slow_source WHERE sleepEachRow(0.1) = 0' })
  const rows = Array.from({ length: 20 }, (_, n) => ({ n }))
  const slow: Record<string, () => Promise<unknown>> = {
    command: () => handle.client.command({ query: 'INSERT INTO slow_sink SELECT number FROM numbers(20) WHERE sleepEachRow(0.1) = 0' }),
    insert: () => handle.client.insert({ table: 'slow_source', values: rows, format: 'JSONEachRow' }),
    'raw insert': () => raw({
      table: 'slow_source', columns: ['n'], format: 'JSONCompactEachRow', values: Buffer.from(rows.map(({ n }) => `[${n}]\n`).join('')), settings: {},
    }),
  }
  /** Waits (up to 10 s) until the engine lists a statement writing to a slow_ table among the queries it runs. */
  const writeRunning = async () => {
    for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
      const rs = await handle.client.query({
        query: "SELECT count() AS n FROM system.processes WHERE query ILIKE '%INSERT INTO slow_s%' AND query NOT ILIKE '%system.processes%'",
        format: 'JSONEachRow',
      })
      if (Number((await rs.json<{ n: string }>())[0]!.n) > 0) return true
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    return false
  }
  for (const [kind, run] of Object.entries(slow)) {
    const order: string[] = []
    const writing = run().then(() => order.push(kind))
    // The read is issued only once the engine runs the write (a read sent before it starts proves nothing).
    t.ok(await writeRunning(), `the ${kind} runs`)
    const read = handle.client.query({ query: 'SELECT {v:String} AS v', query_params: { v: kind }, format: 'JSONEachRow' })
      .then((rs) => rs.json()).then((got) => { order.push('read'); return got })
    t.same(await read, [{ v: kind }])
    await writing
    t.same(order, ['read', kind], `the read answered before the ${kind} ended`)
  }
})
