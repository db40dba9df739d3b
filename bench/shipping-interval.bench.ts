/**
 * What the shipping interval costs the embedded ClickHouse engine at a steady event rate:
 * `npm run bench:shipping [-- --rate 5000 --seconds 15 --intervals 500,1500,500,1500]`.
 * For each interval, inserts the ingestion benchmark's events at `rate` events a second, one block per
 * interval from one insert's start to the next (as the shipper's interval runs), into a fresh data directory with the schema and its views, and
 * prints the CPU per event of the whole process (all threads: the inserts, and the merges running
 * meanwhile) split by thread, and the parts left per table. Unlike `bench:inserts` (inserts back to
 * back), this includes the background merges every insert leads to, and the filesystem's cost of
 * creating and deleting each part's files.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { openClickHouse, migrateClickHouse } from '../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../src/storage/events-repository.ts'
import { benchInsertBlock, byThread, cpuByThread } from './bench-support.ts'

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

async function measure (intervalMs: number, forSeconds = seconds): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-telemetry-shipping-'))
  const handle = openClickHouse({ dataDir: dir })
  try {
    await migrateClickHouse(handle.client)
    const events = new EventsRepository(handle.client)
    const inserts = Math.round((forSeconds * 1000) / intervalMs)
    const rows = Math.round((rate * intervalMs) / 1000)
    const bodies = Array.from({ length: inserts }, (_, i) => benchInsertBlock(rows, i * rows))
    const threadsBefore = cpuByThread(process.pid)
    const cpuBefore = process.cpuUsage()
    const started = performance.now()
    for (let i = 0; i < inserts; i++) {
      const wait = started + i * intervalMs - performance.now()
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
      await events.insertBlock(bodies[i]!, `bench-${i}`)
    }
    const cpu = process.cpuUsage(cpuBefore)
    const total = rows * inserts
    const threads = byThread(threadsBefore, cpuByThread(process.pid), total)
    const rs = await handle.client.query({
      query: "SELECT table, count() AS parts FROM system.parts WHERE active AND database = currentDatabase() AND table != 'schema_migrations' GROUP BY table ORDER BY table",
      format: 'JSONEachRow',
    })
    const parts = (await rs.json<{ table: string; parts: string }>()).map((p) => `${p.table} ${p.parts}`).join(', ')
    return `${String(intervalMs).padStart(8)} ms ${String(rows).padStart(7)} rows ${((cpu.user + cpu.system) / total).toFixed(1).padStart(8)} µs    by thread: ${threads}; parts left: ${parts}`
  } finally {
    await handle.release()
    rmSync(dir, { recursive: true, force: true })
  }
}

console.log(`ClickHouse CPU per event by shipping interval, embedded engine — ${new Date().toISOString()} — ${rate} events/s for ${seconds} s each`)
// The first engine of a process pays once for what later ones reuse (measured: the first interval
// of a run 30-75 % above the same interval later in it): a short unmeasured run goes first.
await measure(intervals[0]!, Math.min(seconds, 3))
console.log('interval'.padStart(11) + 'rows/insert'.padStart(13) + 'CPU µs/event'.padStart(14))
for (const interval of intervals) console.log(await measure(interval))
