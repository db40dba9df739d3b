/**
 * Scores ingestion benchmark: node --import tsx bench/scores.bench.ts [-- --duration 10 --connections 8 --pairs 2]
 * The service runs in its own process; autocannon runs here. In one run, alternated in pairs:
 * (e) POST /v1/events/batch, 500 events a request, and (s) POST /v1/scores/batch, 500 scores a
 * request (numeric, categorical and boolean, on traces and spans, as an evaluator sends them). Prints
 * items a second, latency, the service's CPU per item, and (s)/(e) per pair: scores should go at
 * least as fast per item as batched events.
 */
import autocannon from 'autocannon'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir, cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { loadLocalSigningKey, signLocalToken } from '../src/auth/local-signing-key.ts'
import { withDefaultUser } from '../src/storage/postgres.ts'
import { benchArgs, freePort, serviceArgs, waitForUp } from './bench-support.ts'

const { values } = parseArgs({ args: benchArgs(), options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '8' }, pairs: { type: 'string', default: '2' } } })
const duration = Number(values.duration)
const connections = Number(values.connections)
const pairs = Number(values.pairs)
const root = fileURLToPath(new URL('..', import.meta.url))
const dataDir = mkdtempSync(join(tmpdir(), 'agent-telemetry-scores-bench-'))
const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://localhost:5432/agent_telemetry_bench'
const ITEMS = 500

let service: ChildProcess | undefined

function cpuMicros (pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100
}

const event = (i: number) => ({ agentId: `bench-agent-${i % 8}`, type: 'action', durationMs: 120, model: 'claude-sonnet-4-5', metadata: { sessionId: 'bench-session', traceId: `bench-trace-${i % 50}`, spanId: `s${i}`, tokensBreakdown: { inputBase: 900, output: 120 } } })
const score = (i: number) => {
  const target = { traceId: `bench-trace-${i % 50}`, ...(i % 2 ? { spanId: `s${i}` } : {}), agentId: `bench-agent-${i % 8}` }
  if (i % 3 === 0) return { ...target, name: 'relevance', value: (i % 100) / 100, source: 'llm', comment: 'judged by the bench judge' }
  if (i % 3 === 1) return { ...target, name: 'verdict', label: ['correct', 'partial', 'wrong'][i % 3], source: 'code' }
  return { ...target, name: 'thumbs', boolean: i % 4 === 0, source: 'human' }
}

try {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  service = spawn(process.execPath, serviceArgs(), {
    cwd: root,
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: databaseUrl, ROLES: 'api', REDIS_PREFIX: `bench:${randomBytes(4).toString('hex')}:`, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  await waitForUp(`${base}/health`)
  const db = new pg.Client({ connectionString: withDefaultUser(databaseUrl) })
  await db.connect()
  const subject = `bench-${randomBytes(4).toString('hex')}`
  const token = await signLocalToken(await loadLocalSigningKey(dataDir), subject)
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  await fetch(`${base}/v1/me`, { headers: auth })
  await db.query('UPDATE users SET tier = \'enterprise\', burst_per_minute = 1000000000 WHERE privy_id = $1', [subject])
  await db.end()
  const key = await (await fetch(`${base}/v1/me/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ label: 'bench' }) })).json() as { secret: string }
  // A config per name, as a user who validates scores has: the `configs` step checks every score.
  await fetch(`${base}/v1/me/score-configs/relevance`, { method: 'PUT', headers: auth, body: JSON.stringify({ dataType: 'numeric', min: 0, max: 1 }) })
  await fetch(`${base}/v1/me/score-configs/verdict`, { method: 'PUT', headers: auth, body: JSON.stringify({ dataType: 'categorical', labels: ['correct', 'partial', 'wrong'] }) })

  const runs = [
    { name: `(e) /v1/events/batch x${ITEMS}`, url: `${base}/v1/events/batch`, body: JSON.stringify({ events: Array.from({ length: ITEMS }, (_, i) => event(i)) }) },
    { name: `(s) /v1/scores/batch x${ITEMS}`, url: `${base}/v1/scores/batch`, body: JSON.stringify({ scores: Array.from({ length: ITEMS }, (_, i) => score(i)) }) },
  ]
  const rows: string[] = []
  const ratios: string[] = []
  for (let p = 0; p < pairs; p++) {
    const rates: number[] = []
    for (const run of runs) {
      const opts = { url: run.url, method: 'POST' as const, headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }, body: run.body, connections, duration }
      await autocannon({ ...opts, duration: 2 }) // warm-up
      const cpuBefore = cpuMicros(service.pid!)
      const r = await autocannon(opts)
      const cpu = cpuMicros(service.pid!) - cpuBefore
      const items = r.requests.total * ITEMS
      rates.push(r.requests.average * ITEMS)
      rows.push(`${p + 1} ${run.name}`.padEnd(34) + r.requests.average.toFixed(1).padStart(8) + (r.requests.average * ITEMS).toFixed(0).padStart(12) +
        String(r.latency.p50).padStart(9) + String(r.latency.p99).padStart(9) + String(r.non2xx).padStart(9) + String(r.errors + r.timeouts).padStart(8) +
        (cpu / Math.max(1, items)).toFixed(1).padStart(14) + `  (${(run.body.length / ITEMS).toFixed(0)} B/item)`)
    }
    ratios.push(`pair ${p + 1}: (s)/(e) = ${(rates[1]! / rates[0]! * 100).toFixed(1)} %`)
  }
  console.log(`\nScores ingestion benchmark — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} — node ${process.version} — ${duration}s per run, ${connections} connections`)
  console.log('run'.padEnd(34) + 'req/s'.padStart(8) + 'items/s'.padStart(12) + 'p50 ms'.padStart(9) + 'p99 ms'.padStart(9) + 'non-2xx'.padStart(9) + 'errors'.padStart(8) + 'CPU µs/item'.padStart(14))
  for (const row of rows) console.log(row)
  for (const ratio of ratios) console.log(ratio)
} finally {
  // The data directory goes once the service has stopped writing to it.
  if (service && service.exitCode === null && service.signalCode === null) {
    const exit = once(service, 'exit')
    service.kill('SIGTERM')
    await exit
  }
  rmSync(dataDir, { recursive: true, force: true })
}
