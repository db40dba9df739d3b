import { readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import pg from 'pg'
import { Redis } from 'ioredis'
import { withDefaultUser } from '../src/storage/postgres.ts'
import { buildEventRow, type IncomingEvent } from '../src/domain/event-row.ts'
import { newEventId } from '../src/domain/ids.ts'
import { eventLine } from '../src/storage/events-repository.ts'

/** Node's arguments that load the TypeScript sources, for a benchmark's child process: the tests' own. */
export { TS_LOADER_ARGS } from '../test/helpers/ts-loader.ts'

/**
 * The node arguments `npm start` runs the service with (package.json's start script, e.g. V8's heap
 * flags), so a benchmark measures what operators run: `extra` node flags go before the script, and
 * `script` with its arguments replaces src/main.ts (the bare baseline runs under the same flags).
 */
export function serviceArgs (extra: string[] = [], script?: string[]): string[] {
  const start = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } }).scripts.start
  const words = start.trim().split(/\s+/)
  const args = words.slice(words.indexOf('node') + 1) // without `exec node`
  return [...args.slice(0, -1), ...extra, ...(script ?? args.slice(-1))]
}

/**
 * The script's own arguments, for parseArgs: without the `--` that separates them from node's when
 * the script is run as `node --import ./src/ts-loader.mjs bench/x.bench.ts -- --duration 10` (npm run removes it;
 * parseArgs would take it as the end of the options and refuse the rest as positionals).
 */
export function benchArgs (argv: string[] = process.argv.slice(2)): string[] {
  return argv[0] === '--' ? argv.slice(1) : argv
}

/**
 * A port no process listens on now, chosen by the system. Benchmarks of several people run side by
 * side on one machine: a port drawn from a fixed range can be one another run's server holds (then
 * a probe talks to that server, and fails when it stops: "fetch failed").
 */
export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

/**
 * The benchmarks' database: on the server and with the credentials of DATABASE_URL (default
 * postgres://localhost:5432/…), under the benchmark's own database name, so a run never touches
 * the service's data.
 */
export function benchDatabaseUrl (name: string): string {
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://localhost:5432/agent_telemetry')
  url.pathname = `/${name}`
  return url.toString()
}

/** Drops a benchmark's database (its connections first). */
export async function dropDatabase (databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl)
  const name = url.pathname.slice(1)
  url.pathname = '/postgres'
  const admin = new pg.Client({ connectionString: withDefaultUser(url.toString()) })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name.replace(/"/g, '')}" WITH (FORCE)`)
  } finally {
    await admin.end()
  }
}

/** Deletes every Redis key under a benchmark's prefix (REDIS_URL, default the local Redis). */
export async function deleteRedisKeys (prefix: string): Promise<number> {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 2 })
  let deleted = 0
  try {
    let cursor = '0'
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
      cursor = next
      if (keys.length) deleted += await redis.unlink(...keys)
    } while (cursor !== '0')
  } finally {
    redis.disconnect()
  }
  return deleted
}

/** PASS or FAIL, for a figure against its target. */
export function verdict (ok: boolean): string {
  return ok ? 'PASS' : 'FAIL'
}

/**
 * Resolves once `url` answers below 500 (a server that is up), polling every 100 ms for a minute;
 * `init` sets the request (a route that only takes a POST).
 */
export async function waitForUp (url: string, init?: RequestInit): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(url, init)).status < 500) return
    } catch { /* not up yet */ }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${url} did not come up`)
}

/** Resolves once a service's ingest backlog is empty (GET /health: everything acknowledged is in ClickHouse). */
export async function untilShipped (base: string): Promise<void> {
  while (((await (await fetch(`${base}/health`)).json()) as { ingest: { backlogRows: number } }).ingest.backlogRows > 0) {
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/**
 * The ingestion benchmarks' event i: a `tool` event with model, tokens, session and trace, for one of
 * 8 agents.
 */
export function benchEvent (i: number): IncomingEvent {
  return {
    agentId: `bench-agent-${i % 8}`,
    type: 'tool',
    toolExecuted: 'search',
    outcome: 'success',
    durationMs: 120,
    model: 'claude-sonnet-4-5',
    reasoning: 'looked up the cheapest option before booking',
    metadata: { sessionId: 'bench-session', traceId: 'bench-trace', privacyLevel: 'standard', tokensBreakdown: { inputBase: 1200, cacheCreation: 0, cacheRead: 800, output: 300 } },
  }
}

/**
 * `rows` rows of the bench event as the shipper sends them (JSONCompactEachRow lines), events
 * `first` to `first + rows - 1`: every 50th an error, so that the error-cluster view has rows to write.
 */
export function benchInsertBlock (rows: number, first = 0): string {
  const now = Date.now()
  const lines: string[] = []
  for (let i = first; i < first + rows; i++) {
    const event: IncomingEvent = i % 50 === 0
      ? { ...benchEvent(i), type: 'error', outcome: 'failed', errorMessage: `timeout after ${i} ms` }
      : benchEvent(i)
    lines.push(eventLine(buildEventRow(event, { eventId: newEventId(now), userId: `bench-user-${i % 3}`, agentId: `agent-${i % 8}`, receivedAt: now })))
  }
  return lines.join('\n') + '\n'
}

/** One thread's CPU time so far, in microseconds, and its name as last seen (the main JS thread: 'main JS thread'). */
export interface ThreadCpu { name: string; us: number }

/**
 * CPU time of each thread of a process, by thread id. By id, not by name: the engine's pool threads
 * rename themselves for each task, so a thread's time read under one name before and another after
 * would be counted whole under the second.
 */
export function cpuByThread (pid: number): Map<string, ThreadCpu> {
  const out = new Map<string, ThreadCpu>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      const name = tid === String(pid) ? 'main JS thread' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/[-_:]?\d+$/, '')
      const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ')
      out.set(tid, { name, us: ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100 })
    } catch { /* the thread ended */ }
  }
  return out
}

/** A process's CPU time in microseconds from a cpuByThread reading (the threads alive at the reading). */
export const totalCpu = (threads: Map<string, ThreadCpu>): number => [...threads.values()].reduce((sum, t) => sum + t.us, 0)

/**
 * CPU µs per event by thread name between two cpuByThread readings, largest first (under 1 µs left
 * out): each thread's own time between them, under its name at the second reading.
 */
export function byThread (before: Map<string, ThreadCpu>, after: Map<string, ThreadCpu>, events: number): string {
  const byName = new Map<string, number>()
  for (const [tid, t] of after) byName.set(t.name, (byName.get(t.name) ?? 0) + t.us - (before.get(tid)?.us ?? 0))
  return [...byName]
    .map(([name, us]) => [name, us / Math.max(1, events)] as const)
    .filter(([, us]) => us >= 1)
    .sort((x, y) => y[1] - x[1])
    .map(([name, us]) => `${name} ${us.toFixed(0)}`)
    .join(', ')
}
