/**
 * Dashboard read benchmark:
 *   npm run bench:reads [-- --events 1000000,10000000 --requests 300]
 *   npm run bench:reads -- --data-dir DIR[,DIR…] --user NAME [--database-url URL[,URL…]] [--requests 300]
 * Each stage (1 M events, 10 M) gets a fresh store of its own, a temporary DATA_DIR and the Postgres
 * database agent_telemetry_reads_bench_<stage>, seeded from nothing, one store after the other, for
 * one user name (npm run seed -- --events N --settle). The seed is deterministic, so the 10 M store
 * holds the 1 M store's agents, sessions and traces (event ids and instants are each seed's own);
 * --settle has the engine merge each table as far as OPTIMIZE TABLE does. Then the service runs on every store side by side (one process
 * each) and the stages are measured interleaved: after 3 warm-up requests per read and store, each of
 * --requests rounds times every /v1/me read once on each store, read by read, the stores' order
 * reversed every other round, so that a moment of load on this shared machine falls on every stage
 * alike rather than on one read of one stage. It prints p50 and p95 per read and stage, and for the
 * last stage each list read's p95 against the p95 of a point read (one session, one trace: the first
 * store's, read in every store that holds them) and against its own p95 at the first stage: reads
 * whose cost follows the page shown, not the history, keep both ratios small.
 * --data-dir re-measures stores seeded earlier, one directory per stage in stage order, each seeded
 * for --user NAME into the Postgres database given by --database-url (one URL per directory; by
 * default agent_telemetry_reads_bench_<stage> on DATABASE_URL's server, i.e. seeded with
 * `DATA_DIR=DIR DATABASE_URL=postgres://localhost:5432/agent_telemetry_reads_bench_0 npm run seed -- …`).
 * A reused store keeps its directory and database; fresh stores and their databases are removed.
 */
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { benchDatabaseUrl, deleteRedisKeys, dropDatabase, serviceArgs, TS_LOADER_ARGS, verdict, waitForUp } from './bench-support.ts'

const USAGE = 'usage: npm run bench:reads -- [--events N[,M…] (growing)] [--requests N] ' +
  '[--data-dir DIR[,DIR…] --user NAME [--database-url URL[,URL…]] (stores seeded earlier, in stage order)]'
const { values } = parseArgs({
  options: {
    // Stages: one fresh store seeded to each size.
    events: { type: 'string', default: '1000000,10000000' },
    requests: { type: 'string', default: '300' },
    // Reuse stores seeded earlier (`DATA_DIR=dir DATABASE_URL=… npm run seed -- --user name --settle …`), one per stage.
    'data-dir': { type: 'string' },
    'database-url': { type: 'string' },
    user: { type: 'string' },
  },
})
const root = fileURLToPath(new URL('..', import.meta.url))
const reuse = values['data-dir'] !== undefined
const dirs = values['data-dir']?.split(',') ?? []
const databaseUrls = values['database-url']?.split(',') ?? []
const sizes = reuse ? [] : values.events!.split(',').map(Number)
const requests = Number(values.requests)
const valid = Number.isInteger(requests) && requests > 0 && (reuse
  ? values.user !== undefined && dirs.every(Boolean) && (databaseUrls.length === 0 || databaseUrls.length === dirs.length)
  : databaseUrls.length === 0 && sizes.every((n, i) => Number.isInteger(n) && n > (sizes[i - 1] ?? 0)))
if (!valid) {
  console.error(USAGE)
  process.exit(2)
}
const user = values.user ?? `reads-${randomBytes(4).toString('hex')}`
const redisPrefix = `bench:reads-${randomBytes(4).toString('hex')}:`
const WARM_UP = 3

/** The reads timed, by name; a point read is one session or one trace. */
const LISTS = ['agents', 'agent profile', 'events', 'events of an agent, 24 h', 'sessions', 'traces, 7 d', 'errors, 30 d', 'spend summary'] as const
const POINTS = ['one session', 'one trace'] as const
type Name = typeof LISTS[number] | typeof POINTS[number]
type Figures = Map<Name, { p50: number; p95: number }>

/** One stage's store: its data directory and Postgres database. */
interface Store {
  /** How messages name it: its size when seeded here, else its directory. */
  label: string
  dataDir: string
  databaseUrl: string
  /** Seeded by this run, and removed at its end. */
  fresh: boolean
  seedSeconds?: number
}

/** The service on one store, in a child process. */
interface Service {
  store: Store
  /** Resolves once the service answers; rejects if its process exits first. */
  up: Promise<void>
  /**
   * GETs a path and reads the whole body. Rejects, naming the store, when the service's process has
   * exited or the request fails, so that no wait outlives the process.
   */
  get(path: string, headers?: Record<string, string>): Promise<{ status: number; body: string }>
  stop(): Promise<void>
  /** Ends the process at once (on a signal, when there is no time to wait). */
  kill(): void
}

const envOf = (store: Store) => ({ ...process.env, DATA_DIR: store.dataDir, DATABASE_URL: store.databaseUrl, LOG_LEVEL: 'warn' })

function startService (store: Store, port: number, prefix: string): Service {
  const child = spawn(process.execPath, serviceArgs(), {
    cwd: root,
    // No analysts' SQL port: the services run side by side and the reads do not use it.
    env: { ...envOf(store), PORT: String(port), ANALYTICS_PORT: 'off', ROLES: 'api', ME_READS_PER_MINUTE: '1000000', REDIS_PREFIX: prefix },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  let exit: Error | undefined
  const exited = new Promise<never>((_resolve, reject) => {
    child.once('exit', (code, signal) => reject((exit = new Error(`the service on the ${store.label} store exited (${signal ?? `code ${code}`})`))))
    child.once('error', (err) => reject((exit = new Error(`the service on the ${store.label} store did not start: ${err.message}`))))
  })
  exited.catch(() => { /* seen through up, get and stop */ })
  const base = `http://127.0.0.1:${port}`
  return {
    store,
    up: Promise.race([waitForUp(`${base}/health`), exited]),
    async get (path, headers) {
      try {
        const res = await Promise.race([fetch(base + path, { headers }), exited])
        return { status: res.status, body: await Promise.race([res.text(), exited]) }
      } catch (err) {
        if (err === exit) throw err
        // A refused connection is often the first sign of an exit: give the exit a moment to name itself.
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 500))])
        throw new Error(`the ${store.label} store: GET ${path} failed: ${(err as Error).message}`, { cause: err })
      }
    },
    async stop () {
      child.kill('SIGTERM')
      const force = setTimeout(() => child.kill('SIGKILL'), 30_000)
      await exited.catch(() => {})
      clearTimeout(force)
    },
    kill () {
      child.kill('SIGKILL')
    },
  }
}

/** A set-up read's JSON; any other status than 200 is an error naming the store, the path and the status. */
async function json (service: Service, path: string, headers: Record<string, string>): Promise<any> {
  const res = await service.get(path, headers)
  if (res.status !== 200) throw new Error(`the ${service.store.label} store: GET ${path} answered ${res.status}: ${res.body.slice(0, 200)}`)
  return JSON.parse(res.body)
}

/** Times one read; a read that fails ends the benchmark. */
async function timed (service: Service, path: string, headers: Record<string, string>): Promise<number> {
  const t0 = performance.now()
  const res = await service.get(path, headers)
  const ms = performance.now() - t0
  if (res.status < 200 || res.status > 299) throw new Error(`the ${service.store.label} store: GET ${path} answered ${res.status}`)
  return ms
}

const stores: Store[] = []
const services: Service[] = []
// Stopped by a signal: no service left running and no fresh store left on disk (their databases are
// dropped by the next run before it seeds).
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const service of services) service.kill()
    for (const store of stores.filter((s) => s.fresh)) rmSync(store.dataDir, { recursive: true, force: true })
    process.exit(130)
  })
}
const results: { stored: number; seedSeconds: number | undefined; figures: Figures }[] = []
const load = { start: 0, end: 0 }
try {
  if (reuse) {
    dirs.forEach((dir, i) => stores.push({
      label: dir, dataDir: dir, databaseUrl: databaseUrls[i] ?? benchDatabaseUrl(`agent_telemetry_reads_bench_${i}`), fresh: false,
    }))
  }
  for (const [i, size] of sizes.entries()) {
    // In the list before it is seeded, so that a failed seed's directory and database are removed too.
    const store: Store = {
      label: `${short(size)}-event`,
      dataDir: mkdtempSync(join(tmpdir(), 'agent-telemetry-reads-')),
      databaseUrl: benchDatabaseUrl(`agent_telemetry_reads_bench_${i}`),
      fresh: true,
    }
    stores.push(store)
    // From nothing: a run stopped before its clean-up leaves its database behind.
    await dropDatabase(store.databaseUrl)
    console.error(`seeding the ${store.label} store`)
    const started = Date.now()
    execFileSync(process.execPath, [...TS_LOADER_ARGS, 'src/cli/seed.ts', '--events', String(size), '--user', user, '--settle'],
      { cwd: root, env: envOf(store), stdio: 'inherit' })
    store.seedSeconds = (Date.now() - started) / 1000
  }

  const port = 4100 + Math.floor(Math.random() * 200)
  stores.forEach((store, i) => services.push(startService(store, port + i, `${redisPrefix}${i}:`)))
  await Promise.all(services.map((s) => s.up))
  // Each store signs with its own key; stderr is piped so the token's sign-in link stays out of the output.
  const headers = services.map((s) => {
    const token = execFileSync(process.execPath, [...TS_LOADER_ARGS, 'src/cli/token.ts', user], { cwd: root, env: envOf(s.store), stdio: 'pipe' })
    return { authorization: `Bearer ${token.toString().trim()}` }
  })

  // Each store's paths. Agents are named alike in every store (their ids are each store's own); the
  // point reads are of the first store's newest session and trace, which a larger seed holds too.
  const paths: Record<Name, string>[] = []
  let session: string | undefined
  let trace: string | undefined
  for (const [i, s] of services.entries()) {
    // By name, so that each read is of the same agent in every store.
    const agents = ((await json(s, '/v1/me/agents', headers[i]!)).agents as { id: string; displayName: string }[])
      .sort((a, b) => a.displayName < b.displayName ? -1 : a.displayName > b.displayName ? 1 : 0)
    if (agents.length === 0) throw new Error(`no agents for user ${user} in store ${s.store.dataDir}: seeded with another --user?`)
    const sessions = (await json(s, '/v1/me/sessions', headers[i]!)).sessions as { sessionId: string }[]
    const traces = (await json(s, '/v1/me/traces?since=all', headers[i]!)).traces as { traceId: string }[]
    if (sessions.length === 0 || traces.length === 0) throw new Error(`no sessions or traces for user ${user} in store ${s.store.dataDir}`)
    const held = async (kind: 'sessions' | 'traces', wanted: string | undefined, own: string) => {
      if (wanted === undefined || wanted === own) return own
      if ((await s.get(`/v1/me/${kind}/${encodeURIComponent(wanted)}`, headers[i])).status === 200) return wanted
      console.error(`the ${s.store.label} store has no ${kind.slice(0, -1)} ${wanted}; its own newest, ${own}, is read instead`)
      return own
    }
    const sessionId = await held('sessions', session, sessions[0]!.sessionId)
    const traceId = await held('traces', trace, traces[0]!.traceId)
    session ??= sessionId
    trace ??= traceId
    paths.push({
      agents: '/v1/me/agents',
      'agent profile': `/v1/me/agents/${agents[0]!.id}`,
      events: '/v1/me/events',
      'events of an agent, 24 h': `/v1/me/events?since=24h&agentId=${(agents[1] ?? agents[0]!).id}`,
      sessions: '/v1/me/sessions',
      'one session': `/v1/me/sessions/${encodeURIComponent(sessionId)}`,
      'traces, 7 d': '/v1/me/traces?since=7d',
      'one trace': `/v1/me/traces/${encodeURIComponent(traceId)}`,
      'errors, 30 d': '/v1/me/errors?since=30d',
      'spend summary': '/v1/me/spend-summary',
    })
  }
  const stored = await Promise.all(services.map(async (s, i) => (await json(s, '/v1/me/spend-summary?days=365', headers[i]!)).total.eventCount as number))

  const names = Object.keys(paths[0]!) as Name[]
  const forward = services.map((_, i) => i)
  const backward = [...forward].reverse()
  for (let w = 0; w < WARM_UP; w++) {
    for (const name of names) for (const i of forward) await timed(services[i]!, paths[i]![name], headers[i]!)
  }
  console.error(`timing ${names.length} reads on ${services.length} stores, ${requests} rounds`)
  load.start = loadavg()[0]!
  const times = services.map(() => new Map<Name, number[]>(names.map((n) => [n, []])))
  for (let r = 0; r < requests; r++) {
    for (const name of names) {
      for (const i of r % 2 === 0 ? forward : backward) times[i]!.get(name)!.push(await timed(services[i]!, paths[i]![name], headers[i]!))
    }
    if ((r + 1) % 50 === 0 && r + 1 < requests) console.error(`  ${r + 1} rounds`)
  }
  load.end = loadavg()[0]!
  for (const [i, store] of stores.entries()) {
    const figures: Figures = new Map()
    for (const [name, ms] of times[i]!) {
      ms.sort((a, b) => a - b)
      const q = (p: number) => ms[Math.min(ms.length - 1, Math.ceil(p * ms.length) - 1)]!
      figures.set(name, { p50: q(0.5), p95: q(0.95) })
    }
    results.push({ stored: stored[i]!, seedSeconds: store.seedSeconds, figures })
  }
} finally {
  await Promise.all(services.map((s) => s.stop()))
  await deleteRedisKeys(redisPrefix).catch((err) => console.error(`could not delete the Redis keys: ${err.message}`))
  // A reused store keeps its database (its users and agents live there); a fresh one leaves nothing.
  for (const store of stores.filter((s) => s.fresh)) {
    rmSync(store.dataDir, { recursive: true, force: true })
    await dropDatabase(store.databaseUrl).catch((err) => console.error(`could not drop the benchmark database of the ${store.label} store: ${err.message}`))
  }
}

const first = results[0]!
const last = results.at(-1)!
console.log(`\ndashboard reads — ${new Date().toISOString()} — one user, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, stages measured interleaved: ` +
  `${requests} rounds, each timing every read once on every store (the stores' order reversed every other round), after ${WARM_UP} warm-up`)
for (const r of results) {
  console.log(`  ${r.stored.toLocaleString()} events (${r.seedSeconds === undefined ? 'reused store' : `seeded and settled in ${r.seedSeconds.toFixed(0)} s`})`)
}
console.log(`  load average ${load.start.toFixed(1)} when the timing began, ${load.end.toFixed(1)} when it ended`)
const header = 'read'.padEnd(28) + results.map((r) => `p50 @${short(r.stored)}`.padStart(12) + `p95 @${short(r.stored)}`.padStart(12)).join('')
console.log(header)
for (const name of [...LISTS, ...POINTS]) {
  console.log(name.padEnd(28) + results.map((r) => r.figures.get(name)!.p50.toFixed(1).padStart(12) + r.figures.get(name)!.p95.toFixed(1).padStart(12)).join(''))
}
// Against the slower of the two point reads: "a point read of one session or trace".
const point = Math.max(...POINTS.map((n) => last.figures.get(n)!.p95))
console.log(`\nat ${last.stored.toLocaleString()} events, each list read's p95 ÷ a point read's (${point.toFixed(1)} ms, the slower of one session and one trace; target ≤ 2)` +
  (results.length > 1 ? ` and ÷ its own p95 at ${first.stored.toLocaleString()} (target ≤ 1.25)` : ''))
let pass = true
for (const name of LISTS) {
  const p95 = last.figures.get(name)!.p95
  const toPoint = p95 / point
  const toFirst = p95 / first.figures.get(name)!.p95
  const ok = toPoint <= 2 && (results.length === 1 || toFirst <= 1.25)
  pass &&= ok
  console.log(name.padEnd(28) + `${toPoint.toFixed(2)} ×`.padStart(10) + (results.length > 1 ? `${toFirst.toFixed(2)} ×`.padStart(10) : '') + `  ${verdict(ok)}`)
}
for (const name of POINTS) {
  if (results.length > 1) console.log(`${name} (point read)`.padEnd(28) + ''.padStart(10) + `${(last.figures.get(name)!.p95 / first.figures.get(name)!.p95).toFixed(2)} ×`.padStart(10))
}
console.log(pass ? 'every list read within both targets' : 'some list read misses a target')

function short (n: number): string {
  return n >= 1e6 ? `${+(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${+(n / 1e3).toFixed(1)}k` : String(n)
}
