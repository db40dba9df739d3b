/**
 * Live tail benchmark: npm run bench:live [-- --duration 10 --connections 50 --instances 1]
 * The service runs in its own processes (`--instances` of them, on one Postgres database and one
 * Redis prefix, each with its own data directory); autocannon and the stream reader run here.
 * Printed, from one run:
 * (n) POST /v1/events, one event a request, spread over the instances, with no stream open;
 * (l) the same load with the sending user's stream open on the first instance: every event it sends
 * is delivered to it. Delivery latency = the event's arrival on the stream − its 202 here (both seen
 * by this process, so its own delays count on both sides; an event can arrive before its 202 does,
 * counted as 0), p50/p99/max; events missed; and (l)/(n) throughput, what an open stream costs ingestion
 * ((n) runs again after (l), and (l) is compared with the mean of both); (c) CPU per event of the live
 * path's parts, measured in this process.
 */
import autocannon from 'autocannon'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { Redis } from 'ioredis'
import { loadLocalSigningKey, signLocalToken } from '../src/auth/local-signing-key.ts'
import { buildEventRow } from '../src/domain/event-row.ts'
import { eventLine } from '../src/domain/event-line.ts'
import { eventMatches, eventOfLine } from '../src/domain/live-events.ts'
import { parseSearchFilters } from '../src/domain/search-filters.ts'
import { rowBytes } from '../src/ingest/log/entry-codec.ts'
import { LiveHub } from '../src/live/live-hub.ts'
import { withDefaultUser } from '../src/storage/postgres.ts'
import { benchArgs, benchDatabaseUrl, benchEvent, cpuByThread, totalCpu, freePort, deleteRedisKeys, dropDatabase, serviceArgs, verdict, waitForUp } from './bench-support.ts'

const { values } = parseArgs({ args: benchArgs(), options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' }, instances: { type: 'string', default: '1' } } })
const duration = Number(values.duration)
const connections = Number(values.connections)
const instances = Math.max(1, Number(values.instances))
const databaseUrl = benchDatabaseUrl('agent_telemetry_live_bench')
const redisPrefix = `bench:${randomBytes(4).toString('hex')}:`
const work = mkdtempSync(join(tmpdir(), 'agent-telemetry-live-bench-'))
const services: ChildProcess[] = []

const percentile = (sorted: number[], p: number) => sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN

try {
  const bases: string[] = []
  for (let i = 0; i < instances; i++) {
    const port = await freePort()
    // One data directory for the signing key (tokens of one are accepted by all), one per instance for the rest.
    const dataDir = i === 0 ? join(work, 'data') : join(work, `data-${i}`)
    services.push(spawn(process.execPath, serviceArgs(), {
      env: {
        ...process.env, PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: databaseUrl, ROLES: 'api', REDIS_PREFIX: redisPrefix,
        LOG_LEVEL: 'warn', ANALYTICS_PORT: 'off', ME_READS_PER_MINUTE: '100000',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    }))
    bases.push(`http://127.0.0.1:${port}`)
    // The first instance creates the database and the signing key; the others start after it.
    await waitForUp(`${bases[i]}/health`)
  }
  const base = bases[0]!
  const db = new pg.Client({ connectionString: withDefaultUser(databaseUrl) })
  await db.connect()
  const subject = `bench-${randomBytes(4).toString('hex')}`
  const token = await signLocalToken(await loadLocalSigningKey(join(work, 'data')), subject)
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  await fetch(`${base}/v1/me`, { headers: auth })
  await db.query('UPDATE users SET tier = \'enterprise\', burst_per_minute = 1000000000 WHERE privy_id = $1', [subject])
  await db.end()
  const key = await (await fetch(`${base}/v1/me/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ label: 'bench' }) })).json() as { secret: string }
  const headers = { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }
  const body = JSON.stringify(benchEvent(0))

  /** 202s seen here: event id → when. */
  const acked = new Map<string, number>()
  /** Arrivals on the stream: event id → when. */
  const arrived = new Map<string, number>()
  let gaps = 0
  let gapMissed = 0

  /** The load, split over the instances; each 202's event id and time noted when `note`. */
  /** CPU of every service process (all threads), µs. */
  const serviceCpu = () => services.reduce((sum, child) => sum + totalCpu(cpuByThread(child.pid!)), 0)
  const load = async (note: boolean) => {
    const per = Math.max(1, Math.floor(connections / instances))
    const cpuBefore = serviceCpu()
    const results = await Promise.all(bases.map((url) => autocannon({
      url: `${url}/v1/events`, method: 'POST', headers, body, connections: per, duration,
      requests: [{
        onResponse: note
          ? (status: number, text: string) => {
              if (status === 202) acked.set((JSON.parse(text) as { eventId: string }).eventId, performance.now())
            }
          : undefined,
      }],
    })))
    const cpu = serviceCpu() - cpuBefore
    const requests = results.reduce((s, r) => s + r.requests.total, 0)
    return {
      cpuPerRequest: cpu / Math.max(1, requests),
      rps: results.reduce((s, r) => s + r.requests.average, 0),
      non2xx: results.reduce((s, r) => s + r.non2xx, 0),
      errors: results.reduce((s, r) => s + r.errors, 0),
      // The requests' own latency (autocannon's, of the first instance's share): the yardstick of this machine's load.
      p50: results[0]!.latency.p50,
      p99: results[0]!.latency.p99,
    }
  }

  console.error('running (n): the load, no stream open: 2 s warm-up, then', duration, 's…')
  await autocannon({ url: `${base}/v1/events`, method: 'POST', headers, body, connections, duration: 2 })
  const n = await load(false)

  // (l): the user's stream, read here as the dashboard reads it (fetch, parsing each message).
  const stop = new AbortController()
  const res = await fetch(`${base}/v1/me/events/stream`, { headers: auth, signal: stop.signal })
  if (res.status !== 200) throw new Error(`the stream was answered ${res.status}`)
  let ready!: () => void
  const isReady = new Promise<void>((resolve) => { ready = resolve })
  const reading = (async () => {
    const decoder = new TextDecoder()
    let text = ''
    try {
      for await (const chunk of res.body!) {
        const now = performance.now()
        text += decoder.decode(chunk as Uint8Array, { stream: true })
        let end: number
        while ((end = text.indexOf('\n\n')) !== -1) {
          const block = text.slice(0, end)
          text = text.slice(end + 2)
          if (block === ': ready') ready()
          else if (block.startsWith('event: gap')) {
            gaps++
            gapMissed += Number((JSON.parse(block.slice(block.indexOf('data: ') + 6)) as { missed: number | null }).missed ?? 0)
          } else if (block.startsWith('id: ')) {
            const data = block.slice(block.indexOf('\ndata: ') + 7)
            // The event id is the first member of each event: no need to parse the whole event.
            const at = data.indexOf('"eventId":"') + 11
            arrived.set(data.slice(at, data.indexOf('"', at)), now)
          }
        }
      }
    } catch { /* aborted at the end */ }
  })()
  await isReady
  console.error('running (l): the same load with the stream open: 2 s warm-up, then', duration, 's…')
  await autocannon({ url: `${base}/v1/events`, method: 'POST', headers, body, connections, duration: 2 })
  acked.clear()
  arrived.clear()
  const loopDelay = async () => ((await (await fetch(`${base}/health`)).json()) as { eventLoopDelayMs: { p50: number; p99: number; max: number } }).eventLoopDelayMs
  await loopDelay() // starts a new window
  const l = await load(true)
  const delay = await loopDelay()
  // The last events' arrivals.
  await new Promise((resolve) => setTimeout(resolve, 500))
  stop.abort()
  await reading
  // (n) again, so that (l) is compared with the load on both sides of it (the machine drifts).
  console.error('running (n) again, the stream closed…')
  const n2 = await load(false)

  // (c) CPU of the live path per event, in this process (CPU time, which the machine's load does not
  // inflate as it does wall times): publishing a one-event request for a watched user (the ingest
  // side), and decoding, filtering and serialising it for a stream (the reader's side).
  const cpuOf = (fn: () => void, times: number) => {
    const before = process.cpuUsage()
    for (let i = 0; i < times; i++) fn()
    const used = process.cpuUsage(before)
    return (used.user + used.system) / times
  }
  const line = eventLine(buildEventRow(benchEvent(0), { eventId: 'evt_bench', userId: 'u', agentId: 'cbench', receivedAt: Date.now() }))
  const filters = (parseSearchFilters({ type: 'tool', q: 'search' }) as { ok: true; filters: Parameters<typeof eventMatches>[1] }).filters
  const readerUs = cpuOf(() => { const e = eventOfLine(line); if (eventMatches(e, filters)) JSON.stringify(e) }, 20_000)
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { enableAutoPipelining: true })
  const subscriber = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  const hub = new LiveHub(redis, subscriber, `${redisPrefix}cpu:`, { replayBatches: 100, replayMs: 60_000, handshakeMs: 1000 }, console as never)
  await hub.start()
  // 'u' watched as another instance would announce it; nothing here listens to its channel.
  await redis.publish(`${redisPrefix}cpu:live:ctl`, 'w u')
  while (!hub.isWatched('u')) await new Promise((resolve) => setImmediate(resolve))
  const rows = rowBytes([line])
  /** CPU per request of publishing `perTurn` requests acknowledged in the same turn (one log commit). */
  const publishing = async (perTurn: number) => {
    const turns = Math.ceil(5_000 / perTurn)
    const cpuBefore = process.cpuUsage()
    for (let i = 0; i < turns; i++) {
      for (let j = 0; j < perTurn; j++) hub.acknowledged('u', rows)
      await null // the turn ends: its requests go out
    }
    await redis.ping() // every publish sent and answered
    const used = process.cpuUsage(cpuBefore)
    return (used.user + used.system) / (turns * perTurn)
  }
  const publishUs = await publishing(1)
  const publish10Us = await publishing(10)
  const unwatchedUs = cpuOf(() => hub.acknowledged('nobody', rows), 100_000)
  hub.close()
  subscriber.disconnect()
  await redis.quit()

  const latencies: number[] = []
  let missing = 0
  for (const [id, at] of acked) {
    const got = arrived.get(id)
    if (got === undefined) missing++
    else latencies.push(Math.max(0, got - at))
  }
  latencies.sort((x, y) => x - y)
  const p99 = percentile(latencies, 99)
  console.log(`\nlive tail benchmark — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} — node ${process.version} — ${duration}s per run, ${connections} connections, ${instances} instance(s)`)
  for (const [name, r] of [['(n) no stream:   ', n], ['(l) stream open: ', l], ['(n) again:       ', n2]] as const) {
    console.log(`${name} ${r.rps.toFixed(0)} req/s, request p50 ${r.p50} ms, p99 ${r.p99} ms, non-2xx ${r.non2xx}, errors ${r.errors}, service CPU ${r.cpuPerRequest.toFixed(0)} µs/request`)
  }
  console.log(`(l)/(n) = ${(l.rps / ((n.rps + n2.rps) / 2) * 100).toFixed(1)} % throughput, ${(l.cpuPerRequest / ((n.cpuPerRequest + n2.cpuPerRequest) / 2) * 100).toFixed(1)} % service CPU per request (of the mean of the two (n) runs)`)
  console.log(`delivery, 202 → arrival on a stream held on the first instance, over ${latencies.length} events: p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${latencies.at(-1)?.toFixed(1)} ms  (target p99 ≤ 50 ms) ${verdict(p99 <= 50 && missing === 0)}`)
  console.log(`delivery p99 / (l)'s request p99 = ${(p99 / l.p99).toFixed(2)} (the same machine's load under both)`)
  console.log(`not delivered: ${missing} of ${acked.size}; gaps told: ${gaps} (${gapMissed} events); the first instance's event-loop delay during (l): p50 ${delay.p50.toFixed(1)} ms, p99 ${delay.p99.toFixed(1)} ms, max ${delay.max.toFixed(1)} ms`)
  console.log(`(c) CPU per event of the live path, in this process: publishing for a watched user ${publishUs.toFixed(1)} µs alone in its turn, ${publish10Us.toFixed(1)} µs when 10 are acknowledged together (the calls and their answers; Redis' own work is in Redis), for a user nobody watches ${unwatchedUs.toFixed(2)} µs; a stream's decoding, filter and serialising ${readerUs.toFixed(1)} µs`)
} finally {
  await Promise.all(services.map((child) => new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve()
    const force = setTimeout(() => child.kill('SIGKILL'), 30_000)
    child.once('exit', () => { clearTimeout(force); resolve() })
    child.kill('SIGTERM')
  })))
  rmSync(work, { recursive: true, force: true })
  await deleteRedisKeys(redisPrefix).catch((err) => console.error(`could not delete the Redis keys ${redisPrefix}*: ${err.message}`))
  await dropDatabase(databaseUrl).catch((err) => console.error(`could not drop ${databaseUrl}: ${err.message}`))
}
