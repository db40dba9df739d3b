/**
 * Ingestion benchmark: npm run bench [-- --duration 10 --connections 50 --batch-connections 8]
 * Each server runs in its own process; autocannon and the probes run here. Printed, all from one run:
 * (a) a bare Fastify route answering 202 (baseline); (b) POST /v1/events, one event a request;
 * (c) POST /v1/events/batch, 500 events a request, against (c0) the bare framework parsing the same
 * batch; (d) visibility of a probe event under (b)'s load, in a run of its own after (b) (the probe's
 * reads cost the engine CPU that (b) would otherwise have): from its 202 to the first read that
 * counts it (straight from ClickHouse, through the analysts' SQL port); (e) time to drain the ingest backlog after (b) stops; (f) microseconds per event in
 * each pipeline step during (b), the event-loop delay, and Postgres transactions a second.
 * With --runs …,ck: (ck) is (c) with a new Idempotency-Key on every request (what a keyed request costs).
 */
import autocannon from 'autocannon'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir, cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { loadLocalSigningKey, signLocalToken } from '../src/auth/local-signing-key.ts'
import { withDefaultUser } from '../src/storage/postgres.ts'
import { benchArgs, benchDatabaseUrl, freePort, benchEvent as event, byThread, cpuByThread, type ThreadCpu, deleteRedisKeys, dropDatabase, untilShipped as untilServiceShipped, serviceArgs, verdict, waitForUp } from './bench-support.ts'

const { values } = parseArgs({ args: benchArgs(), options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' }, 'batch-connections': { type: 'string', default: '8' }, runs: { type: 'string', default: 'a,b,c0,c' }, rounds: { type: 'string', default: '1' } } })
// --runs picks some of the runs (e.g. --runs b to profile the single-event path alone); ratios need both sides.
const runs = new Set(values.runs.split(','))
// --rounds N runs each bare/service pair N times, alternating, and prints every ratio and their median
// (the machine's speed drifts between runs; the other figures come from the last round).
const rounds = Math.max(1, Number(values.rounds))
const duration = Number(values.duration)
const connections = Number(values.connections)
const batchConnections = Number(values['batch-connections'])
const root = fileURLToPath(new URL('..', import.meta.url))
const dataDir = mkdtempSync(join(tmpdir(), 'agent-telemetry-bench-'))
// BENCH_DATABASE_URL gives a run a database of its own (another benchmark on the machine drops the shared one when it ends).
const databaseUrl = process.env.BENCH_DATABASE_URL ?? benchDatabaseUrl('agent_telemetry_bench')
const redisPrefix = `bench:${randomBytes(4).toString('hex')}:`
const children: ChildProcess[] = []

function startProcess (args: string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
  children.push(child)
  return child
}

interface Figures {
  name: string; rps: number; p50: number; p99: number; non2xx: number; errors: number; eventsPerSec?: number; cpuUsPerEvent: number
  /** With `shipped`: CPU per event from the run's start until its backlog was in ClickHouse. */
  cpuUntilShippedUsPerEvent?: number
}

/** CPU time (user + system, all threads) a process has used, in microseconds, from /proc. */
function cpuMicros (pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100 // utime, stime in clock ticks (100 Hz)
}

/**
 * Runs a load after a 2 s warm-up. With `shipped` (resolves once the service's backlog is empty), the
 * warm-up's backlog ships before the measured run starts, and the CPU is also read once the run's own
 * backlog has shipped: a rate the engine's inserts cannot follow defers their work past the run's
 * end, so the CPU during the run alone leaves part of its events' cost out.
 */
async function measure (name: string, server: ChildProcess, opts: autocannon.Options, eventsPerRequest = 1, during?: () => void, shipped?: () => Promise<void>): Promise<Figures> {
  console.error(`running ${name}: 2 s warm-up, then ${opts.duration} s…`)
  await autocannon({ ...opts, duration: 2 }) // warm-up: JIT, caches, connection pools
  await shipped?.()
  const cpuBefore = cpuMicros(server.pid!)
  const run = autocannon(opts)
  during?.()
  const r = await run
  const cpu = cpuMicros(server.pid!) - cpuBefore
  const events = Math.max(1, r.requests.total * eventsPerRequest)
  let cpuUntilShippedUsPerEvent: number | undefined
  if (shipped) {
    await shipped()
    cpuUntilShippedUsPerEvent = (cpuMicros(server.pid!) - cpuBefore) / events
  }
  return {
    cpuUsPerEvent: cpu / events,
    cpuUntilShippedUsPerEvent,
    name,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    eventsPerSec: eventsPerRequest > 1 ? r.requests.average * eventsPerRequest : undefined,
  }
}

/** The machine's CPU time so far from /proc/stat, in clock ticks: busy (user, nice, system, irq, softirq) and all. */
function machineTicks (): { busy: number; total: number } {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number) as number[]
  const busy = user! + nice! + system! + irq! + softirq!
  return { busy, total: busy + idle! + iowait! + steal! }
}

/** How busy the machine was between two machineTicks readings, in % of all its cores' time. */
function busyPercent (before: { busy: number; total: number }, after: { busy: number; total: number }): number {
  return (100 * (after.busy - before.busy)) / Math.max(1, after.total - before.total)
}

/** The middle value (the mean of the two middle ones for an even count). */
function median (xs: number[]): number {
  const sorted = [...xs].sort((x, y) => x - y)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const percentile = (sorted: number[], p: number) => sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN

try {
  const barePort = await freePort()
  const servicePort = await freePort()
  // (d) reads ClickHouse through the analysts' SQL port: no cache, and never a wait for the shipper.
  const analyticsPort = await freePort()
  const analystPassword = randomBytes(12).toString('hex')
  const base = `http://127.0.0.1:${servicePort}`
  const bare = startProcess(serviceArgs([], ['bench/bare-server.ts', String(barePort)]))
  // BENCH_PROFILE=dir writes a CPU profile of the service (node --cpu-prof) into dir when it exits.
  const service = startProcess(serviceArgs([
    ...(process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : []),
    ...(process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : []),
  ]), {
    PORT: String(servicePort), DATA_DIR: dataDir, DATABASE_URL: databaseUrl, ROLES: 'api',
    REDIS_PREFIX: redisPrefix, LOG_LEVEL: 'warn', ME_READS_PER_MINUTE: '100000',
    ANALYTICS_PORT: String(analyticsPort), ANALYST_PASSWORD: analystPassword,
  })
  await waitForUp(`http://127.0.0.1:${barePort}/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  await waitForUp(`${base}/health`)

  const db = new pg.Client({ connectionString: withDefaultUser(databaseUrl) })
  await db.connect()
  async function newUser () {
    const subject = `bench-${randomBytes(4).toString('hex')}`
    const token = await signLocalToken(await loadLocalSigningKey(dataDir), subject)
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
    const me = await (await fetch(`${base}/v1/me`, { headers: auth })).json() as { id: string }
    await db.query('UPDATE users SET tier = \'enterprise\', burst_per_minute = 1000000000 WHERE privy_id = $1', [subject])
    const key = await (await fetch(`${base}/v1/me/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ label: 'bench' }) })).json() as { secret: string }
    return { id: me.id, auth, headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' } }
  }
  const loader = await newUser()
  const prober = await newUser()
  const headers = loader.headers
  const single = JSON.stringify(event(0))
  const batch = JSON.stringify({ events: Array.from({ length: 500 }, (_, i) => event(i)) })
  const health = async () => (await (await fetch(`${base}/health`)).json()) as {
    ingest: { backlogRows: number; steps: Record<string, { events: number; totalMs: number }> }
    eventLoopDelayMs: { p50: number; p99: number; max: number }
  }
  const untilShipped = () => untilServiceShipped(base)
  const pgTransactions = async () => Number((await db.query('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1', [new URL(databaseUrl).pathname.slice(1)])).rows[0].n)

  // (d): one probe event at a time under (b)'s load; visibility = its 202 → the first read that counts
  // it, straight from ClickHouse through the analysts' SQL port (/v1/me reads would wait for the
  // shipper and hasten it; the public profile's KPIs are cached for a second).
  const first = await (await fetch(`${base}/v1/events`, { method: 'POST', headers: prober.headers, body: JSON.stringify({ agentId: 'probe' }) })).json() as { agentId: string }
  const idPattern = /^[\w-]+$/
  if (typeof first.agentId !== 'string' || typeof prober.id !== 'string' || !idPattern.test(first.agentId) || !idPattern.test(prober.id)) {
    throw new Error(`unexpected ids for the probe: ${JSON.stringify({ agentId: first.agentId, userId: prober.id })}`)
  }
  const countSql = `SELECT count() FROM events WHERE user_id = '${prober.id}' AND agent_id = '${first.agentId}' FORMAT TabSeparated`
  const analyst = { authorization: `Basic ${Buffer.from(`analyst:${analystPassword}`).toString('base64')}` }
  /**
   * A request of the probe, sent again when its connection fails ("fetch failed": a kept-alive
   * socket closed as it was reused, a connection refused while the machine is saturated). Both are
   * safe to repeat: the count is a read, and a probe event sent twice only makes the count grow.
   * Refusals (a status) are answers and are not retried. `connectionRetries` counts the repeats.
   */
  let connectionRetries = 0
  const probeFetch = async (url: string, init: RequestInit): Promise<Response> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fetch(url, init)
      } catch (err) {
        if (attempt >= 3) throw err
        connectionRetries++
        console.error(`(d) probe: ${whyFailed(err)}; sending it again`)
        await new Promise((resolve) => setTimeout(resolve, 50 * attempt))
      }
    }
  }
  const storedCount = async () => {
    const res = await probeFetch(`http://127.0.0.1:${analyticsPort}/`, { method: 'POST', headers: analyst, body: countSql })
    if (!res.ok) throw new Error(`the probe's query failed: ${res.status} ${await res.text()}`)
    return Number((await res.text()).trim())
  }
  const visibility: number[] = []
  let probing = false
  /** Why the probe stopped early (its event refused, never visible, a query failing), if it did. */
  let probeFailure: string | null = null
  const PROBE_DEADLINE_MS = 30_000
  const probe = async () => {
    probing = true
    // eslint-disable-next-line no-unmodified-loop-condition -- another task changes it
    while (probing) {
      const before = await storedCount()
      const res = await probeFetch(`${base}/v1/events`, { method: 'POST', headers: prober.headers, body: JSON.stringify({ agentId: 'probe', reasoning: 'visibility probe' }) })
      if (res.status !== 202) throw new Error(`the probe's event was answered ${res.status}: ${await res.text()}`)
      const acked = performance.now()
      while ((await storedCount()) <= before) {
        if (performance.now() - acked > PROBE_DEADLINE_MS) throw new Error(`the probe's event was not visible after ${PROBE_DEADLINE_MS} ms`)
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
      visibility.push(performance.now() - acked)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }

  const results: Partial<Record<'a' | 'b' | 'd' | 'c0' | 'c' | 'ck', Figures>> = {}
  // (ck): every request a new key, as a client that sends one with each request (and the same on its retries).
  let keysSent = 0
  const withNewKey = (request: autocannon.Request) => ({ ...request, headers: { ...request.headers, 'idempotency-key': `${redisPrefix}${keysSent++}` } })
  // What each run sends where; every round uses the same.
  const load = {
    a: { url: `http://127.0.0.1:${barePort}/v1/events`, method: 'POST', headers, body: single, connections, duration },
    b: { url: `${base}/v1/events`, method: 'POST', headers, body: single, connections, duration },
    c0: { url: `http://127.0.0.1:${barePort}/v1/events/batch`, method: 'POST', headers, body: batch, connections: batchConnections, duration },
    c: { url: `${base}/v1/events/batch`, method: 'POST', headers, body: batch, connections: batchConnections, duration },
    ck: { url: `${base}/v1/events/batch`, method: 'POST', headers, body: batch, connections: batchConnections, duration, requests: [{ setupRequest: withNewKey }] },
  } satisfies Record<string, autocannon.Options>

  // Earlier rounds: the ratios only.
  const ratios: { b: number[]; c: number[]; ck: number[] } = { b: [], c: [], ck: [] }
  // The service's CPU per event over the bare server's, per round: the steadier figure on a shared machine.
  const cpuRatios: { b: number[]; c: number[]; cShipped: number[] } = { b: [], c: [], cShipped: [] }
  for (let round = 1; round < rounds; round++) {
    if (runs.has('a') && runs.has('b')) {
      const a = await measure(`(a) round ${round}`, bare, load.a)
      const b = await measure(`(b) round ${round}`, service, load.b)
      ratios.b.push(b.rps / a.rps)
      cpuRatios.b.push(b.cpuUsPerEvent / a.cpuUsPerEvent)
      console.error(`round ${round}: (a) ${a.rps.toFixed(0)} req/s ${a.cpuUsPerEvent.toFixed(1)} µs/event, (b) ${b.rps.toFixed(0)} req/s ${b.cpuUsPerEvent.toFixed(1)} µs/event, p99 ${b.p99} ms`)
    }
    if (runs.has('c0') && runs.has('c')) {
      const c0 = await measure(`(c0) round ${round}`, bare, load.c0, 500)
      const c = await measure(`(c) round ${round}`, service, load.c, 500, undefined, untilShipped)
      ratios.c.push(c.eventsPerSec! / c0.eventsPerSec!)
      cpuRatios.c.push(c.cpuUsPerEvent / c0.cpuUsPerEvent)
      cpuRatios.cShipped.push(c.cpuUntilShippedUsPerEvent! / c0.cpuUsPerEvent)
      console.error(`round ${round}: (c0) ${c0.eventsPerSec!.toFixed(0)} events/s ${c0.cpuUsPerEvent.toFixed(1)} µs/event, (c) ${c.eventsPerSec!.toFixed(0)} events/s ${c.cpuUsPerEvent.toFixed(1)} µs/event (${c.cpuUntilShippedUsPerEvent!.toFixed(1)} until shipped)`)
      if (runs.has('ck')) {
        const ck = await measure(`(ck) round ${round}`, service, load.ck, 500)
        ratios.ck.push(ck.eventsPerSec! / c0.eventsPerSec!)
        console.error(`round ${round}: (ck) ${ck.eventsPerSec!.toFixed(0)} events/s`)
      }
    }
  }

  if (runs.has('a')) results.a = (await measure('(a) bare Fastify 202', bare, load.a))

  // Figures of the measured run only: taken when it starts (after the warm-up), and when it ends.
  let stepsBefore: Record<string, { events: number; totalMs: number }> = {}
  let threadsBefore = new Map<string, ThreadCpu>()
  let pgBefore = 0
  let startFigures: Promise<void> = Promise.resolve()
  let threadsAfter = new Map<string, ThreadCpu>()
  let drainMs = NaN
  let during = await health()
  let pgAfter = 0
  let machineBefore = machineTicks()
  let loadGenBefore = process.cpuUsage()
  let machineBusy = NaN
  let loadGenCpu = NaN
  if (runs.has('b')) {
    results.b = (await measure('(b) POST /v1/events', service, load.b, 1, () => {
      threadsBefore = cpuByThread(service.pid!)
      machineBefore = machineTicks()
      loadGenBefore = process.cpuUsage()
      startFigures = (async () => {
        stepsBefore = (await health()).ingest.steps // also starts a new event-loop delay window
        pgBefore = await pgTransactions()
      })()
    }))
    threadsAfter = cpuByThread(service.pid!)
    machineBusy = busyPercent(machineBefore, machineTicks())
    const loadGen = process.cpuUsage(loadGenBefore)
    loadGenCpu = loadGen.user + loadGen.system
    const loadEnded = performance.now()
    await startFigures
    during = await health()
    pgAfter = await pgTransactions()
    await untilShipped()
    drainMs = performance.now() - loadEnded
    // (d) in a run of its own under the same load: each poll of the probe is a ClickHouse query
    // (milliseconds of the engine's CPU), so polling every 5 ms would take a share of the machine
    // from (b)'s own figures.
    let probeDone: Promise<void> = Promise.resolve()
    results.d = (await measure('(d) (b) again, with the probe', service, load.b, 1, () => {
      probeDone = probe().catch((err) => { probeFailure = whyFailed(err) })
    }))
    probing = false
    await probeDone
    await untilShipped() // what (d)'s load left ships before the next run starts
  }
  const stepsAfter = during.ingest.steps

  if (runs.has('c0')) results.c0 = (await measure(`(c0) bare batch x500, ${batchConnections} conns`, bare, load.c0, 500))
  let batchStepsBefore: Record<string, { events: number; totalMs: number }> = {}
  let batchThreadsBefore = new Map<string, ThreadCpu>()
  let batchThreads = new Map<string, ThreadCpu>()
  let batchThreadsShipped = new Map<string, ThreadCpu>()
  let batchMachineBusy = NaN
  let batchBacklog = NaN
  let batchDrainMs = NaN
  if (runs.has('c')) {
    let machineAtStart = machineTicks()
    // A rate the shipper cannot follow only defers work into the backlog: how much was left when the
    // load stopped, and how long it took to ship (measure waits for it before the next run starts).
    let calls = 0
    const shippedAfterRun = async () => {
      if (calls++ === 0) return untilShipped() // the warm-up's backlog, before the run
      const loadEnded = performance.now()
      batchThreads = cpuByThread(service.pid!)
      batchMachineBusy = busyPercent(machineAtStart, machineTicks())
      batchBacklog = (await health()).ingest.backlogRows
      await untilShipped()
      batchDrainMs = performance.now() - loadEnded
      batchThreadsShipped = cpuByThread(service.pid!)
    }
    results.c = (await measure(`(c) batch x500, ${batchConnections} conns`, service, load.c, 500, () => {
      batchThreadsBefore = cpuByThread(service.pid!)
      machineAtStart = machineTicks()
      void health().then((h) => { batchStepsBefore = h.ingest.steps })
    }, shippedAfterRun))
  }
  if (runs.has('ck')) {
    results.ck = await measure('(ck) (c), a new Idempotency-Key each', service, load.ck, 500)
    await untilShipped()
  }
  const batchStepsAfter = (await health()).ingest.steps
  await db.end()

  console.log(`\ningestion benchmark — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} — node ${process.version} — ${duration}s per run`)
  console.log('run'.padEnd(34) + 'req/s'.padStart(10) + 'p50 ms'.padStart(9) + 'p99 ms'.padStart(9) + 'non-2xx'.padStart(9) + 'errors'.padStart(8) + 'events/s'.padStart(11) + 'CPU µs/event'.padStart(14))
  for (const f of Object.values(results)) {
    console.log(f.name.padEnd(34) + f.rps.toFixed(0).padStart(10) + String(f.p50).padStart(9) + String(f.p99).padStart(9) +
      String(f.non2xx).padStart(9) + String(f.errors).padStart(8) + (f.eventsPerSec ? f.eventsPerSec.toFixed(0) : '').padStart(11) +
      f.cpuUsPerEvent.toFixed(1).padStart(14))
  }
  const { a, b, c0, c } = results
  const vis = [...visibility].sort((x, y) => x - y)
  if (a && b) console.log(`\n(b)/(a) = ${(b.rps / a.rps * 100).toFixed(1)} %  (target ≥ 35 %, aim 50 %; p99 ≤ 25 ms; 0 errors) ${verdict(b.rps / a.rps >= 0.35 && b.p99 <= 25 && b.errors === 0 && b.non2xx === 0)}`)
  if (a && b) console.log(`CPU per event, server process, all threads: (b) ${(b.cpuUsPerEvent / a.cpuUsPerEvent).toFixed(1)} × (a)`)
  if (c0 && c) console.log(`CPU per event, server process, all threads: (c) ${(c.cpuUsPerEvent / c0.cpuUsPerEvent).toFixed(1)} × (c0); until (c)'s backlog was shipped ${(c.cpuUntilShippedUsPerEvent! / c0.cpuUsPerEvent).toFixed(1)} × (${c.cpuUntilShippedUsPerEvent!.toFixed(1)} µs/event)`)
  if (c0 && c) console.log(`(c)/(c0) = ${(c.eventsPerSec! / c0.eventsPerSec! * 100).toFixed(1)} %  (target ≥ 15 %, aim 25 %) ${verdict(c.eventsPerSec! / c0.eventsPerSec! >= 0.15)}`)
  if (c0 && results.ck) console.log(`(ck)/(c0) = ${(results.ck.eventsPerSec! / c0.eventsPerSec! * 100).toFixed(1)} %  (a new Idempotency-Key on every request)`)
  if (c) console.log(`(c) backlog when it stopped: ${batchBacklog} rows (${(batchBacklog / c.eventsPerSec!).toFixed(1)} s of its rate), shipped ${batchDrainMs.toFixed(0)} ms later`)
  if (rounds > 1) {
    if (a && b) ratios.b.push(b.rps / a.rps)
    if (c0 && c) ratios.c.push(c.eventsPerSec! / c0.eventsPerSec!)
    if (a && b) cpuRatios.b.push(b.cpuUsPerEvent / a.cpuUsPerEvent)
    if (c0 && c) cpuRatios.c.push(c.cpuUsPerEvent / c0.cpuUsPerEvent)
    if (c0 && c) cpuRatios.cShipped.push(c.cpuUntilShippedUsPerEvent! / c0.cpuUsPerEvent)
    if (c0 && results.ck) ratios.ck.push(results.ck.eventsPerSec! / c0.eventsPerSec!)
    const show = (xs: number[]) => `${xs.map((x) => (x * 100).toFixed(1)).join(', ')} %; median ${(median(xs) * 100).toFixed(1)} %`
    if (ratios.b.length) console.log(`(b)/(a) over ${ratios.b.length} rounds: ${show(ratios.b)}`)
    if (ratios.c.length) console.log(`(c)/(c0) over ${ratios.c.length} rounds: ${show(ratios.c)}`)
    if (ratios.ck.length) console.log(`(ck)/(c0) over ${ratios.ck.length} rounds: ${show(ratios.ck)}`)
    const times = (xs: number[]) => `${xs.map((x) => x.toFixed(2)).join(', ')} ×; median ${median(xs).toFixed(2)} ×`
    if (cpuRatios.b.length) console.log(`CPU per event (b)/(a) over ${cpuRatios.b.length} rounds: ${times(cpuRatios.b)}  (target ≤ 3 ×)`)
    if (cpuRatios.c.length) console.log(`CPU per event (c)/(c0) over ${cpuRatios.c.length} rounds: ${times(cpuRatios.c)}  (target ≤ 6 ×)`)
    if (cpuRatios.cShipped.length) console.log(`CPU per event (c)/(c0) until (c)'s backlog was shipped, over ${cpuRatios.cShipped.length} rounds: ${times(cpuRatios.cShipped)}  (target ≤ 6 ×)`)
  }
  if (b) {
    if (probeFailure) console.log(`(d) the probe stopped early: ${probeFailure}`)
    if (connectionRetries) console.log(`(d) the probe sent ${connectionRetries} request(s) again after a failed connection`)
    console.log(`(d) visibility under (b)'s load: p50 ${percentile(vis, 50).toFixed(0)} ms, p99 ${percentile(vis, 99).toFixed(0)} ms, max ${vis.at(-1)?.toFixed(0)} ms over ${vis.length} probes  (target p99 ≤ 2000 ms) ${verdict(!probeFailure && percentile(vis, 99) <= 2000)}`)
    console.log(`(e) backlog drained ${drainMs.toFixed(0)} ms after (b) stopped (${during.ingest.backlogRows} rows waiting when it stopped)`)
  }
  console.log('(f) µs per event per step (wall time, waits included; key: per request):   during (b)       during (c)')
  for (const [step, after] of Object.entries(stepsAfter)) {
    const perEvent = (a: { events: number; totalMs: number } | undefined, b: { events: number; totalMs: number } | undefined) => {
      const events = (a?.events ?? 0) - (b?.events ?? 0)
      return (events ? (((a?.totalMs ?? 0) - (b?.totalMs ?? 0)) * 1000) / events : 0).toFixed(1).padStart(10) + ' µs'
    }
    console.log(`    ${step.padEnd(8)} ${(b ? perEvent(after, stepsBefore[step]) : '').padStart(30)} ${(c ? perEvent(batchStepsAfter[step], batchStepsBefore[step]) : '').padStart(16)}`)
  }
  if (b) {
    console.log(`    event-loop delay during (b): p50 ${during.eventLoopDelayMs.p50.toFixed(1)} ms, p99 ${during.eventLoopDelayMs.p99.toFixed(1)} ms, max ${during.eventLoopDelayMs.max.toFixed(1)} ms`)
    const bEvents = b.rps * duration
    console.log(`    CPU µs per event during (b), by thread: ${byThread(threadsBefore, threadsAfter, bEvents)}`)
    console.log(`    machine CPU during (b): ${machineBusy.toFixed(0)} % busy (of ${cpus().length} cores; steal counts as idle) (load generator included), ${(loadGenCpu / bEvents).toFixed(0)} µs of the load generator's CPU per request`)
    console.log(`    Postgres transactions during (b): ${((pgAfter - pgBefore) / duration).toFixed(1)}/s`)
  }
  if (c) {
    console.log(`    CPU µs per event during (c), by thread: ${byThread(batchThreadsBefore, batchThreads, c.eventsPerSec! * duration)}; machine ${batchMachineBusy.toFixed(0)} % busy`)
    console.log(`    CPU µs per event until (c)'s backlog was shipped, by thread: ${byThread(batchThreadsBefore, batchThreadsShipped, c.eventsPerSec! * duration)}`)
  }
} finally {
  // Wait for the servers to exit (the service ships its log and closes its stores) before cleaning up.
  await Promise.all(children.map((child) => child.exitCode !== null
    ? undefined
    : new Promise<void>((resolve) => {
      const force = setTimeout(() => child.kill('SIGKILL'), 30_000)
      child.once('exit', () => { clearTimeout(force); resolve() })
      child.kill('SIGTERM')
    })))
  rmSync(dataDir, { recursive: true, force: true })
  // Leave nothing behind: the service's Redis keys (caches, limits, queues) and the benchmark database.
  await deleteRedisKeys(redisPrefix)
    .then((n) => console.error(`cleaned up: ${n} Redis keys under ${redisPrefix}, the data directory, database ${new URL(databaseUrl).pathname.slice(1)}`))
    .catch((err) => console.error(`could not delete the Redis keys ${redisPrefix}*: ${err.message}`))
  await dropDatabase(databaseUrl).catch((err) => console.error(`could not drop ${databaseUrl}: ${err.message}`))
}

/** An error's message with its causes ("fetch failed" alone does not say which socket did what). */
function whyFailed (err: unknown): string {
  const parts: string[] = []
  for (let e: unknown = err; e !== undefined && parts.length < 4; e = e instanceof Error ? e.cause : undefined) {
    parts.push(e instanceof Error ? `${e.message}${(e as { code?: string }).code ? ` (${(e as { code?: string }).code})` : ''}` : String(e))
  }
  return parts.join(': ')
}
