import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import { randomBytes } from 'node:crypto'
import { connect } from 'node:net'
import { createClient, ClickHouseError, ClickHouseLogLevel } from '@clickhouse/client'
import { startClickHouseEndpoint } from '../helpers/clickhouse-endpoint.ts'
import { TS_LOADER_ARGS } from '../helpers/ts-loader.ts'

const endpoint = await startClickHouseEndpoint()
t.teardown(() => endpoint.close())
const client = createClient({ url: endpoint.url, log: { level: ClickHouseLogLevel.OFF } })
t.teardown(() => client.close())

// Not the helper in app.ts: importing it would start a second endpoint under npm run test:server.
const randomId = (prefix: string) => prefix + randomBytes(6).toString('hex')

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

t.test('the official client creates a table, inserts JSONEachRow rows and reads them with parameters', async (t) => {
  const table = randomId('t_')
  await client.command({ query: `CREATE TABLE ${table} (id UInt32, name String, at DateTime64(3)) ENGINE = MergeTree ORDER BY id` })
  const inserted = await client.insert({
    table,
    values: [{ id: 1, name: "it's", at: '2026-01-02 03:04:05.678' }, { id: 2, name: 'b\tc', at: '2026-01-02 03:04:06.000' }],
    format: 'JSONEachRow',
  })
  t.ok(inserted.executed, 'the insert ran')
  t.ok(inserted.summary, 'with an X-ClickHouse-Summary the client parsed')
  const rs = await client.query({
    query: `SELECT id, name, at FROM ${table} WHERE name IN {names:Array(String)} AND at >= {from:DateTime64(3)} ORDER BY id`,
    query_params: { names: ["it's", 'b\tc'], from: new Date('2026-01-02T03:04:05.000Z') },
    format: 'JSONEachRow',
  })
  t.equal(rs.response_headers['x-clickhouse-format'], 'JSONEachRow')
  t.ok(rs.response_headers['x-clickhouse-query-id'])
  t.same(await rs.json(), [{ id: 1, name: "it's", at: '2026-01-02 03:04:05.678' }, { id: 2, name: 'b\tc', at: '2026-01-02 03:04:06.000' }])

  const compact = await client.query({ query: `SELECT id, name FROM ${table} ORDER BY id`, format: 'JSONCompactEachRow' })
  t.same(await compact.json(), [[1, "it's"], [2, 'b\tc']])
  const json = await client.query({ query: `SELECT count() AS n FROM ${table}`, format: 'JSON' })
  t.same(((await json.json()) as { data: unknown }).data, [{ n: 2 }])
  const tsv = await client.query({ query: `SELECT id FROM ${table} ORDER BY id`, format: 'TabSeparated' })
  t.equal(await tsv.text(), '1\n2\n')
})

t.test('settings travel with each request and last for it only', async (t) => {
  const table = randomId('dedup_')
  await client.command({ query: `CREATE TABLE ${table} (id UInt32) ENGINE = MergeTree ORDER BY id SETTINGS non_replicated_deduplication_window = 100` })
  const insert = () => client.insert({ table, values: [{ id: 7 }], format: 'JSONEachRow', clickhouse_settings: { insert_deduplication_token: 'block-1' } })
  await insert()
  await insert()
  const count = await client.query({ query: `SELECT count() AS n FROM ${table}`, format: 'JSONEachRow' })
  t.same(await count.json(), [{ n: '1' }], 'the block sent again under the same token was dropped')
  const asked = await client.query({ query: "SELECT getSetting('max_threads') AS m", format: 'JSONEachRow', clickhouse_settings: { max_threads: 3 } })
  t.same(await asked.json(), [{ m: 3 }])
  const token = await client.query({ query: "SELECT getSetting('insert_deduplication_token') AS s", format: 'JSONEachRow' })
  t.same(await token.json(), [{ s: '' }], 'an earlier request\'s setting is gone')
})

t.test('query parameters beyond max_query_size pass, as on a server (they are not part of the query)', async (t) => {
  const ids = Array.from({ length: 20_000 }, (_, i) => `evt_${String(i).padStart(26, '0')}`)
  const rs = await client.query({ query: 'SELECT length({ids:Array(String)}) AS n', query_params: { ids }, format: 'JSONEachRow' })
  t.same(await rs.json(), [{ n: 20_000 }])
  const size = await client.query({ query: "SELECT getSetting('max_query_size') AS m", query_params: { x: 1 }, format: 'JSONEachRow' })
  t.same(await size.json(), [{ m: 262144 }], 'the query itself is held to the default limit')
})

t.test('errors carry the engine\'s code and type, in the body and the headers', async (t) => {
  const unknown = await refusal(client.query({ query: 'SELECT * FROM no_such_table' }))
  t.equal(unknown.code, '60')
  t.equal(unknown.type, 'UNKNOWN_TABLE')
  const syntax = await refusal(client.query({ query: 'SELEC 1' }))
  t.equal(syntax.code, '62')
  const multi = await refusal(client.command({ query: 'SELECT 1; SELECT 2' }))
  t.equal(multi.code, '62', 'more than one statement is refused, as by a server')
  const setting = await refusal(client.query({ query: 'SELECT 1', clickhouse_settings: { no_such_setting: 1 } as never }))
  t.equal(setting.code, '115')
  const raw = await fetch(`${endpoint.url}/?query_id=q-1`, { method: 'POST', body: 'SELECT throwIf(1)' })
  t.equal(raw.status, 500)
  t.equal(raw.headers.get('x-clickhouse-exception-code'), '395')
  t.equal(raw.headers.get('x-clickhouse-query-id'), 'q-1')
  t.match(await raw.text(), /^Code: 395\. DB::Exception: .*\(FUNCTION_THROW_IF_VALUE_IS_NON_ZERO\) \(version [^)]+\)\n$/)
})

t.test('GET is read-only, as on a server; POST writes', async (t) => {
  const table = randomId('get_')
  await client.command({ query: `CREATE TABLE ${table} (id UInt32) ENGINE = Memory` })
  const get = await fetch(`${endpoint.url}/?query=${encodeURIComponent(`INSERT INTO ${table} VALUES (1)`)}`)
  t.equal(get.headers.get('x-clickhouse-exception-code'), '164')
  const post = await fetch(`${endpoint.url}/`, { method: 'POST', body: `INSERT INTO ${table} VALUES (1), (2)` })
  t.equal(post.status, 200)
  const read = await fetch(`${endpoint.url}/?query=${encodeURIComponent(`SELECT sum(id) FROM ${table}`)}`)
  t.equal(await read.text(), '3\n')
})

t.test('ping, database parameter, and what is refused rather than misread', async (t) => {
  t.same(await client.ping(), { success: true })
  t.equal(await (await fetch(`${endpoint.url}/ping`)).text(), 'Ok.\n')
  const database = randomId('db_')
  await client.command({ query: `CREATE DATABASE ${database}` })
  const inDb = createClient({ url: `${endpoint.url}/${database}`, log: { level: ClickHouseLogLevel.OFF } })
  t.teardown(() => inDb.close())
  await inDb.command({ query: 'CREATE TABLE x (a UInt8) ENGINE = Memory' })
  const tables = await client.query({ query: 'SELECT name FROM system.tables WHERE database = {d:String}', query_params: { d: database }, format: 'JSONEachRow' })
  t.same(await tables.json(), [{ name: 'x' }], 'the URL\'s database is the current one')
  const missing = createClient({ url: `${endpoint.url}/${randomId('nodb_')}`, log: { level: ClickHouseLogLevel.OFF } })
  t.teardown(() => missing.close())
  t.equal((await refusal(missing.query({ query: 'SELECT 1' }))).code, '81')
  t.equal((await refusal(client.query({ query: 'SELECT 1', session_id: 's1' }))).code, '36', 'server-side sessions are refused')
  const native = await fetch(`${endpoint.url}/?compress=1`, { method: 'POST', body: 'SELECT 1' })
  t.equal(native.headers.get('x-clickhouse-exception-code'), '36')
})

t.test('a request URL that cannot be parsed is answered 400, and the server goes on', async (t) => {
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connect(Number(new URL(endpoint.url).port), '127.0.0.1', () => socket.end('GET //[ HTTP/1.1\r\nHost: x\r\n\r\n'))
    let text = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => { text += chunk }).on('end', () => resolve(text)).on('error', reject)
  })
  t.match(answer, /^HTTP\/1\.1 400 /)
  t.same(await client.ping(), { success: true })
})

t.test('gzip request and response compression', async (t) => {
  const gz = createClient({ url: endpoint.url, compression: { request: true, response: true }, log: { level: ClickHouseLogLevel.OFF } })
  t.teardown(() => gz.close())
  const table = randomId('gz_')
  await gz.command({ query: `CREATE TABLE ${table} (id UInt32, s String) ENGINE = MergeTree ORDER BY id` })
  await gz.insert({ table, values: Array.from({ length: 1000 }, (_, id) => ({ id, s: 'x'.repeat(100) })), format: 'JSONEachRow' })
  const rs = await gz.query({ query: `SELECT count() AS n, sum(length(s)) AS l FROM ${table}`, format: 'JSONEachRow' })
  t.same(await rs.json(), [{ n: '1000', l: '100000' }])
  const raw = await fetch(`${endpoint.url}/?enable_http_compression=1`, {
    method: 'POST',
    headers: { 'content-encoding': 'gzip', 'accept-encoding': 'gzip' },
    body: gzipSync(`SELECT count() FROM ${table}`),
  })
  t.equal(raw.headers.get('content-encoding'), 'gzip', 'the answer was compressed (fetch decompressed it)')
  t.equal(await raw.text(), '1000\n')
})

t.test('--help says what the command is for; a bad option exits 2, a directory in use 1', async (t) => {
  const run = promisify(execFile)
  const cwd = fileURLToPath(new URL('../..', import.meta.url))
  const { stdout } = await run(process.execPath, [...TS_LOADER_ARGS, 'src/cli/clickhouse-serve.ts', '--help'], { cwd })
  t.match(stdout, /development and test tool/)
  t.match(stdout, /not a server for production/)
  await t.rejects(run(process.execPath, [...TS_LOADER_ARGS, 'src/cli/clickhouse-serve.ts', '--port', 'x'], { cwd }), { code: 2 })
  // Should it start after all (the test failing), it must not outlive the test.
  const serve = [...TS_LOADER_ARGS, 'src/cli/clickhouse-serve.ts', '--port', '0', '--data-dir', endpoint.dataDir, '--exit-with-parent']
  await t.rejects(run(process.execPath, serve, { cwd, timeout: 60_000 }),
    { code: 1, stderr: /^clickhouse-serve: --data-dir .* is in use by process \d+ .*another --data-dir/ }, 'a directory another process serves is refused in one line, naming the option')
})

t.test('the data stays in the data directory across restarts', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'clickhouse-serve-kept-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const query = async (sql: string) => {
    const served = await startClickHouseEndpoint({ dataDir })
    const c = createClient({ url: served.url, log: { level: ClickHouseLogLevel.OFF } })
    try {
      return await (await c.exec({ query: sql })).stream.toArray()
    } finally {
      await c.close()
      await served.close()
    }
  }
  await query('CREATE TABLE kept (id UInt32) ENGINE = MergeTree ORDER BY id')
  await query('INSERT INTO kept VALUES (42)')
  t.equal(Buffer.concat(await query('SELECT id FROM kept')).toString(), '42\n')
  t.ok(existsSync(join(dataDir, 'clickhouse')), 'under DATA-DIR/clickhouse, as the service keeps its embedded store')
})

t.test('a plain name that is no table is UNKNOWN_TABLE, never a file of the directory the command runs in', async (t) => {
  // clickhouse:serve runs from the checkout (test/helpers/clickhouse-endpoint.ts): a file there named like a table.
  const name = randomId('serve_plain_')
  const secret = `secret-${randomBytes(8).toString('hex')}`
  const file = join(fileURLToPath(new URL('../..', import.meta.url)), name)
  writeFileSync(file, `a,b\n${secret},1\n`)
  t.teardown(() => rmSync(file, { force: true }))
  for (const query of [`SELECT * FROM ${name}`, `SELECT * FROM default.${name}`, `SELECT 'x' IN ${name}`, `DESCRIBE TABLE ${name}`,
    `CREATE TABLE ${name}_c AS ${name}`, `INSERT INTO ${name} SELECT 'y', 2`, `SELECT * FROM (SELECT * FROM ${name})`,
    `SHOW CREATE TABLE ${name}`,
    // A reference outside the scope of a definition of the same name is the file's, and refused.
    `SELECT * FROM (WITH ${name} AS (SELECT 1 AS a) SELECT a FROM ${name}) AS q, ${name}`]) {
    const res = await fetch(`${endpoint.url}/`, { method: 'POST', body: query })
    const text = await res.text()
    t.equal(res.headers.get('x-clickhouse-exception-code'), '60', `${query}: ${text}`)
    t.equal(res.status, 404)
    t.notOk(text.includes(secret), 'the file was not read')
  }
  t.equal((await import('node:fs')).readFileSync(file, 'utf8'), `a,b\n${secret},1\n`, 'nor written')
  const exists = await fetch(`${endpoint.url}/`, { method: 'POST', body: `EXISTS TABLE ${name}` })
  t.equal(await exists.text(), '0\n', 'EXISTS answers for the service\'s tables, not for files')
  // A name the statement defines, and tables of another database, are not looked up in default.
  const rs = await client.query({ query: `WITH ${name} AS (SELECT 1 AS a) SELECT a FROM ${name}`, format: 'JSONEachRow' })
  t.same(await rs.json(), [{ a: 1 }])
  t.equal((await (await fetch(`${endpoint.url}/?database=system`, { method: 'POST', body: 'SELECT count() FROM one' })).text()), '1\n')
})

t.test('what names a file, a URL or a schema is refused; what the service sends still works', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'serve-sandbox-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const secret = `secret-${randomBytes(8).toString('hex')}`
  const secretFile = join(dir, 'key.json')
  writeFileSync(secretFile, `{"kty":"${secret}"}`)
  const target = join(dir, 'x.sh')
  const table = randomId('sbx_')
  await client.command({ query: `CREATE TABLE ${table} (a String) ENGINE = MergeTree ORDER BY a` })
  const bodies: string[] = []
  const send = async (search: string, body: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${endpoint.url}/${search}`, { method: 'POST', body, headers })
    const text = await res.text()
    bodies.push(text)
    return { status: res.status, code: res.headers.get('x-clickhouse-exception-code'), text }
  }
  const refused: Array<[string, string, Record<string, string>?]> = [
    [`?format_template_row=${encodeURIComponent(secretFile)}&default_format=Template`, 'SELECT 1'],
    [`?output_format_schema=${encodeURIComponent(target)}&default_format=Protobuf`, 'SELECT 1 AS `x\necho owned\ny`'],
    [`?format_schema=${encodeURIComponent(secretFile)}:M`, 'SELECT 1'],
    ['', 'SELECT 1', { 'x-clickhouse-format': 'Template' }],
    ['', 'SELECT 1 FORMAT CapnProto'],
    ['', `SELECT 1 SETTINGS format_template_row = '${secretFile}' FORMAT Template`],
    ['', `SET format_template_row = '${secretFile}'`],
    ['', `SELECT file('${secretFile}')`],
    ['', `SELECT * FROM file('${secretFile}', 'LineAsString')`],
    ['', "SELECT * FROM url('http://127.0.0.1:1/x', 'CSV', 'a String')"],
    ['', "SELECT * FROM executable('ls', 'TSV', 'a String')"],
    ['', `SELECT 1 INTO OUTFILE '${target}'`],
    ['', `INSERT INTO ${table} FROM INFILE '${secretFile}' FORMAT LineAsString`],
    ['', `INSERT INTO FUNCTION file('${target}', 'TSV') SELECT 'echo owned'`],
    ['', `CREATE TABLE ${table}_f (a String) ENGINE = File(LineAsString, '${secretFile}')`],
    ['', `CREATE TABLE ${table}_u (a String) ENGINE = URL('http://127.0.0.1:1/x', CSV)`],
    ['', `CREATE DICTIONARY ${table}_d (a String) PRIMARY KEY a SOURCE(FILE(PATH '${secretFile}' FORMAT 'LineAsString')) LAYOUT(FLAT()) LIFETIME(0)`],
    [`?query=${encodeURIComponent(`INSERT INTO ${table} FORMAT CapnProto`)}`, 'x'],
    ['', `BACKUP TABLE ${table} TO File('${join(dir, 'backup')}')`],
    ['', `ATTACH TABLE ${table}_a FROM '${dir}' (a String) ENGINE = MergeTree ORDER BY a`],
    // The embedded engine's default database reads a file named by its path as a table.
    ['', 'SELECT * FROM `/etc/passwd`'],
    ['', `SELECT * FROM \`${secretFile}\``],
    ['', `SELECT * FROM default.\`${secretFile}\``],
    ['', `SELECT 'x' IN \`${secretFile}\``],
    ['', `SELECT joinGet(\`${secretFile}\`, 'a', 1)`],
    ['', `DESCRIBE TABLE \`${secretFile}\``],
    ['', `CREATE TABLE ${table}_c AS \`${secretFile}\``],
    ['', `CREATE TABLE ${table}_c AS default.\`${secretFile}\``],
    ['', `INSERT INTO \`${target}\` SELECT 'echo owned'`],
    ['', `INSERT INTO TABLE default.\`${target}\` VALUES ('echo owned')`],
  ]
  for (const [search, body, headers] of refused) {
    const res = await send(search, body, headers)
    t.equal(res.code, '164', `${search} ${body}: ${res.text}`)
    t.equal(res.status, 403)
  }
  t.notOk(existsSync(target), 'no file was written')
  t.notOk(existsSync(join(dir, 'backup')), 'no backup was written')
  t.notOk(bodies.some((b) => b.includes(secret)), 'the secret never appeared')

  // What the service and its tests send: inserts with input formats and settings, projections, SYSTEM statements.
  await client.insert({ table, values: [{ a: 'x' }], format: 'JSONEachRow', clickhouse_settings: { date_time_input_format: 'best_effort', input_format_skip_unknown_fields: 1 } })
  await client.command({ query: `INSERT INTO ${table} VALUES ('y'), ('z')` })
  await client.command({ query: `SYSTEM STOP MERGES ${table}` })
  await client.command({ query: `SYSTEM START MERGES ${table}` })
  const rs = await client.query({ query: `SELECT a FROM ${table} ORDER BY a SETTINGS max_threads = 1`, format: 'JSONEachRow' })
  t.same(await rs.json(), [{ a: 'x' }, { a: 'y' }, { a: 'z' }])
})
