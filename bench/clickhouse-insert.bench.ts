/**
 * What an insert costs the embedded ClickHouse engine: `npm run bench:inserts [-- --inserts 20]`.
 * Inserts blocks of the ingestion benchmark's event (the shipper's statement: deduplication token,
 * JSONCompactEachRow) into a fresh data directory, with the rollup views and without them, at several
 * block sizes, and prints the wall time and this process's CPU time (all threads, the engine's
 * included) per insert and per row. From them: the fixed cost of an insert and the cost of a row,
 * which set how often the shipper should insert (INGEST_SHIP_MIN_INTERVAL_MS).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { openClickHouse, migrateClickHouse } from '../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../src/storage/events-repository.ts'
import { benchInsertBlock as block } from './bench-support.ts'

const { values } = parseArgs({ options: { inserts: { type: 'string', default: '20' } } })
const inserts = Number(values.inserts)
const sizes = [1, 100, 800, 4000]

async function measure (views: boolean): Promise<{ rows: number; wallMs: number; cpuMs: number }[]> {
  const dir = mkdtempSync(join(tmpdir(), 'agent-telemetry-inserts-'))
  const handle = openClickHouse({ dataDir: dir })
  try {
    await migrateClickHouse(handle.client)
    if (!views) {
      for (const view of ['spend_daily_mv', 'error_clusters_hourly_mv']) await handle.client.command({ query: `DROP VIEW ${view}` })
    }
    const events = new EventsRepository(handle.client)
    const out = []
    let token = 0
    for (const rows of sizes) {
      const bodies = Array.from({ length: inserts }, () => block(rows))
      await events.insertBlock(block(rows), `warm-${token++}`)
      const cpu = process.cpuUsage()
      const started = performance.now()
      for (const body of bodies) await events.insertBlock(body, `bench-${token++}`)
      const used = process.cpuUsage(cpu)
      out.push({ rows, wallMs: (performance.now() - started) / inserts, cpuMs: (used.user + used.system) / 1000 / inserts })
    }
    return out
  } finally {
    await handle.release()
    rmSync(dir, { recursive: true, force: true })
  }
}

console.log(`ClickHouse insert cost, embedded engine — ${new Date().toISOString()} — ${inserts} inserts per block size`)
console.log('views'.padEnd(8) + 'rows/insert'.padStart(12) + 'wall ms/insert'.padStart(16) + 'CPU ms/insert'.padStart(15) + 'CPU µs/row'.padStart(12))
for (const views of [true, false]) {
  const figures = await measure(views)
  for (const f of figures) {
    console.log((views ? 'with' : 'without').padEnd(8) + String(f.rows).padStart(12) + f.wallMs.toFixed(1).padStart(16) + f.cpuMs.toFixed(1).padStart(15) + ((f.cpuMs * 1000) / f.rows).toFixed(1).padStart(12))
  }
  // A line through the smallest and the largest block: CPU = fixed + rows × per row.
  const small = figures[0]!
  const large = figures[figures.length - 1]!
  const perRow = (large.cpuMs - small.cpuMs) / (large.rows - small.rows)
  console.log(`  ${views ? 'with' : 'without'} the rollup views: about ${(small.cpuMs - perRow * small.rows).toFixed(1)} ms of CPU per insert whatever its size, plus ${(perRow * 1000).toFixed(1)} µs per row`)
}
