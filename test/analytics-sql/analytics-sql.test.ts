import t from 'tap'
import { createClient, ClickHouseError, ClickHouseLogLevel } from '@clickhouse/client'
import { existsSync, statSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { buildTestApp, newUser, randomId, sendEvent, shipped, TEST_CLICKHOUSE_URL, TEST_DATA_DIR } from '../helpers/app.ts'
import { functionsInAst } from '../../src/analytics-sql/engine.ts'
import { loadAnalystPassword } from '../../src/analytics-sql/password.ts'

if (TEST_CLICKHOUSE_URL) {
  t.plan(0, 'the analysts\' SQL port runs on the embedded engine only (with CLICKHOUSE_URL it is off); skipped in server mode')
} else {
  await run()
}

async function run () {
  const PASSWORD = 'analyst-test-password'
  const app = await buildTestApp(t, {
    // The API's address does not carry over to the analysts' port (ANALYTICS_HOST is unset).
    HOST: '0.0.0.0',
    ANALYTICS_PORT: '0',
    ANALYST_PASSWORD: PASSWORD,
    ANALYTICS_MAX_RESULT_ROWS: '1000',
    ANALYTICS_MAX_EXECUTION_SECONDS: '2',
    ANALYTICS_MAX_MEMORY_BYTES: String(64 * 1024 * 1024),
    ANALYTICS_MAX_CONCURRENT_QUERIES: '4',
  })
  const port = await app.analyticsSql!.listen()
  const url = `http://127.0.0.1:${port}`
  const client = createClient({ url, username: 'analyst', password: PASSWORD, request_timeout: 60_000, log: { level: ClickHouseLogLevel.OFF } })
  t.teardown(() => client.close())

  const user = await newUser(app)
  const key = await user.createKey()
  const agentName = randomId('agent-')
  for (const model of ['gpt-4o', 'gpt-4o', 'claude-sonnet-4-5']) {
    const res = await sendEvent(app, key.secret, { agentId: agentName, type: 'tool', toolExecuted: 'search', model, durationMs: 100 })
    if (res.statusCode !== 202) throw new Error(`POST /v1/events: ${res.statusCode} ${res.body}`)
  }
  await shipped(app)

  /** The ClickHouse error a promise rejects with (throws, failing the test, when it resolves or fails otherwise). */
  async function refusal (p: Promise<unknown>): Promise<ClickHouseError> {
    try {
      await p
    } catch (err) {
      if (err instanceof ClickHouseError) return err
      throw err
    }
    throw new Error('expected a ClickHouse error')
  }

  t.test('the analysts\' port listens on the loopback unless ANALYTICS_HOST says otherwise, whatever HOST is', async (t) => {
    t.equal(app.analyticsSql!.address()?.address, '127.0.0.1')
  })

  t.test('the official client reads the service tables in several formats, with query parameters', async (t) => {
    const rs = await client.query({
      query: 'SELECT model, count() AS n FROM events WHERE user_id = {user:String} GROUP BY model ORDER BY model',
      query_params: { user: user.id },
      format: 'JSONEachRow',
    })
    t.same(await rs.json(), [{ model: 'claude-sonnet-4-5', n: '1' }, { model: 'gpt-4o', n: '2' }])
    t.equal(rs.response_headers['x-clickhouse-format'], 'JSONEachRow')

    const csv = await client.query({ query: 'SELECT model, count() FROM events WHERE user_id = {user:String} GROUP BY model ORDER BY model', query_params: { user: user.id }, format: 'CSV' })
    t.equal(await csv.text(), '"claude-sonnet-4-5",1\n"gpt-4o",2\n')
    const tsv = await client.query({ query: 'SELECT 1 AS a, \'x\' AS b', format: 'TabSeparatedWithNames' })
    t.equal(await tsv.text(), 'a\tb\n1\tx\n')
    const json = await client.query({ query: 'SELECT count() AS n FROM events WHERE user_id = {user:String}', query_params: { user: user.id }, format: 'JSON' })
    t.equal(Number(((await json.json()) as { data: Array<{ n: string }> }).data[0]!.n), 3)

    const params = await client.query({
      query: 'SELECT {s:String} AS s, {a:Array(String)} AS a, {n:UInt32} + 1 AS n, {d:DateTime64(3)} AS d',
      query_params: { s: "it's a\ttab\\and slash", a: ["it's", 'b'], n: 41, d: new Date('2026-01-02T03:04:05.678Z') },
      format: 'JSONEachRow',
    })
    t.same(await params.json(), [{ s: "it's a\ttab\\and slash", a: ["it's", 'b'], n: 42, d: '2026-01-02 03:04:05.678' }])
  })

  t.test('plain HTTP: curl-style GET and POST, ping, gzip, user in the URL', async (t) => {
    const ping = await fetch(`${url}/ping`)
    t.equal(await ping.text(), 'Ok.\n')
    const get = await fetch(`${url}/?user=analyst&password=${PASSWORD}&query=${encodeURIComponent('SELECT 1 + 1')}`)
    t.equal(get.status, 200)
    t.equal(await get.text(), '2\n')
    const auth = { authorization: `Basic ${Buffer.from(`analyst:${PASSWORD}`).toString('base64')}` }
    const post = await fetch(`${url}/?default_format=CSV`, { method: 'POST', headers: auth, body: "SELECT 'a' AS x" })
    t.equal(post.headers.get('x-clickhouse-format'), 'CSV')
    t.equal(await post.text(), '"a"\n')
    t.equal(post.headers.get('content-type'), 'text/csv; charset=UTF-8; header=absent')
    const named = await fetch(`${url}/?default_format=CSVWithNames`, { method: 'POST', headers: auth, body: "SELECT 'a' AS x" })
    t.equal(await named.text(), '"x"\n"a"\n')
    t.equal(named.headers.get('content-type'), 'text/csv; charset=UTF-8; header=present', 'the header row is said to be there, as a server says')
    const native = await fetch(`${url}/?compress=1`, { method: 'POST', headers: auth, body: 'SELECT 1' })
    t.equal(native.status, 400)
    t.equal(native.headers.get('x-clickhouse-exception-code'), '36', 'ClickHouse\'s native compression is refused, not ignored')
    const gz = createClient({ url, username: 'analyst', password: PASSWORD, compression: { response: true, request: true } })
    t.teardown(() => gz.close())
    const rs = await gz.query({ query: 'SELECT number FROM numbers(3)', format: 'JSONCompactEachRow' })
    t.same(await rs.json(), [['0'], ['1'], ['2']])
  })

  t.test('a wrong or missing password is refused with 401 and AUTHENTICATION_FAILED', async (t) => {
    const wrong = createClient({ url, username: 'analyst', password: 'nope', log: { level: ClickHouseLogLevel.OFF } })
    t.teardown(() => wrong.close())
    const err = await refusal(wrong.query({ query: 'SELECT 1' }))
    t.equal(err.code, '516')
    t.equal(err.type, 'AUTHENTICATION_FAILED')
    const other = createClient({ url, username: 'default', password: PASSWORD, log: { level: ClickHouseLogLevel.OFF } })
    t.teardown(() => other.close())
    t.equal((await refusal(other.query({ query: 'SELECT 1' }))).code, '516')
    const raw = await fetch(`${url}/?query=SELECT+1`)
    t.equal(raw.status, 401)
    t.equal(raw.headers.get('x-clickhouse-exception-code'), '516')
  })

  t.test('writes, DDL, setting changes and statements other than reads are refused by the engine', async (t) => {
    const refusedCodes: Array<[string, () => Promise<unknown>]> = [
      ['insert', () => client.insert({ table: 'events', values: [{ event_id: 'x' }], format: 'JSONEachRow' })],
      ['insert via command', () => client.command({ query: "INSERT INTO events (event_id) VALUES ('x')" })],
      ['create', () => client.command({ query: 'CREATE TABLE hack (a UInt8) ENGINE = Memory' })],
      ['drop', () => client.command({ query: 'DROP TABLE events' })],
      ['truncate', () => client.command({ query: 'TRUNCATE TABLE events' })],
      ['alter', () => client.command({ query: 'ALTER TABLE events DELETE WHERE 1' })],
      ['set readonly', () => client.command({ query: 'SET readonly = 0' })],
      ['settings clause', () => client.query({ query: 'SELECT 1 SETTINGS readonly = 0' })],
      ['settings clause cap', () => client.query({ query: 'SELECT 1 SETTINGS max_execution_time = 1000' })],
      ['kill', () => client.command({ query: 'KILL QUERY WHERE 1' })],
      ['system', () => client.command({ query: 'SYSTEM FLUSH LOGS' })],
      ['optimize', () => client.command({ query: 'OPTIMIZE TABLE events' })],
      ['unknown setting asked for', () => client.query({ query: 'SELECT 1', clickhouse_settings: { allow_ddl: 1 } })],
    ]
    for (const [name, p] of refusedCodes) {
      const err = await refusal(p())
      t.equal(err.code, '164', `${name}: ${err.message}`)
    }
    const multi = await refusal(client.query({ query: "SELECT 1; SELECT file('/etc/hostname')" }))
    t.equal(multi.code, '62', 'more than one statement is a syntax error, as on a server')
    t.notMatch(multi.message, /formatQuery|In scope/, 'the error names the analyst\'s query, not the port\'s statement about it')
    const count = await client.query({ query: 'SELECT count() AS n FROM events WHERE user_id = {u:String}', query_params: { u: user.id }, format: 'JSONEachRow' })
    t.same(await count.json(), [{ n: '3' }], 'nothing was written or dropped')
  })

  t.test('a query up to a server\'s default max_query_size (256 KiB) runs, whatever its formatting adds; a larger one is refused saying so', async (t) => {
    // An IN list of quoted strings: the checks quote the query again and format it, which makes it longer than sent.
    // Long strings, few of them: this file caps a query's memory at 64 MiB, and each element of a
    // list costs the analyzer memory of its own.
    const list = (n: number) => Array.from({ length: n }, (_, i) => `'${'evt-\\'.repeat(8)}${String(i).padStart(6, '0')}'`).join(',')
    const near = `SELECT count() AS n FROM events WHERE event_id IN (${list(4_500)})`
    t.ok(near.length > 200_000 && near.length < 262_144, `${near.length} bytes`)
    const rs = await client.query({ query: near, format: 'JSONEachRow' })
    t.same(await rs.json(), [{ n: '0' }])
    const over = `SELECT count() AS n FROM events WHERE event_id IN (${list(6_000)})`
    const err = await refusal(client.query({ query: over, format: 'JSONEachRow' }))
    t.equal(err.code, '62')
    t.match(err.message, /Max query size exceeded: the analysts' port takes a query of at most 262144 bytes/)
  })

  t.test('table functions and functions that reach files, URLs, other servers or programs are refused', async (t) => {
    const outfile = join(tmpdir(), `${randomId('outfile-')}.txt`)
    const queries = [
      "SELECT * FROM file('/etc/hostname', 'LineAsString')",
      "SELECT file('/etc/hostname')",
      "SELECT * FROM url('http://127.0.0.1:1/x', 'CSV', 'a String')",
      "SELECT * FROM remote('127.0.0.1:9000', system.one)",
      "SELECT * FROM remoteSecure('127.0.0.1:9440', system.one)",
      "SELECT * FROM executable('ls', 'TSV', 'a String')",
      "SELECT * FROM s3('http://127.0.0.1:1/bucket/key.csv', 'CSV', 'a String')",
      "SELECT * FROM postgresql('127.0.0.1:5432', 'db', 't', 'postgres', '')",
      "SELECT * FROM mysql('127.0.0.1:3306', 'db', 't', 'u', 'p')",
      "SELECT * FROM filesystem('/etc')",
      "SELECT * FROM icebergLocal('/tmp')",
      "SELECT count() FROM events WHERE event_id IN (SELECT * FROM url('http://127.0.0.1:1/x', 'CSV', 'a String'))",
      "WITH (SELECT file('/etc/hostname')) AS h SELECT h",
      "DESCRIBE TABLE url('http://127.0.0.1:1/x', 'CSV', 'a String')",
      "EXPLAIN SELECT * FROM url('http://127.0.0.1:1/x', 'CSV', 'a String')",
      `SELECT 1 INTO OUTFILE '${outfile}'`,
    ]
    for (const query of queries) {
      const err = await refusal(client.query({ query, format: 'TabSeparated' }))
      t.equal(err.code, '164', `${query}: ${err.message}`)
    }
    t.notOk(existsSync(outfile), 'INTO OUTFILE wrote nothing')
    const local = await client.query({ query: 'SELECT sum(number) AS s FROM numbers(10)', format: 'JSONEachRow' })
    t.same(await local.json(), [{ s: '45' }], 'local generators are allowed')
  })

  t.test('each query is capped: result rows, execution time, memory; a client can lower a cap, never raise it', async (t) => {
    const rows = await refusal(client.query({ query: 'SELECT number FROM numbers(5000)', format: 'TabSeparated' }))
    t.equal(rows.code, '396', rows.message)
    const time = await refusal(client.query({ query: 'SELECT count() FROM numbers(1000000000000) WHERE NOT ignore(sipHash64(number))', format: 'TabSeparated' }))
    t.equal(time.code, '159', time.message)
    const memory = await refusal(client.query({ query: 'SELECT groupArray(toString(number)) FROM numbers(50000000)', format: 'TabSeparated' }))
    t.equal(memory.code, '241', memory.message)
    const raised = await client.query({
      query: "SELECT getSetting('max_execution_time') AS t, getSetting('max_result_rows') AS r, getSetting('readonly') AS ro",
      clickhouse_settings: { max_execution_time: 1000, max_result_rows: '500' },
      format: 'JSONEachRow',
    })
    t.same(await raised.json(), [{ t: 2, r: '500', ro: '1' }])
  })

  t.test("analysts' settings never reach the service's connection, which still writes", async (t) => {
    const rs = await app.clickhouse.query({ query: "SELECT getSetting('readonly') AS ro, getSetting('max_result_rows') AS r, getSetting('max_execution_time') AS t", format: 'JSONEachRow' })
    t.same(await rs.json(), [{ ro: '0', r: '0', t: 0 }])
    const res = await sendEvent(app, key.secret, { agentId: agentName, type: 'decision' })
    t.equal(res.statusCode, 202)
    await shipped(app)
    const count = await client.query({ query: 'SELECT count() AS n FROM events WHERE user_id = {u:String}', query_params: { u: user.id }, format: 'JSONEachRow' })
    t.same(await count.json(), [{ n: '4' }])
  })

  t.test('ingestion and dashboard reads go on while analysts run long queries', async (t) => {
    const slow = 'SELECT count() FROM numbers(1000000000000) WHERE NOT ignore(sipHash64(number))'
    const running = [0, 1].map(() => client.query({ query: slow, format: 'TabSeparated' }).then(() => null, (err: ClickHouseError) => err.code))
    const res = await sendEvent(app, key.secret, { agentId: agentName, type: 'decision' })
    t.equal(res.statusCode, 202)
    const events = await app.inject({ method: 'GET', url: '/v1/me/events?limit=10', headers: user.auth })
    t.equal(events.statusCode, 200)
    t.equal(events.json().events.length, 5, 'the event just sent is read back (read-your-writes waits for its insert)')
    t.same(await Promise.all(running), ['159', '159'], 'the analysts\' queries stopped at their time cap')
  })

  t.test('the embedded engine keeps no system log tables (nothing grows besides the data)', async (t) => {
    const rs = await client.query({ query: "SELECT name FROM system.tables WHERE database = 'system' AND name LIKE '%\\_log'", format: 'JSONEachRow' })
    t.same(await rs.json(), [])
  })

  t.test('a generated password is written once, mode 0600, and read back', async (t) => {
    const dir = join(TEST_DATA_DIR, randomId('pw-'))
    const first = loadAnalystPassword(dir, undefined)
    t.ok(first.file)
    t.equal(statSync(first.file!).mode & 0o777, 0o600)
    t.ok(first.password.length >= 20)
    t.equal(loadAnalystPassword(dir, undefined).password, first.password)
    t.equal(readFileSync(first.file!, 'utf8').trim(), first.password)
    t.same(loadAnalystPassword(dir, 'configured-pw'), { password: 'configured-pw', file: undefined })
  })

  t.test('functionsInAst tells table functions from functions', async (t) => {
    const ast = 'SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n  SelectQuery (children 2)\n   ExpressionList (children 1)\n    Function FILE (children 1)\n   TablesInSelectQuery (children 1)\n    TablesInSelectQueryElement (children 1)\n     TableExpression (children 1)\n      Function url (alias a) (children 1)\n       ExpressionList (children 1)\n        Function concat (children 1)\n'
    t.same(functionsInAst(ast), [['file', false], ['url', true], ['concat', false]])
  })

  t.test('over ANALYTICS_MAX_CONCURRENT_QUERIES a query is refused at once with 503; the running ones finish', async (t) => {
    // Four slow queries hold every slot (the cap is 4 in this file); they are counted the moment each
    // request arrives, so the fifth is sent once the engine reports four running. They wait rather than
    // compute, so a machine busy with other work does not push them past the 2 s cap.
    const slow = () => client.query({ query: 'SELECT 42 + sleep(1) AS s', format: 'JSONEachRow' })
      .then(async (rs) => (await rs.json<{ s: number }>())[0]!.s)
    const holders = Array.from({ length: 4 }, () => slow().catch((err: unknown) => err))
    const deadline = Date.now() + 20_000
    while (app.analyticsSql!.running() < 4 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
    t.equal(app.analyticsSql!.running(), 4, 'four queries running')
    const res = await fetch(`${url}/?query=${encodeURIComponent('SELECT 1')}`, { headers: { authorization: `Basic ${Buffer.from(`analyst:${PASSWORD}`).toString('base64')}` } })
    const results = await Promise.all(holders)
    t.equal(res.status, 503, 'refused while every slot is taken')
    t.match(await res.text(), /TOO_MANY_SIMULTANEOUS_QUERIES/)
    t.same(results.map(String), Array(4).fill('42'), 'the queries holding the slots finished with their answer')
    const after = await client.query({ query: 'SELECT 1 AS one', format: 'JSONEachRow' })
    t.same(await after.json(), [{ one: 1 }], 'a slot is free again once they finished')
  })
}
