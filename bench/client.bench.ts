// The client's cost and throughput. Needs `npm run build` first.
//   node --expose-gc --import tsx bench/client.bench.ts [--runs track,fleet (default track)] [--events 100000]
//     [--duration 10] [--rounds 2] [--procs 4] [--agents 4] [--flush-at N] [--max-in-flight N]
// track: CPU per track() (against JSON.stringify of the same event, the least any hand-written loop
// pays, measured in the same run), the longest stall of the event loop while it sends, and its
// memory when the service stalls; no service.
// fleet: the service in a process of its own, and alternated in each round, (c) POST
// /v1/events/batch with 500 events a request from autocannon on 8 connections (as
// bench/ingest.bench.ts run (c)), and (f) a fleet of agents in `--procs` processes of `--agents`
// clients each, every agent calling track() for single events as fast as its client sends them.
// Both count only what was stored (read back through the analysts' SQL port once shipped), and
// print the CPU per stored event of the service and of the load generator.
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import autocannon from 'autocannon'
import pg from 'pg'
import { AgentTelemetry, type AgentTelemetryOptions, type PrivacyLevel, type TelemetryEvent } from 'agent-telemetry-client'
import { loadLocalSigningKey, signLocalToken } from '../src/auth/local-signing-key.ts'
import { withDefaultUser } from '../src/storage/postgres.ts'
import { benchDatabaseUrl, benchEvent, deleteRedisKeys, dropDatabase, freePort, serviceArgs, TS_LOADER_ARGS, untilShipped as untilServiceShipped, waitForUp } from './bench-support.ts'

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}
const textArg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : String(process.argv[i + 1])
}
const N = arg('events', 100_000)
const gc = (globalThis as { gc?: () => void }).gc

/** A fetch that never answers: the service stalled (no socket, so only the client's memory counts). */
const stalled: typeof fetch = () => new Promise(() => {})

const small = (i: number) => ({
  type: 'tool' as const, toolExecuted: 'web_search', model: 'gpt-4o', durationMs: 812, outcome: 'success' as const,
  reasoning: `looked up the invoice ${i} for the customer and found the total`,
  metadata: { sessionId: 's-1', traceId: 't-1', tokensBreakdown: { inputBase: 1200, output: 230 } },
})
const prompt = 'Summarise the following ticket. '.repeat(300) // ~10 KB of text
const large = (i: number) => ({ ...small(i), input: { prompt: `${prompt} customer bob${i}@example.com`, context: { ticket: i } } })

function timeNs (fn: (i: number) => void, n: number): number {
  for (let i = 0; i < Math.min(n, 2000); i++) fn(i) // warm-up
  const start = process.hrtime.bigint()
  for (let i = 0; i < n; i++) fn(i)
  return Number(process.hrtime.bigint() - start) / n
}

function perTrack (level: PrivacyLevel, make: (i: number) => object, n: number): number {
  const client = new AgentTelemetry({ apiKey: 'vk_bench', baseUrl: 'http://127.0.0.1:9', agentId: 'bench', privacyLevel: level, fetch: stalled, maxQueue: n + 5000, maxQueueBytes: 2 ** 31, flushAt: 500, onError: () => {} })
  return timeNs((i) => client.track(make(i)), n)
}

/** The client's own cost, in this process, against no service. */
/**
 * A local upstream in a worker thread (so its parsing is not on the client's event loop) that
 * answers each batch 207, every event accepted, after `delayMs`; `stats()` tells the requests and how
 * long each event waited (arrival minus its timestamp) since the last call.
 */
async function startUpstream (delayMs: number) {
  const worker = new Worker(`
    const { createServer } = require('node:http')
    const { parentPort } = require('node:worker_threads')
    const server = createServer((req, res) => {
      let body = ''
      req.setEncoding('utf8')
      req.on('data', (c) => { body += c })
      req.on('end', () => {
        const events = JSON.parse(body).events
        const count = events.length
        const now = Date.now()
        requests++
        for (const e of events) waits.push(now - e.timestamp)
        const answer = () => res.writeHead(207, { 'content-type': 'application/json' }).end(JSON.stringify({ results: Array.from({ length: count }, (_, i) => ({ status: 202, eventId: 'evt_' + i })) }))
        if (${delayMs} > 0) setTimeout(answer, ${delayMs})
        else answer()
      })
    })
    let requests = 0
    let waits = []
    parentPort.on('message', () => {
      waits.sort((a, b) => a - b)
      parentPort.postMessage({ requests, events: waits.length, p50: waits[Math.floor(waits.length / 2)] ?? 0, p99: waits[Math.floor(waits.length * 0.99)] ?? 0, max: waits[waits.length - 1] ?? 0 })
      requests = 0
      waits = []
    })
    server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port))
  `, { eval: true })
  const port = await new Promise<number>((resolve) => worker.once('message', resolve))
  const stats = () => new Promise<{ requests: number; events: number; p50: number; p99: number; max: number }>((resolve) => { worker.once('message', resolve); worker.postMessage('stats') })
  return { worker, port, stats }
}

async function trackCost (): Promise<void> {
  if (!gc) console.error('run with node --expose-gc for the memory figures')
  console.log(`# track() cost, ${N} events per row (${process.version}, ${process.arch})`)
  console.log('event          level     ns/track  JSON.stringify ns  ratio')
  for (const [name, make, n] of [['small (~350 B)', small, N], ['large (~10 KB)', large, Math.max(1000, N / 20)]] as const) {
    const baseline = timeNs((i) => JSON.stringify(make(i)), n)
    for (const level of ['full', 'standard', 'minimal'] as const) {
      const ns = perTrack(level, make, n)
      console.log(`${name.padEnd(15)}${level.padEnd(10)}${ns.toFixed(0).padStart(8)}  ${baseline.toFixed(0).padStart(17)}  ${(ns / baseline).toFixed(1).padStart(5)}×`)
    }
  }

  // Sending to a local upstream (in a worker thread, so its parsing is not on this event loop) that
  // answers at once: events/s through the client, and this event loop's delay meanwhile, with the
  // agent tracking 100 events per turn of the loop.
  {
    const upstream = await startUpstream(0)
    const port = upstream.port
    const client = new AgentTelemetry({ apiKey: 'vk_bench', baseUrl: `http://127.0.0.1:${port}`, agentId: 'bench', maxQueue: N + 1, maxQueueBytes: 2 ** 31, onError: () => {} })
    const delay = monitorEventLoopDelay({ resolution: 1 })
    delay.enable()
    const start = performance.now()
    for (let i = 0; i < N; i += 100) {
      for (let j = i; j < Math.min(N, i + 100); j++) client.track(small(j))
      await new Promise((resolve) => setImmediate(resolve))
    }
    await client.flush()
    const ms = performance.now() - start
    delay.disable()
    const stats = upstream.stats
    await stats()
    // The defaults at steady rates, as agents track: requests per second, events per request, and how
    // long an event waited in the client (arrival at the upstream minus its track() time).
    const rates: string[] = []
    for (const rate of [10, 100, 1000, 10_000]) {
      const seconds = 3
      const steady = new AgentTelemetry({ apiKey: 'vk_bench', baseUrl: `http://127.0.0.1:${port}`, agentId: 'bench', onError: () => {} })
      const total = rate * seconds
      const begin = performance.now()
      for (let i = 0; i < total;) {
        // Every event whose time has come, then a sleep until the next one's.
        while (i < total && begin + i * 1000 / rate <= performance.now()) steady.track(small(i++))
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, begin + i * 1000 / rate - performance.now())))
      }
      await steady.flush()
      const r = await stats()
      rates.push(`${String(rate).padStart(6)}/s  ${(r.requests / seconds).toFixed(1).padStart(10)}  ${(r.events / Math.max(1, r.requests)).toFixed(0).padStart(14)}  ${String(r.p50).padStart(7)}  ${String(r.p99).padStart(7)}  ${String(r.max).padStart(7)}`)
    }
    await upstream.worker.terminate()
    console.log('\n# delivery to a local upstream that answers at once (default flushAt/flushIntervalMs), 100 events tracked per turn')
    console.log(`${client.stats().sent} events in ${ms.toFixed(0)} ms: ${(client.stats().sent / ms * 1000).toFixed(0)} events/s; event loop delay p50 ${(delay.percentile(50) / 1e6).toFixed(1)} ms, p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms, max ${(delay.max / 1e6).toFixed(1)} ms`)
    console.log('\n# the defaults (flushAt 100, flushIntervalMs 1000) at steady rates, 3 s each')
    console.log('  tracked  requests/s  events/request  wait p50  wait p99  wait max (ms, track() to arrival)')
    for (const row of rates) console.log(row)
  }

  // One busy client against a service 50 ms away (an upstream in a worker thread that answers after
  // 50 ms, as a remote service's round trip): events/s by maxInFlight, in the same run.
  {
    const RTT_MS = 50
    const upstream = await startUpstream(RTT_MS)
    const port = upstream.port
    const n = Math.min(N, 50_000)
    const rows: string[] = []
    const rates = new Map<number, number[]>()
    for (let round = 0; round < 3; round++) {
      for (const maxInFlight of [1, 2, 4, 8]) {
        const client = new AgentTelemetry({ apiKey: 'vk_bench', baseUrl: `http://127.0.0.1:${port}`, agentId: 'bench', maxInFlight, maxQueue: n + 1, maxQueueBytes: 2 ** 31, onError: () => {} })
        const start = performance.now()
        for (let i = 0; i < n; i++) client.track(small(i))
        await client.flush()
        rates.set(maxInFlight, [...(rates.get(maxInFlight) ?? []), client.stats().sent / (performance.now() - start) * 1000])
      }
    }
    await upstream.worker.terminate()
    const base = median(rates.get(1)!)
    for (const [maxInFlight, xs] of rates) rows.push(`${String(maxInFlight).padStart(11)}  ${median(xs).toFixed(0).padStart(8)}  ${(median(xs) / base).toFixed(2).padStart(5)}×`)
    console.log(`\n# one client, ${n} events tracked at once then flush(), to an upstream answering after ${RTT_MS} ms (median of 3 rounds, alternated)`)
    console.log('maxInFlight  events/s  ratio')
    for (const row of rows) console.log(row)
  }

  // Memory under a stalled service: the queue is bounded, so the heap stops growing at maxQueue.
  console.log('\n# memory with the service stalled (a request that never answers), small events')
  console.log('maxQueue  tracked   queued   dropped(queue_full)  heap growth MB  queued JSON MB  ratio')
  for (const maxQueue of [10_000, 100_000]) {
    const before = heapMb()
    const client = new AgentTelemetry({ apiKey: 'vk_bench', baseUrl: 'http://127.0.0.1:9', agentId: 'bench', fetch: stalled, maxQueue, maxQueueBytes: 2 ** 31, onError: () => {} })
    const tracked = maxQueue * 5
    for (let i = 0; i < tracked; i++) client.track(small(i))
    await new Promise((resolve) => setTimeout(resolve, 50))
    const growth = heapMb() - before
    const s = client.stats()
    const queuedMb = (s.queued + s.inFlight) * JSON.stringify(small(0)).length / 2 ** 20
    console.log(`${String(maxQueue).padStart(8)}  ${String(tracked).padStart(7)}  ${String(s.queued + s.inFlight).padStart(7)}  ${String(s.dropped.queue_full).padStart(19)}  ${growth.toFixed(1).padStart(14)}  ${queuedMb.toFixed(1).padStart(14)}  ${(growth / queuedMb).toFixed(1).padStart(5)}×`)
    await client.shutdown(1)
  }
}

function heapMb (): number {
  gc?.()
  gc?.()
  return process.memoryUsage().heapUsed / 2 ** 20
}

/** What one process of the fleet is told: where to send, as whom, with how many agents, for how long. */
interface FleetChildConfig {
  baseUrl: string
  /** the key of the warm-up (its events are not counted) and of the measured run */
  warmKey: string
  key: string
  agents: number
  /** the first agent's number: agent k tracks as `bench-agent-${k % 8}`, as run (c)'s events do */
  first: number
  warmSeconds: number
  seconds: number
  /** options of every client (flushAt, maxInFlight, ...), over the defaults */
  options: Partial<AgentTelemetryOptions>
}

/** What one process of the fleet reports after its measured run. */
interface FleetChildResult { tracked: number; sent: number; dropped: number; cpuUs: number; trackMs: number; totalMs: number; requests: number }

/** Events each agent keeps queued at most: as fast as its client sends, well under maxQueue, so none is dropped. */
const FLEET_AGENT_QUEUE = 1000

/** The ingestion benchmarks' event, without its agentId (the agent's client sets it). */
function fleetEvent (i: number): TelemetryEvent {
  const { agentId: _agentId, ...rest } = benchEvent(i)
  // The client records its own level (`--privacy`) in metadata.privacyLevel.
  const { privacyLevel: _level, ...metadata } = rest.metadata!
  return { ...rest, metadata } as TelemetryEvent
}

/** One process of the fleet: its agents warm up, it waits for `go`, they track for `seconds`, then shut down. */
async function fleetChild (config: FleetChildConfig): Promise<void> {
  let requests = 0
  const countingFetch: typeof fetch = (input, init) => { requests++; return fetch(input, init) }
  const drive = async (apiKey: string, seconds: number): Promise<FleetChildResult> => {
    const clients = Array.from({ length: config.agents }, (_, a) => new AgentTelemetry({
      apiKey, baseUrl: config.baseUrl, agentId: `bench-agent-${(config.first + a) % 8}`, onError: () => {}, fetch: countingFetch, ...config.options,
    }))
    requests = 0
    const cpuBefore = process.cpuUsage()
    const start = performance.now()
    const end = start + seconds * 1000
    let tracked = 0
    await Promise.all(clients.map(async (client, a) => {
      let i = a
      while (performance.now() < end) {
        for (let queued = client.stats().queued; queued < FLEET_AGENT_QUEUE; queued++) {
          client.track(fleetEvent(i))
          i += config.agents
          tracked++
        }
        await new Promise((resolve) => setTimeout(resolve, 1))
      }
    }))
    const trackMs = performance.now() - start
    await Promise.all(clients.map((client) => client.shutdown(120_000)))
    const cpu = process.cpuUsage(cpuBefore)
    const stats = clients.map((client) => client.stats())
    return {
      tracked,
      sent: stats.reduce((n, s) => n + s.sent, 0),
      dropped: stats.reduce((n, s) => n + Object.values(s.dropped).reduce((x, y) => x + y, 0), 0),
      cpuUs: cpu.user + cpu.system,
      trackMs,
      totalMs: performance.now() - start,
      requests,
    }
  }
  await drive(config.warmKey, config.warmSeconds)
  const go = once(process, 'message')
  process.send!({ ready: true })
  await go
  const result = await drive(config.key, config.seconds)
  process.send!({ result }, () => process.exit(0))
}

/** CPU time (user + system, all threads) a process has used, in microseconds, from /proc. */
function cpuMicros (pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100 // utime, stime in clock ticks (100 Hz)
}

/** The machine's CPU time so far from /proc/stat, in clock ticks: busy and all. */
function machineTicks (): { busy: number; total: number } {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number) as number[]
  const busy = user! + nice! + system! + irq! + softirq!
  return { busy, total: busy + idle! + iowait! + steal! }
}

function median (xs: number[]): number {
  const sorted = [...xs].sort((x, y) => x - y)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** One measured run of either path: events stored, per second of the run, and CPU per stored event. */
interface PathFigures { name: string; stored: number; acked: number; seconds: number; serviceUs: number; loadGenUs: number; busy: number; requests: number; dropped: number }

async function fleetRun (): Promise<void> {
  const duration = arg('duration', 10)
  const rounds = Math.max(1, arg('rounds', 2))
  const procs = Math.max(1, arg('procs', 4))
  const agents = Math.max(1, arg('agents', 4))
  const options: Partial<AgentTelemetryOptions> = {}
  if (process.argv.includes('--flush-at')) options.flushAt = arg('flush-at', 100)
  if (process.argv.includes('--privacy')) options.privacyLevel = textArg('privacy', 'standard') as PrivacyLevel
  if (process.argv.includes('--max-in-flight')) options.maxInFlight = arg('max-in-flight', 1)
  const root = fileURLToPath(new URL('..', import.meta.url))
  const dataDir = mkdtempSync(join(tmpdir(), 'agent-telemetry-client-bench-'))
  const databaseUrl = benchDatabaseUrl('agent_telemetry_client_bench')
  const redisPrefix = `bench:${randomBytes(4).toString('hex')}:`
  const port = await freePort()
  const analyticsPort = await freePort()
  const analystPassword = randomBytes(12).toString('hex')
  const base = `http://127.0.0.1:${port}`
  const children: ChildProcess[] = []
  const service = spawn(process.execPath, serviceArgs(), {
    cwd: root,
    env: {
      ...process.env, PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: databaseUrl, ROLES: 'api', REDIS_PREFIX: redisPrefix, LOG_LEVEL: 'warn',
      ANALYTICS_PORT: String(analyticsPort), ANALYST_PASSWORD: analystPassword,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  try {
    await waitForUp(`${base}/health`)
    const db = new pg.Client({ connectionString: withDefaultUser(databaseUrl) })
    await db.connect()
    const newUser = async () => {
      const subject = `bench-${randomBytes(4).toString('hex')}`
      const token = await signLocalToken(await loadLocalSigningKey(dataDir), subject)
      const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
      const me = await (await fetch(`${base}/v1/me`, { headers: auth })).json() as { id: string }
      if (!/^[\w-]+$/.test(me.id)) throw new Error(`unexpected user id ${JSON.stringify(me.id)}`)
      await db.query('UPDATE users SET tier = \'enterprise\', burst_per_minute = 1000000000 WHERE privy_id = $1', [subject])
      const key = await (await fetch(`${base}/v1/me/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ label: 'bench' }) })).json() as { secret: string }
      return { id: me.id, secret: key.secret }
    }
    const untilShipped = () => untilServiceShipped(base)
    const analyst = { authorization: `Basic ${Buffer.from(`analyst:${analystPassword}`).toString('base64')}` }
    /** Events of a user stored in ClickHouse, read through the analysts' SQL port. */
    const stored = async (userId: string) => {
      const res = await fetch(`http://127.0.0.1:${analyticsPort}/`, { method: 'POST', headers: analyst, body: `SELECT count() FROM events WHERE user_id = '${userId}' FORMAT TabSeparated` })
      if (!res.ok) throw new Error(`the count failed: ${res.status} ${await res.text()}`)
      return Number((await res.text()).trim())
    }
    const warm = await newUser()
    const batch = JSON.stringify({ events: Array.from({ length: 500 }, (_, i) => benchEvent(i)) })

    /** Service CPU, machine ticks and the load generator's CPU from now until the run's events are shipped and counted. */
    const measured = async (name: string, userId: string, load: () => Promise<{ acked: number; loadGenUs: number; requests: number; dropped: number }>): Promise<PathFigures> => {
      await untilShipped() // the warm-up's events are not shipped on the run's time
      const serviceBefore = cpuMicros(service.pid!)
      const machineBefore = machineTicks()
      const start = performance.now()
      const r = await load()
      const seconds = (performance.now() - start) / 1000
      const machineAfter = machineTicks()
      await untilShipped()
      const serviceUs = cpuMicros(service.pid!) - serviceBefore // shipping its events included
      const n = await stored(userId)
      return {
        name, stored: n, acked: r.acked, seconds, serviceUs: serviceUs / Math.max(1, n), loadGenUs: r.loadGenUs / Math.max(1, n),
        busy: (100 * (machineAfter.busy - machineBefore.busy)) / Math.max(1, machineAfter.total - machineBefore.total), requests: r.requests, dropped: r.dropped,
      }
    }

    const batchRun = async (): Promise<PathFigures> => {
      const user = await newUser()
      const opts = (secret: string, seconds: number) => ({ url: `${base}/v1/events/batch`, method: 'POST' as const, headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: batch, connections: 8, duration: seconds })
      console.error('(c) autocannon: 2 s warm-up, then the run')
      await autocannon(opts(warm.secret, 2))
      return measured('(c) autocannon, batches of 500', user.id, async () => {
        const cpuBefore = process.cpuUsage()
        const r = await autocannon(opts(user.secret, duration))
        const cpu = process.cpuUsage(cpuBefore)
        return { acked: r['2xx'] * 500, loadGenUs: cpu.user + cpu.system, requests: r.requests.total, dropped: (r.non2xx + r.errors + r.timeouts) * 500 }
      })
    }

    const fleet = async (): Promise<PathFigures> => {
      const user = await newUser()
      console.error(`(f) fleet: ${procs} processes × ${agents} agents, 2 s warm-up, then the run`)
      const procsUp = Array.from({ length: procs }, (_, p) => {
        const config: FleetChildConfig = { baseUrl: base, warmKey: warm.secret, key: user.secret, agents, first: p * agents, warmSeconds: 2, seconds: duration, options }
        // BENCH_PROFILE=dir writes a CPU profile of each fleet process (node --cpu-prof) into dir.
        const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : []
        const child = spawn(process.execPath, [...profile, ...TS_LOADER_ARGS, fileURLToPath(import.meta.url), '--fleet-child', JSON.stringify(config)], { cwd: root, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
        children.push(child)
        const ready = once(child, 'message')
        const result = new Promise<FleetChildResult>((resolve, reject) => {
          child.on('message', (m: { result?: FleetChildResult }) => { if (m.result) resolve(m.result) })
          child.once('exit', (code) => reject(new Error(`a fleet process exited (${code}) before its result`)))
        })
        result.catch(() => {})
        return { child, ready, result }
      })
      await Promise.all(procsUp.map((p) => p.ready))
      return measured(`(f) fleet ${procs} proc × ${agents} agents, track()`, user.id, async () => {
        for (const p of procsUp) p.child.send('go')
        const results = await Promise.all(procsUp.map((p) => p.result))
        return {
          acked: results.reduce((n, r) => n + r.sent, 0),
          loadGenUs: results.reduce((n, r) => n + r.cpuUs, 0),
          requests: results.reduce((n, r) => n + r.requests, 0),
          dropped: results.reduce((n, r) => n + r.dropped, 0),
        }
      })
    }

    const rows: PathFigures[] = []
    const ratios = { rate: [] as number[], service: [] as number[] }
    for (let round = 1; round <= rounds; round++) {
      // Alternated: (c) first in odd rounds, (f) first in even ones (the machine's speed drifts).
      const c = round % 2 ? await batchRun() : undefined
      const f = await fleet()
      const c2 = c ?? await batchRun()
      rows.push(c2, f)
      ratios.rate.push((f.stored / f.seconds) / (c2.stored / c2.seconds))
      ratios.service.push(f.serviceUs / c2.serviceUs)
      console.error(`round ${round}: (c) ${(c2.stored / c2.seconds).toFixed(0)} events/s, (f) ${(f.stored / f.seconds).toFixed(0)} events/s`)
    }
    await db.end()

    console.log(`\n# a fleet using the client against the batch endpoint — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} — node ${process.version} — ${duration} s per run, ${rounds} rounds`)
    console.log(`(f): ${procs} processes × ${agents} clients, each agent tracking single events while its queue holds < ${FLEET_AGENT_QUEUE}; options ${JSON.stringify(options)}`)
    console.log('run'.padEnd(42) + 'stored'.padStart(9) + 'acked'.padStart(9) + 'dropped'.padStart(8) + 'seconds'.padStart(8) + 'events/s'.padStart(10) + 'ev/req'.padStart(7) +
      'service µs/ev'.padStart(14) + 'loadgen µs/ev'.padStart(14) + 'machine'.padStart(8))
    for (const r of rows) {
      console.log(r.name.padEnd(42) + String(r.stored).padStart(9) + String(r.acked).padStart(9) + String(r.dropped).padStart(8) + r.seconds.toFixed(1).padStart(8) +
        (r.stored / r.seconds).toFixed(0).padStart(10) + (r.acked / Math.max(1, r.requests)).toFixed(0).padStart(7) + r.serviceUs.toFixed(1).padStart(14) + r.loadGenUs.toFixed(1).padStart(14) + `${r.busy.toFixed(0)} %`.padStart(8))
    }
    const show = (xs: number[], unit: string, scale = 1) => `${xs.map((x) => (x * scale).toFixed(scale === 100 ? 1 : 2)).join(', ')}${unit}; median ${(median(xs) * scale).toFixed(scale === 100 ? 1 : 2)}${unit}`
    console.log(`(f)/(c) events stored a second: ${show(ratios.rate, ' %', 100)}`)
    console.log(`(f)/(c) service CPU per stored event: ${show(ratios.service, ' ×')}`)
    const fleetRows = rows.filter((r) => r.name.startsWith('(f)'))
    console.log(`stored = acknowledged in every (f) run: ${fleetRows.every((r) => r.stored === r.acked && r.dropped === 0) ? 'yes' : 'NO'}`)
  } finally {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    if (service.exitCode === null && service.signalCode === null) {
      const exit = once(service, 'exit')
      service.kill('SIGTERM')
      await exit
    }
    rmSync(dataDir, { recursive: true, force: true })
    await deleteRedisKeys(redisPrefix).catch((err) => console.error(`could not delete the Redis keys ${redisPrefix}*: ${err.message}`))
    await dropDatabase(databaseUrl).catch((err) => console.error(`could not drop ${databaseUrl}: ${err.message}`))
  }
}

const child = process.argv.indexOf('--fleet-child')
if (child !== -1) {
  await fleetChild(JSON.parse(process.argv[child + 1]!) as FleetChildConfig)
} else {
  const runs = new Set(textArg('runs', 'track').split(','))
  if (runs.has('track')) await trackCost()
  if (runs.has('fleet')) await fleetRun()
}
