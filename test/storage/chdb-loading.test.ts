import t from 'tap'
import { execFileSync } from 'node:child_process'
import { TS_LOADER_ARGS } from '../helpers/ts-loader.ts'

// Runs in a fresh process: whether chdb is loaded is process-wide.
const probe = (embedded: boolean) => `
  const { openClickHouse } = await import(${JSON.stringify(new URL('../../src/storage/clickhouse-client.ts', import.meta.url).href)})
  await import(${JSON.stringify(new URL('../../src/app.ts', import.meta.url).href)})
  const { mkdtempSync } = await import('node:fs')
  const dataDir = mkdtempSync((await import('node:os')).tmpdir() + '/chdb-loading-')
  const handle = openClickHouse(${embedded} ? { dataDir } : { url: 'http://127.0.0.1:1', dataDir })
  const loaded = Object.keys((await import('node:module')).default._cache).some((k) => k.includes('/node_modules/chdb/'))
  await handle.release()
  console.log(JSON.stringify({ loaded }))
`

t.test('with CLICKHOUSE_URL the embedded engine (chdb) is never loaded; without it, it is', async (t) => {
  for (const embedded of [false, true]) {
    const out = execFileSync(process.execPath, [...TS_LOADER_ARGS, '--input-type=module', '-e', probe(embedded)], { encoding: 'utf8', timeout: 120_000 })
    t.same(JSON.parse(out.trim().split('\n').pop()!), { loaded: embedded }, embedded ? 'embedded' : 'server')
  }
})
