/**
 * Scale-out benchmark: npm run bench:scale-out [-- --duration 10 --connections 50 --batch-connections 8]
 * The ingestion loads of `npm run bench` — (b) one event a request, (c) 500 events a request — against,
 * one after another on this machine and in one run:
 *   bare      the bare Fastify baseline (bench/bare-server.ts);
 *   embedded  one service instance on the embedded engine (the default);
 *   server×1  one instance with CLICKHOUSE_URL on `npm run clickhouse:serve` (the engine in its own process);
 *   server×2  two instances on that endpoint, the load split between them.
 * For each: events/s, its ratio to the bare baseline, and CPU µs per event from the start of the load
 * until everything it acknowledged is in ClickHouse (so shipping and the engine's insert count),
 * split between the service's processes and the engine's.
 */
import autocannon from 'autocannon'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { loadLocalSigningKey, signLocalToken } from '../src/auth/local-signing-key.ts'
import { withDefaultUser } from '../src/storage/postgres.ts'
import { benchDatabaseUrl, benchEvent, deleteRedisKeys, dropDatabase, serviceArgs, TS_LOADER_ARGS, waitForUp } from './bench-support.ts'

const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' }, 'batch-connections': { type: 'string', default: '8' } } })
const duration = Number(values.duration)
const connections = Number(values.connections)
const batchConnections = Number(values['batch-connections'])
const root = fileURLToPath(new URL('..', import.meta.url))
const work = mkdtempSync(join(tmpdir(), 'agent-telemetry-scale-out-'))
const databaseUrl = benchDatabaseUrl('agent_telemetry_scale_bench')
const redisPrefix = `bench:${randomBytes(4).toString('hex')}:`
const single = JSON.stringify(benchEvent(0))
const batch = JSON.stringify({ events: Array.from({ length: 500 }, (_, i) => benchEvent(i)) })
let nextPort = 4100 + Math.floor(Math.random() * 400)
const running: ChildProcess[] = []

function start (args: string[], env: Record<string, string> = {}, stdout: 'ignore' | 'pipe' = 'ignore'): ChildProcess {
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', stdout, 'inherit'] })
  running.push(child)
  return child
}

async function stopAll (): Promise<void> {
  await Promise.all(running.splice(0).map((child) => child.exitCode !== null
    ? undefined
    : new Promise<void>((resolve) => {
      const force = setTimeout(() => child.kill('SIGKILL'), 30_000)
      child.once('exit', () => { clearTimeout(force); resolve() })
      child.kill('SIGTERM')
    })))
}

/** CPU time (user + system, all threads) a process has used so far, in microseconds. */
function cpuMicros (pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100
}

/** The engine behind ClickHouse's HTTP interface, in its own process; resolves with its URL. */
async function startEndpoint (dataDir: string): Promise<{ url: string; child: ChildProcess }> {
  const child = start([...TS_LOADER_ARGS, 'src/cli/clickhouse-serve.ts', '--port', '0', '--data-dir', dataDir], {}, 'pipe')
  for await (const line of createInterface({ input: child.stdout! })) {
    const match = /^clickhouse-serve listening on (\S+)$/.exec(line)
    if (match) return { url: match[1]!, child }
  }
  throw new Error('clickhouse-serve exited before it listened')
}

/** What serves a load: its instances' URLs and processes; `ships` when they have an ingest log to drain. */
interface Setup { name: string; bases: string[]; service: ChildProcess[]; engine?: ChildProcess; ships: boolean }

// With CLICKHOUSE_URL the service requires SECRETS_KEY (base64 of 32 bytes `bench-only-secrets-key-not-real!`).
const BENCH_SECRETS_KEY = Buffer.from('bench-only-secrets-key-not-real!').toString('base64')

/** `count` service instances (API role), on the embedded engine or on `clickhouseUrl`. */
async function startService (name: string, count: number, clickhouseUrl?: string): Promise<Setup> {
  const dataDir = join(work, name)
  const setup: Setup = { name, bases: [], service: [], ships: true }
  for (let n = 0; n < count; n++) {
    const port = nextPort++
    setup.service.push(start(serviceArgs(), {
      PORT: String(port), DATA_DIR: dataDir, INGEST_LOG_DIR: join(dataDir, `ingest-log-${n}`), DATABASE_URL: databaseUrl, ROLES: 'api',
      REDIS_PREFIX: redisPrefix, LOG_LEVEL: 'warn', ANALYTICS_PORT: 'off', ...(clickhouseUrl ? { CLICKHOUSE_URL: clickhouseUrl, SECRETS_KEY: BENCH_SECRETS_KEY } : {}),
    }))
    setup.bases.push(`http://127.0.0.1:${port}`)
    // One at a time: the first makes the local signing key the others share through DATA_DIR.
    await waitForUp(`http://127.0.0.1:${port}/health`)
  }
  return setup
}

const db = new pg.Client({ connectionString: withDefaultUser(benchDatabaseUrl('postgres')) })

/** An enterprise user with a burst load cannot reach, and a key; returns the key's headers. */
async function keyHeaders (base: string, dataDir: string): Promise<Record<string, string>> {
  const subject = `bench-${randomBytes(4).toString('hex')}`
  const auth = { authorization: `Bearer ${await signLocalToken(await loadLocalSigningKey(dataDir), subject)}`, 'content-type': 'application/json' }
  await fetch(`${base}/v1/me`, { headers: auth })
  const users = new pg.Client({ connectionString: withDefaultUser(databaseUrl) })
  await users.connect()
  await users.query('UPDATE users SET tier = \'enterprise\', burst_per_minute = 1000000000 WHERE privy_id = $1', [subject])
  await users.end()
  const key = await (await fetch(`${base}/v1/me/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ label: 'bench' }) })).json() as { secret: string }
  return { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }
}

async function backlog (base: string): Promise<number> {
  return ((await (await fetch(`${base}/health`)).json()) as { ingest: { backlogRows: number } }).ingest.backlogRows
}

interface Row { setup: string; load: string; eventsPerSec: number; serviceUs: number; engineUs: number; non2xx: number }

/**
 * One load against a setup, split evenly over its instances; CPU from the load's start until every
 * instance's backlog is shipped.
 */
async function measure (setup: Setup, load: 'b' | 'c', headers: Record<string, string>): Promise<Row> {
  const [path, body, conns, perRequest] = load === 'b'
    ? ['/v1/events', single, connections, 1] as const
    : ['/v1/events/batch', batch, batchConnections, 500] as const
  const options = (base: string, seconds: number): autocannon.Options => ({
    url: `${base}${path}`, method: 'POST', headers, body, duration: seconds, connections: Math.max(1, Math.round(conns / setup.bases.length)),
  })
  console.error(`running ${setup.name} (${load}): 2 s warm-up, then ${duration} s…`)
  await Promise.all(setup.bases.map((base) => autocannon(options(base, 2))))
  const processes = [...setup.service, ...(setup.engine ? [setup.engine] : [])]
  const before = processes.map((p) => cpuMicros(p.pid!))
  const results = await Promise.all(setup.bases.map((base) => autocannon(options(base, duration))))
  if (setup.ships) {
    while ((await Promise.all(setup.bases.map(backlog))).some((n) => n > 0)) await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const used = processes.map((p, i) => cpuMicros(p.pid!) - before[i]!)
  const requests = results.reduce((sum, r) => sum + r.requests.total, 0)
  const events = Math.max(1, requests * perRequest)
  const serviceUs = used.slice(0, setup.service.length).reduce((a, b) => a + b, 0) / events
  return {
    setup: setup.name,
    load,
    eventsPerSec: results.reduce((sum, r) => sum + r.requests.average, 0) * perRequest,
    serviceUs,
    engineUs: setup.engine ? used.at(-1)! / events : NaN,
    non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
  }
}

const rows: Row[] = []
try {
  await db.connect()
  await db.query(`CREATE DATABASE ${new URL(databaseUrl).pathname.slice(1)}`).catch(() => undefined)

  const barePort = nextPort++
  const bare = start(serviceArgs([], ['bench/bare-server.ts', String(barePort)]))
  await waitForUp(`http://127.0.0.1:${barePort}/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  const baseline: Setup = { name: 'bare', bases: [`http://127.0.0.1:${barePort}`], service: [bare], ships: false }
  const plain = { 'content-type': 'application/json' }
  const bareRows = [await measure(baseline, 'b', plain), await measure(baseline, 'c', plain)]
  rows.push(...bareRows)
  await stopAll()

  for (const [name, count, server] of [['embedded', 1, false], ['server×1', 1, true], ['server×2', 2, true]] as const) {
    const endpoint = server ? await startEndpoint(join(work, `${name}-engine`)) : undefined
    const setup = await startService(name, count, endpoint?.url)
    setup.engine = endpoint?.child
    const headers = await keyHeaders(setup.bases[0]!, join(work, name))
    rows.push(await measure(setup, 'b', headers), await measure(setup, 'c', headers))
    await stopAll()
  }

  console.log(`\nscale-out benchmark — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} — node ${process.version} — ${duration}s per run`)
  console.log('setup'.padEnd(11) + 'load'.padEnd(6) + 'events/s'.padStart(10) + '× bare'.padStart(9) + 'non-2xx'.padStart(9) +
    'service µs/ev'.padStart(15) + 'engine µs/ev'.padStart(14) + 'total µs/ev'.padStart(13))
  for (const row of rows) {
    const bareRow = bareRows.find((r) => r.load === row.load)!
    const total = row.serviceUs + (Number.isNaN(row.engineUs) ? 0 : row.engineUs)
    console.log(row.setup.padEnd(11) + row.load.padEnd(6) + row.eventsPerSec.toFixed(0).padStart(10) +
      (row.eventsPerSec / bareRow.eventsPerSec).toFixed(2).padStart(9) + String(row.non2xx).padStart(9) +
      row.serviceUs.toFixed(1).padStart(15) + (row.setup === 'bare' ? '-' : Number.isNaN(row.engineUs) ? 'in service' : row.engineUs.toFixed(1)).padStart(14) + total.toFixed(1).padStart(13))
  }
  console.log('(b) one event a request; (c) 500 a request. µs/ev: CPU from the load\'s start until all it acknowledged is in ClickHouse.')
} finally {
  await stopAll()
  await db.end().catch(() => undefined)
  rmSync(work, { recursive: true, force: true })
  await deleteRedisKeys(redisPrefix).catch((err) => console.error(`could not delete the Redis keys ${redisPrefix}*: ${err.message}`))
  await dropDatabase(databaseUrl).catch((err) => console.error(`could not drop ${databaseUrl}: ${err.message}`))
}
