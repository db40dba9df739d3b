import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openClickHouse, readMigrations, schemaMigrationsDdl } from './src/storage/clickhouse-client.ts'
const h = openClickHouse({ dataDir: mkdtempSync(join(tmpdir(), 'mig-')) })
const c = h.client
let t0 = performance.now()
await c.command({ query: 'SELECT 1' })
console.log('open', (performance.now() - t0).toFixed(0))
await c.command({ query: schemaMigrationsDdl() })
for (const m of readMigrations()) {
  t0 = performance.now()
  for (const s of m.statements) {
    const t1 = performance.now()
    await c.command({ query: s })
    const d = performance.now() - t1
    if (d > 50) console.log('   ', d.toFixed(0), s.slice(0, 80).replace(/\s+/g, ' '))
  }
  console.log(m.name, (performance.now() - t0).toFixed(0), 'ms', m.statements.length)
}
