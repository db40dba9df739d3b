import t from 'tap'
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const root = fileURLToPath(new URL('../../', import.meta.url))

/**
 * Every module a fresh process loads when it imports `entry` (tsx reports each one it loads). The
 * row thread's module runs its body only in a worker; here its body fails (no parent port) after its
 * imports are loaded, which is all this looks at.
 */
async function modulesLoadedBy (entry: string): Promise<string[]> {
  const script = `
    import { register } from 'tsx/esm/api'
    const loaded = []
    register({ onImport: (url) => loaded.push(url) })
    await import(${JSON.stringify(new URL(entry, `file://${root}`).href)}).catch(() => {})
    console.log(JSON.stringify(loaded))`
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: root })
  return JSON.parse(stdout) as string[]
}

t.test('the row thread does not load the ClickHouse client', async (t) => {
  const loaded = await modulesLoadedBy('src/ingest/row-thread-worker.ts')
  t.ok(loaded.some((url) => url.endsWith('/src/domain/event-line.ts')), 'it builds rows with the row format of the domain')
  t.same(loaded.filter((url) => url.includes('@clickhouse/')), [])
})

t.test('the check sees the ClickHouse client where it is loaded', async (t) => {
  const loaded = await modulesLoadedBy('src/storage/events-repository.ts')
  t.ok(loaded.some((url) => url.includes('/@clickhouse/client/')))
})
