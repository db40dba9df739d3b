/**
 * Ingestion benchmark: npm run bench [-- --duration 10]
 * (a) a bare Fastify route (baseline), (b) POST /v1/events with a real key of an enterprise user,
 * 50 connections, (c) POST /v1/events/batch with 500 events a request, 8 connections. Each server runs in its own
 * process; autocannon runs here. Prints req/s, p50/p99, non-2xx and the ratio (b)/(a).
 */
import autocannon from 'autocannon'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { loadLocalSigningKey, signLocalToken } from '../src/storage/local-signing-key.ts'
import { withDefaultUser } from '../src/storage/postgres.ts'

const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' }, 'batch-connections': { type: 'string', default: '8' } } })
const duration = Number(values.duration)
const connections = Number(values.connections)
const batchConnections = Number(values['batch-connections'])
const root = fileURLToPath(new URL('..', import.meta.url))
const dataDir = mkdtempSync(join(tmpdir(), 'agent-telemetry-bench-'))
const databaseUrl = 'postgres://localhost:5432/agent_telemetry_bench'
const children: ChildProcess[] = []

function startProcess(args: string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
  children.push(child)
  return child
}

async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      const res = await fetch(url, { method: url.endsWith('/health') ? 'GET' : 'POST', headers: { 'content-type': 'application/json' }, body: url.endsWith('/health') ? undefined : '{}' })
      if (res.status < 500) return
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${url} did not come up`)
}

interface Figures { name: string; rps: number; p50: number; p99: number; non2xx: number; errors: number; eventsPerSec?: number }

async function measure(name: string, opts: autocannon.Options, eventsPerRequest = 1): Promise<Figures> {
  await autocannon({ ...opts, duration: 2 }) // warm-up: JIT, caches, connection pools
  const r = await autocannon(opts)
  return {
    name,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    eventsPerSec: eventsPerRequest > 1 ? r.requests.average * eventsPerRequest : undefined,
  }
}

const event = (i: number) => ({
  agentId: `bench-agent-${i % 8}`,
  type: 'tool',
  toolExecuted: 'search',
  outcome: 'success',
  durationMs: 120,
  model: 'claude-sonnet-4-5',
  reasoning: 'looked up the cheapest option before booking',
  metadata: { sessionId: 'bench-session', traceId: 'bench-trace', privacyLevel: 'standard', tokensBreakdown: { inputBase: 1200, cacheCreation: 0, cacheRead: 800, output: 300 } },
})

try {
  const barePort = 3900 + Math.floor(Math.random() * 50)
  const servicePort = barePort + 50
  startProcess(['bench/bare-server.ts', String(barePort)])
  startProcess(['src/main.ts'], {
    PORT: String(servicePort), DATA_DIR: dataDir, DATABASE_URL: databaseUrl, ROLES: 'api',
    REDIS_PREFIX: `bench:${randomBytes(4).toString('hex')}:`, LOG_LEVEL: 'warn',
  })
  await waitFor(`http://127.0.0.1:${barePort}/v1/events`)
  await waitFor(`http://127.0.0.1:${servicePort}/health`)

  const subject = `bench-${randomBytes(4).toString('hex')}`
  const token = await signLocalToken(await loadLocalSigningKey(dataDir), subject)
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  await fetch(`http://127.0.0.1:${servicePort}/v1/me`, { headers: auth })
  const db = new pg.Client({ connectionString: withDefaultUser(databaseUrl) })
  await db.connect()
  await db.query(`UPDATE users SET tier = 'enterprise', burst_per_minute = 1000000000 WHERE privy_id = $1`, [subject])
  await db.end()
  const key = await (await fetch(`http://127.0.0.1:${servicePort}/v1/me/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ label: 'bench' }) })).json() as { secret: string }
  const headers = { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }
  const single = JSON.stringify(event(0))
  const batch = JSON.stringify({ events: Array.from({ length: 500 }, (_, i) => event(i)) })

  const results: Figures[] = []
  results.push(await measure('(a) bare Fastify 202', { url: `http://127.0.0.1:${barePort}/v1/events`, method: 'POST', headers, body: single, connections, duration }))
  results.push(await measure('(b) POST /v1/events', { url: `http://127.0.0.1:${servicePort}/v1/events`, method: 'POST', headers, body: single, connections, duration }))
  results.push(await measure(`(c) batch x500, ${batchConnections} conns`, { url: `http://127.0.0.1:${servicePort}/v1/events/batch`, method: 'POST', headers, body: batch, connections: batchConnections, duration }, 500))

  console.log(`\ningestion benchmark — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} — node ${process.version} — ${duration}s per run`)
  console.log('run'.padEnd(34) + 'req/s'.padStart(10) + 'p50 ms'.padStart(9) + 'p99 ms'.padStart(9) + 'non-2xx'.padStart(9) + 'errors'.padStart(8) + 'events/s'.padStart(11))
  for (const f of results) {
    console.log(f.name.padEnd(34) + f.rps.toFixed(0).padStart(10) + String(f.p50).padStart(9) + String(f.p99).padStart(9) +
      String(f.non2xx).padStart(9) + String(f.errors).padStart(8) + (f.eventsPerSec ? f.eventsPerSec.toFixed(0) : '').padStart(11))
  }
  const [a, b, c] = results as [Figures, Figures, Figures]
  console.log(`\n(b)/(a) = ${(b.rps / a.rps * 100).toFixed(1)} %  (target ≥ 70 %, p99 ≤ 25 ms, 0 errors)`)
  console.log(`(c) = ${c.eventsPerSec!.toFixed(0)} events/s  (target ≥ 100,000)`)
} finally {
  for (const child of children) child.kill('SIGTERM')
  await new Promise((r) => setTimeout(r, 1500))
  rmSync(dataDir, { recursive: true, force: true })
}
