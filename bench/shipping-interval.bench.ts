/**
 * What the shipping interval costs the embedded ClickHouse engine at a steady event rate:
 * `npm run bench:shipping [-- --rate 5000 --seconds 15 --intervals 200,500,1000]`.
 * For each interval, inserts the ingestion benchmark's events at `rate` events a second, one block per
 * interval (the shipper's statement), into a fresh data directory with the schema and its views, and
 * prints the CPU per event of the whole process (all threads: the inserts, and the merges running
 * meanwhile) split by thread, and the parts left per table. Unlike `bench:inserts` (inserts back to
 * back), this includes the background merges every insert leads to, and the filesystem's cost of
 * creating and deleting each part's files.
 */
import { mkdtempSync, rmSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { openClickHouse, migrateClickHouse } from '../src/storage/clickhouse-client.ts'
import { EventsRepository, eventLine } from '../src/storage/events-repository.ts'
import { buildEventRow, type IncomingEvent } from '../src/domain/event-row.ts'
import { newEventId } from '../src/domain/ids.ts'
import { benchEvent } from './bench-support.ts'

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '5000' },
    seconds: { type: 'string', default: '15' },
    intervals: { type: 'string', default: '200,500,1000' },
  },
})
const rate = Number(values.rate)
const seconds = Number(values.seconds)
const intervals = values.intervals.split(',').map(Number)

// Every 50th event an error, so that the error-cluster view has rows to write.
const event = (i: number): IncomingEvent => i % 50 === 0
  ? { ...benchEvent(i), type: 'error', outcome: 'failed', errorMessage: `timeout after ${i} ms` }
  : benchEvent(i)

function block (rows: number, seq: number): string {
  const now = Date.now()
  const lines: string[] = []
  for (let i = seq; i < seq + rows; i++) {
    lines.push(eventLine(buildEventRow(event(i), { eventId: newEventId(now), userId: `bench-user-${i % 3}`, agentId: `agent-${i % 8}`, receivedAt: now })))
  }
  return lines.join('\n') + '\n'
}

/** CPU time (ms) of this process's threads, summed by thread name (digits at the end dropped). */
function threadCpu (): Map<string, number> {
  const byName = new Map<string, number>()
  for (const tid of readdirSync('/proc/self/task')) {
    let stat: string
    try {
      stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')
    } catch {
      continue // the thread ended
    }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/\d+$/, '')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    // utime and stime, in clock ticks of 10 ms
    byName.set(name, (byName.get(name) ?? 0) + (Number(fields[11]) + Number(fields[12])) * 10)
  }
  return byName
}

async function measure (intervalMs: number): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-telemetry-shipping-'))
  const handle = openClickHouse({ dataDir: dir })
  try {
    await migrateClickHouse(handle.client)
    const events = new EventsRepository(handle.client)
    const inserts = Math.round((seconds * 1000) / intervalMs)
    const rows = Math.round((rate * intervalMs) / 1000)
    const bodies = Array.from({ length: inserts }, (_, i) => block(rows, i * rows))
    const threadsBefore = threadCpu()
    const cpuBefore = process.cpuUsage()
    const started = performance.now()
    for (let i = 0; i < inserts; i++) {
      const wait = started + i * intervalMs - performance.now()
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
      await events.insertBlock(bodies[i]!, `bench-${i}`)
    }
    const cpu = process.cpuUsage(cpuBefore)
    const total = rows * inserts
    const byThread = [...threadCpu()]
      .map(([name, ms]) => [name, ((ms - (threadsBefore.get(name) ?? 0)) * 1000) / total] as const)
      .filter(([, us]) => us >= 1)
      .sort((a, b) => b[1] - a[1])
      .map(([name, us]) => `${name} ${us.toFixed(0)}`)
      .join(', ')
    const rs = await handle.client.query({
      query: "SELECT table, count() AS parts FROM system.parts WHERE active AND database = currentDatabase() AND table != 'schema_migrations' GROUP BY table ORDER BY table",
      format: 'JSONEachRow',
    })
    const parts = (await rs.json<{ table: string; parts: string }>()).map((p) => `${p.table} ${p.parts}`).join(', ')
    return `${String(intervalMs).padStart(8)} ms ${String(rows).padStart(7)} rows ${((cpu.user + cpu.system) / total).toFixed(1).padStart(8)} µs    by thread: ${byThread}; parts left: ${parts}`
  } finally {
    await handle.release()
    rmSync(dir, { recursive: true, force: true })
  }
}

console.log(`ClickHouse CPU per event by shipping interval, embedded engine — ${new Date().toISOString()} — ${rate} events/s for ${seconds} s each`)
console.log('interval'.padStart(11) + 'rows/insert'.padStart(13) + 'CPU µs/event'.padStart(14))
for (const interval of intervals) console.log(await measure(interval))
