/**
 * Dashboard read benchmark: npm run bench:reads [-- --events 1000000,10000000 --requests 100]
 * Seeds one user (npm run seed) into a fresh embedded store in stages (1 M events, then grown to 10 M),
 * lets the engine finish merging what the seed inserted (a history that grew over days is not being
 * merged all at once), starts the service on the store after each stage, and times each /v1/me read (sequential requests
 * after a warm-up): p50 and p95 per endpoint and stage. For the last stage it prints each list read's
 * p95 against the p95 of a point read (one session, one trace) and against its own p95 at the first
 * stage: reads whose cost follows the page shown, not the history, keep both ratios small.
 */
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { benchDatabaseUrl, deleteRedisKeys, dropDatabase, serviceArgs, verdict, waitForUp } from './bench-support.ts'

const { values } = parseArgs({
  options: {
    // Stages: the store is grown to each size in turn and measured there.
    events: { type: 'string', default: '1000000,10000000' },
    requests: { type: 'string', default: '100' },
    // Reuse a store seeded earlier (`DATA_DIR=dir npm run seed -- --user name …`) instead of seeding: one stage.
    'data-dir': { type: 'string' },
    user: { type: 'string' },
  },
})
const root = fileURLToPath(new URL('..', import.meta.url))
const reuse = values['data-dir'] !== undefined
const stages = reuse ? [0] : values.events!.split(',').map(Number)
if (!reuse && stages.some((n, i) => !Number.isInteger(n) || n <= (stages[i - 1] ?? 0))) {
  console.error('usage: npm run bench:reads -- [--events N[,M…] (growing)] [--requests N] [--data-dir DIR --user NAME]')
  process.exit(2)
}
const dataDir = values['data-dir'] ?? mkdtempSync(join(tmpdir(), 'agent-telemetry-reads-'))
const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: benchDatabaseUrl('agent_telemetry_reads_bench'), LOG_LEVEL: 'warn' }
const user = values.user ?? `reads-${randomBytes(4).toString('hex')}`
const requests = Number(values.requests)

/** The reads timed, by name; a point read is one session or one trace. */
const LISTS = ['agents', 'agent profile', 'events', 'events of an agent, 24 h', 'sessions', 'traces, 7 d', 'errors, 30 d', 'spend summary'] as const
const POINTS = ['one session', 'one trace'] as const
type Name = typeof LISTS[number] | typeof POINTS[number]
type Figures = Map<Name, { p50: number; p95: number }>

/** Starts the service on the store, times every read, stops it. */
async function measure (): Promise<{ stored: number; figures: Figures }> {
  const port = 4100 + Math.floor(Math.random() * 200)
  const service = spawn(process.execPath, serviceArgs(), {
    cwd: root, env: { ...env, PORT: String(port), ROLES: 'api', ME_READS_PER_MINUTE: '1000000', REDIS_PREFIX: `bench:${user}:` }, stdio: ['ignore', 'ignore', 'inherit'],
  })
  try {
    const base = `http://127.0.0.1:${port}`
    await waitForUp(`${base}/health`)
    const token = execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/token.ts', user], { cwd: root, env }).toString().trim()
    const headers = { authorization: `Bearer ${token}` }
    const json = async (path: string) => (await fetch(base + path, { headers })).json() as Promise<any>
    const agents = (await json('/v1/me/agents')).agents
    const sessions = (await json('/v1/me/sessions')).sessions
    const traces = (await json('/v1/me/traces?since=all')).traces
    const paths: Record<Name, string> = {
      agents: '/v1/me/agents',
      'agent profile': `/v1/me/agents/${agents[0].id}`,
      events: '/v1/me/events',
      'events of an agent, 24 h': `/v1/me/events?since=24h&agentId=${agents[1].id}`,
      sessions: '/v1/me/sessions',
      'one session': `/v1/me/sessions/${sessions[0].sessionId}`,
      'traces, 7 d': '/v1/me/traces?since=7d',
      'one trace': `/v1/me/traces/${traces[0].traceId}`,
      'errors, 30 d': '/v1/me/errors?since=30d',
      'spend summary': '/v1/me/spend-summary',
    }
    const stored = (await json('/v1/me/spend-summary?days=365')).total.eventCount as number
    const figures: Figures = new Map()
    for (const [name, path] of Object.entries(paths) as [Name, string][]) {
      for (let i = 0; i < 3; i++) await (await fetch(base + path, { headers })).arrayBuffer()
      const times: number[] = []
      for (let i = 0; i < requests; i++) {
        const t0 = performance.now()
        const res = await fetch(base + path, { headers })
        await res.arrayBuffer()
        if (!res.ok) throw new Error(`${path}: ${res.status}`)
        times.push(performance.now() - t0)
      }
      times.sort((a, b) => a - b)
      const q = (p: number) => times[Math.min(times.length - 1, Math.ceil(p * times.length) - 1)]!
      figures.set(name, { p50: q(0.5), p95: q(0.95) })
      console.error(`${path}: p95 ${q(0.95).toFixed(1)} ms`)
    }
    return { stored, figures }
  } finally {
    service.kill('SIGTERM')
    await new Promise((resolve) => service.once('exit', resolve))
  }
}

const results: { stored: number; seedSeconds: number; figures: Figures; load: number }[] = []
try {
  let seeded = 0
  for (const size of stages) {
    const seedStarted = Date.now()
    if (!reuse) {
      execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/seed.ts', '--events', String(size - seeded), '--from', String(seeded), '--user', user, '--settle'], { cwd: root, env, stdio: 'inherit' })
      seeded = size
    }
    const seedSeconds = (Date.now() - seedStarted) / 1000
    const load = loadavg()[0]!
    results.push({ ...(await measure()), seedSeconds, load })
  }
} finally {
  await deleteRedisKeys(`bench:${user}:`).catch((err) => console.error(`could not delete the Redis keys: ${err.message}`))
  // A reused store keeps its database (its users and agents live there); a fresh one leaves nothing.
  if (!reuse) {
    rmSync(dataDir, { recursive: true, force: true })
    await dropDatabase(env.DATABASE_URL).catch((err) => console.error(`could not drop the benchmark database: ${err.message}`))
  }
}

const first = results[0]!
const last = results.at(-1)!
console.log(`\ndashboard reads — ${new Date().toISOString()} — one user, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${requests} requests each after 3 warm-up`)
for (const r of results) {
  console.log(`  ${r.stored.toLocaleString()} events (${reuse ? 'reused store' : `seeded and settled in ${r.seedSeconds.toFixed(0)} s`}), load average ${r.load.toFixed(1)} when measured`)
}
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
