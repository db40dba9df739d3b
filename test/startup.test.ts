import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { createServer, type AddressInfo, type Socket } from 'node:net'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { TEST_DATABASE_URL, TEST_SECRETS_KEY } from './helpers/env.ts'
import { loadConfig } from '../src/config.ts'
import { checkDataDirFree, describeStartupFailure, StartupError } from '../src/startup-failure.ts'
import { prettyLine } from '../src/log-format.ts'
import { TS_LOADER_ARGS } from './helpers/ts-loader.ts'

const MAIN = new URL('../src/main.ts', import.meta.url).pathname

/** Starts the service with extra settings; resolves with its exit code and output once it exits. */
function start (env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'startup-test-'))
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...TS_LOADER_ARGS, MAIN], {
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: TEST_DATABASE_URL,
        DATA_DIR: dataDir,
        PORT: '0',
        ANALYTICS_PORT: 'off',
        REDIS_PREFIX: 'startup-test:',
        // The tests' key, as every test instance has (server-mode cases say theirs).
        ...(env.CLICKHOUSE_URL ? {} : { SECRETS_KEY: TEST_SECRETS_KEY }),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    // A service that starts after all would run forever: stop it (the test then fails on its exit code).
    const guard = setTimeout(() => child.kill('SIGKILL'), 90_000)
    child.on('error', reject)
    child.on('exit', (code) => {
      clearTimeout(guard)
      rmSync(dataDir, { recursive: true, force: true })
      resolve({ code, stdout, stderr })
    })
  })
}

// Servers that take a connection and never answer, or close it at once: not Postgres (the client
// sees the close as the connection ending, or as a reset when it was writing).
const stalled = createServer(() => {})
const closing = createServer((socket) => socket.destroy())
await Promise.all([stalled, closing].map((s) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))))
t.teardown(() => { stalled.close(); closing.close() })
const portOf = (s: typeof stalled) => (s.address() as AddressInfo).port

const cases: Array<[string, Record<string, string>, RegExp]> = [
  ['a Postgres address that takes the connection and never answers', { DATABASE_URL: `postgres://127.0.0.1:${portOf(stalled)}/agent_telemetry_x_test` },
    new RegExp(`cannot reach Postgres at 127\\.0\\.0\\.1:${portOf(stalled)} \\(DATABASE_URL\\): timed out`)],
  ['a Postgres address that closes the connection', { DATABASE_URL: `postgres://127.0.0.1:${portOf(closing)}/agent_telemetry_x_test` },
    new RegExp(`cannot reach Postgres at 127\\.0\\.0\\.1:${portOf(closing)} \\(DATABASE_URL\\): (the server closed the connection without answering|connection reset)`)],
  ['Postgres refusing connections', { DATABASE_URL: 'postgres://127.0.0.1:1/agent_telemetry_x_test' }, /cannot reach Postgres at 127\.0\.0\.1:1 \(DATABASE_URL\): connection refused/],
  ['an unknown Postgres role', { DATABASE_URL: TEST_DATABASE_URL.replace('postgres://', 'postgres://no_such_role_x@') }, /Postgres refused the login of user "no_such_role_x" \(DATABASE_URL\).*Create that role/],
  ['a Redis address that takes the connection and never answers', { REDIS_URL: `redis://127.0.0.1:${portOf(stalled)}` },
    new RegExp(`cannot reach Redis at 127\\.0\\.0\\.1:${portOf(stalled)} \\(REDIS_URL\\): no answer \\(the server closed the connection, or took it and did not answer\\)`)],
  ['Redis down', { REDIS_URL: 'redis://127.0.0.1:1' }, /cannot reach Redis at 127\.0\.0\.1:1 \(REDIS_URL\): connection refused/],
  // A name that does not resolve (`.invalid` never does): said as such, not as a closed connection.
  ['a Redis host that does not resolve', { REDIS_URL: 'redis://nosuch.invalid:6379' }, /cannot reach Redis at nosuch\.invalid:6379 \(REDIS_URL\): (unknown host|host name lookup failed)/],
  ['a ClickHouse server down', { CLICKHOUSE_URL: 'http://127.0.0.1:1', SECRETS_KEY: TEST_SECRETS_KEY }, /cannot reach ClickHouse at 127\.0\.0\.1:1 \(CLICKHOUSE_URL\)/],
  ['a ClickHouse address that takes the connection and never answers', { CLICKHOUSE_URL: `http://127.0.0.1:${portOf(stalled)}`, SECRETS_KEY: TEST_SECRETS_KEY },
    new RegExp(`cannot reach ClickHouse at 127\\.0\\.0\\.1:${portOf(stalled)} \\(CLICKHOUSE_URL\\): it took the connection but did not answer in time`)],
  // Instances sharing Postgres cannot each generate a key: what one encrypted, the others could not read.
  ['CLICKHOUSE_URL and no SECRETS_KEY', { CLICKHOUSE_URL: 'http://127.0.0.1:1' }, /SECRETS_KEY is required when CLICKHOUSE_URL is set.*openssl rand -base64 32/],
]
for (const [name, env, expected] of cases) {
  t.test(`start-up with ${name} fails with one line naming the setting, no stack`, async (t) => {
    const { code, stdout, stderr } = await start(env)
    t.equal(code, 1)
    const lines = stderr.trim().split('\n')
    t.equal(lines.length, 1, stderr)
    t.match(lines[0], /^agent-telemetry could not start: /)
    t.match(lines[0], expected)
    t.notMatch(stderr + stdout, /\n\s+at /, 'no stack trace')
    t.notMatch(stdout, /"level":50/, 'no error log lines besides the one')
  })
}

t.test('a bad setting stops start-up before anything is reached: exit 2, one line naming the setting', async (t) => {
  // Postgres at a port nothing listens on: had the service tried to reach it first, it would say so and exit 1.
  const { code, stdout, stderr } = await start({ ANALYST_PASSWORD: 'too-short', DATABASE_URL: 'postgres://127.0.0.1:1/agent_telemetry_x_test' })
  t.equal(code, 2)
  t.equal(stderr.trim().split('\n').length, 1, stderr)
  t.match(stderr, /ANALYST_PASSWORD must NOT have fewer than 16 characters/)
  t.notMatch(stderr + stdout, /\n\s+at /, 'no stack trace')
})

t.test('a URL setting that does not parse is a bad setting: exit 2, naming it', async (t) => {
  const { code, stderr } = await start({ DATABASE_URL: 'postgres://localhost:abc/agent_telemetry_x_test' })
  t.equal(code, 2)
  t.match(stderr, /^invalid settings: DATABASE_URL is not a valid URL/)
})

t.test('a DATA_DIR that cannot be a directory is one line naming DATA_DIR and why', async (t) => {
  const file = join(mkdtempSync(join(tmpdir(), 'startup-file-')), 'afile')
  writeFileSync(file, 'not a directory')
  for (const dataDir of [file, join(file, 'sub')]) {
    const { code, stderr } = await start({ DATA_DIR: dataDir })
    t.equal(code, 1)
    t.match(stderr, new RegExp(`^agent-telemetry could not start: cannot write under DATA_DIR ${dataDir}: a file is where a directory must be`), dataDir)
    t.notMatch(stderr, /\n\s+at /)
  }
})

t.test('an INGEST_LOG_DIR apart from DATA_DIR that cannot be a directory is told as INGEST_LOG_DIR', async (t) => {
  const file = join(mkdtempSync(join(tmpdir(), 'startup-file-')), 'afile')
  writeFileSync(file, 'not a directory')
  const { code, stderr } = await start({ INGEST_LOG_DIR: file })
  t.equal(code, 1)
  t.match(stderr, new RegExp(`^agent-telemetry could not start: cannot write under INGEST_LOG_DIR ${file}: a file is where a directory must be`))
  t.notMatch(stderr, /\n\s+at /)
})

t.test('a HOST that names no address of this machine is told as HOST', async (t) => {
  const { code, stderr } = await start({ HOST: '999.1.1.1' })
  t.equal(code, 1)
  t.match(stderr, /^agent-telemetry could not start: cannot listen on HOST 999\.1\.1\.1: the name does not resolve \(ENOTFOUND\)\. Set HOST to an address of this machine/)
})

t.test('a DATA_DIR under a directory that cannot be made (under /proc) is told, not waited on for ever', async (t) => {
  // Node's recursive mkdir loops without end on the ENOENT /proc answers; the start made no progress.
  const { code, stderr } = await start({ DATA_DIR: '/proc/agent-telemetry-x/data' })
  t.equal(code, 1)
  t.match(stderr, /^agent-telemetry could not start: cannot write under DATA_DIR \/proc\/agent-telemetry-x\/data: a directory on the way cannot be made/)
  t.notMatch(stderr, /\n\s+at /)
})

t.test('a port in use is told before the start\'s work, with nothing logged as starting', async (t) => {
  const holder = createServer()
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve))
  t.teardown(() => holder.close())
  const port = String((holder.address() as AddressInfo).port)
  const { code, stdout, stderr } = await start({ PORT: port, HOST: '127.0.0.1' })
  t.equal(code, 1)
  t.match(stderr, new RegExp(`^agent-telemetry could not start: PORT ${port} on 127\\.0\\.0\\.1 \\(HOST\\) is already in use`))
  t.notMatch(stdout, /agent-telemetry starting|migrations/, 'it stopped before building anything')
})

t.test('LOG_LEVEL=debug adds the stack', async (t) => {
  const { code, stderr } = await start({ REDIS_URL: 'redis://127.0.0.1:1', LOG_LEVEL: 'debug' })
  t.equal(code, 1)
  t.match(stderr, /^agent-telemetry could not start: cannot reach Redis/)
  t.match(stderr, /\n\s+at /)
})

t.test('a DATA_DIR held by another live process is refused before the engine opens it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'startup-lock-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'clickhouse'))
  const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120000)'], { stdio: 'ignore' })
  t.teardown(() => { holder.kill() })
  writeFileSync(join(dir, 'clickhouse', 'status'), `PID: ${holder.pid}\nStarted at: 2026-01-01 00:00:00\n`)
  t.throws(() => checkDataDirFree(dir), { name: 'StartupError', message: new RegExp(`DATA_DIR ${dir} is in use by process ${holder.pid}.*own DATA_DIR.*CLICKHOUSE_URL`) })
  writeFileSync(join(dir, 'clickhouse', 'status'), 'PID: 999999999\nStarted at: 2026-01-01 00:00:00\n')
  t.doesNotThrow(() => checkDataDirFree(dir), 'a status file left by a process that is gone is ignored')
  writeFileSync(join(dir, 'clickhouse', 'status'), `PID: ${holder.pid}\nStarted at: 2026-01-01 00:00:00\n`)
  const { code, stderr } = await start({ DATA_DIR: dir })
  t.equal(code, 1)
  t.equal(stderr.trim().split('\n').length, 1, stderr)
  t.match(stderr, /DATA_DIR .* is in use/)
  // The tools that open the engine say the same, not the engine's lock error.
  for (const tool of ['seed', 'migrate']) {
    const run = spawnSync(process.execPath, [...TS_LOADER_ARGS, new URL(`../src/cli/${tool}.ts`, import.meta.url).pathname, ...(tool === 'seed' ? ['--events', '10'] : [])],
      { env: { PATH: process.env.PATH ?? '', DATA_DIR: dir, DATABASE_URL: TEST_DATABASE_URL }, encoding: 'utf8' })
    t.equal(run.status, 1, tool)
    t.match(run.stderr, new RegExp(`^DATA_DIR ${dir} is in use by process ${holder.pid}`), tool)
    t.notMatch(run.stderr, /\n\s+at |ChdbConnectionError/, `${tool}: no stack, no engine error`)
  }
})

t.test('describeStartupFailure names the setting for ports and passes StartupErrors through', async (t) => {
  const config = loadConfig({ PORT: '3000', ANALYTICS_PORT: '8123' })
  const inUse = (port: number) => Object.assign(new Error(`listen EADDRINUSE: address already in use 127.0.0.1:${port}`), { code: 'EADDRINUSE', port })
  t.match(describeStartupFailure(inUse(3000), config), /^PORT 3000 on 127\.0\.0\.1 \(HOST\) is already in use/)
  t.match(describeStartupFailure(inUse(8123), config), /^ANALYTICS_PORT 8123/)
  t.equal(describeStartupFailure(new Error('wrapped', { cause: new StartupError('the reason') }), config), 'the reason')
  t.match(describeStartupFailure(new Error('something else'), config), /^something else \(set LOG_LEVEL=debug for the stack\)$/)
  // A full disk: a write's ENOSPC carries no path, the embedded engine says it in its own words.
  const full = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' })
  t.match(describeStartupFailure(full, config), /^the disk under DATA_DIR .+ \(or INGEST_LOG_DIR .+\) is full \(ENOSPC: no space left on device, write\)\. Free space there/)
  t.match(describeStartupFailure(new Error('Code: 243. DB::Exception: Cannot reserve 1.00 MiB, not enough space. (NOT_ENOUGH_SPACE)'), config), /^the disk under DATA_DIR .+ is full/)
})

t.test('a ClickHouse server that takes the connection and never answers is named with CLICKHOUSE_URL', async (t) => {
  const held: Socket[] = []
  const stalled = createServer((socket) => { held.push(socket) })
  await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { for (const s of held) s.destroy(); stalled.close() })
  const url = `http://127.0.0.1:${(stalled.address() as AddressInfo).port}`
  const { createClient, ClickHouseLogLevel } = await import('@clickhouse/client')
  const client = createClient({ url, request_timeout: 200, log: { level: ClickHouseLogLevel.OFF } })
  t.teardown(() => client.close())
  const err = await client.query({ query: 'SELECT 1' }).then(() => null, (e: unknown) => e)
  t.ok(err, 'the client gives up')
  const config = loadConfig({ CLICKHOUSE_URL: url })
  t.match(describeStartupFailure(err, config), /^cannot reach ClickHouse at 127\.0\.0\.1:\d+ \(CLICKHOUSE_URL\): it took the connection but did not answer in time/)
})

t.test('LOG_FORMAT=pretty lines', async (t) => {
  const line = prettyLine(JSON.stringify({ level: 30, time: Date.parse('2026-01-01T10:11:12.345Z'), pid: 1, hostname: 'h', msg: 'listening', port: 3000, url: 'http://x y' }))
  t.equal(line, '10:11:12.345 INFO  listening port=3000 url="http://x y"')
  t.match(prettyLine(JSON.stringify({ level: 50, time: 0, msg: 'failed', err: { message: 'boom', stack: 'Error: boom\n    at f (a.ts:1:1)' } })), /ERROR failed error=boom\n {4}at f \(a\.ts:1:1\)/)
})
