/**
 * Dashboard read benchmark: npm run bench:reads [-- --events 10000000 --requests 30]
 * Seeds one user with N events (npm run seed) into a fresh embedded store, starts the service on it,
 * then times each /v1/me read (sequential requests after a warm-up) and prints p50 and p95 per endpoint.
 */
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { benchDatabaseUrl, deleteRedisKeys, dropDatabase, serviceArgs, waitForUp } from './bench-support.ts'

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '1000000' },
    requests: { type: 'string', default: '30' },
    // Reuse a store seeded earlier (`DATA_DIR=dir npm run seed -- --user name …`) instead of seeding.
    'data-dir': { type: 'string' },
    user: { type: 'string' },
  },
})
const root = fileURLToPath(new URL('..', import.meta.url))
const reuse = values['data-dir'] !== undefined
const dataDir = values['data-dir'] ?? mkdtempSync(join(tmpdir(), 'agent-telemetry-reads-'))
const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: benchDatabaseUrl('agent_telemetry_reads_bench'), LOG_LEVEL: 'warn' }
const user = values.user ?? `reads-${randomBytes(4).toString('hex')}`
const requests = Number(values.requests)

const seedStarted = Date.now()
if (!reuse) execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/seed.ts', '--events', values.events!, '--user', user], { cwd: root, env, stdio: 'inherit' })
const seedSeconds = (Date.now() - seedStarted) / 1000
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
  const paths = [
    '/v1/me/agents',
    `/v1/me/agents/${agents[0].id}`,
    '/v1/me/events',
    `/v1/me/events?since=24h&agentId=${agents[1].id}`,
    '/v1/me/sessions',
    `/v1/me/sessions/${sessions[0].sessionId}`,
    '/v1/me/traces?since=7d',
    `/v1/me/traces/${traces[0].traceId}`,
    '/v1/me/errors?since=30d',
    '/v1/me/spend-summary',
  ]
  const stored = (await json('/v1/me/spend-summary?days=365')).total.eventCount as number
  console.log(`\ndashboard reads — ${new Date().toISOString()} — ${stored.toLocaleString()} events for one user (${reuse ? 'reused store' : `seeded in ${seedSeconds.toFixed(0)} s`}) — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`)
  console.log('endpoint'.padEnd(60) + 'p50 ms'.padStart(9) + 'p95 ms'.padStart(9))
  for (const path of paths) {
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
    console.error(`${path}: ${requests} requests…`)
    console.log(path.replace(/c[a-z0-9]{24}/, ':id').replace(/seed-[st]-\d+/, ':id').padEnd(60) + q(0.5).toFixed(1).padStart(9) + q(0.95).toFixed(1).padStart(9))
  }
} finally {
  service.kill('SIGTERM')
  await new Promise((resolve) => service.once('exit', resolve))
  await deleteRedisKeys(`bench:${user}:`).catch((err) => console.error(`could not delete the Redis keys: ${err.message}`))
  // A reused store keeps its database (its users and agents live there); a fresh one leaves nothing.
  if (!reuse) {
    rmSync(dataDir, { recursive: true, force: true })
    await dropDatabase(env.DATABASE_URL).catch((err) => console.error(`could not drop the benchmark database: ${err.message}`))
  }
}
