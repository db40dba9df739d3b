import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { TS_LOADER_ARGS } from './ts-loader.ts'

/**
 * A migrated ClickHouse store, built once and copied into each test file's data directory: migrating
 * a new store costs a test file seconds, copying one a few milliseconds. The engine's files hold
 * no absolute path (its tables are relative links into store/), so a copy opens as the original does,
 * embedded or behind `clickhouse:serve`.
 *
 * The template is kept in the system's temporary directory under a hash of what makes it: the
 * migration files, the code that applies them and the engine's version. A changed migration makes a
 * new hash, so a new template. Two test files that find none at once both build one in a directory of
 * their own and rename it into place: the first rename wins, the other copy is dropped.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

function templateKey (): string {
  const hash = createHash('sha256')
  const migrations = join(ROOT, 'clickhouse')
  for (const name of readdirSync(migrations).filter((f) => f.endsWith('.sql')).sort()) {
    hash.update(name).update('\0').update(readFileSync(join(migrations, name))).update('\0')
  }
  for (const file of ['src/storage/clickhouse-client.ts', 'src/storage/cluster-ddl.ts', 'test/helpers/build-clickhouse-template.ts']) {
    hash.update(file).update('\0').update(readFileSync(join(ROOT, file))).update('\0')
  }
  const chdb = createRequire(import.meta.url).resolve('chdb/package.json')
  hash.update(JSON.parse(readFileSync(chdb, 'utf8')).version)
  return hash.digest('hex').slice(0, 16)
}

let template: string | undefined

/** The template's DATA_DIR (the store is under its `clickhouse/`), built if missing. */
export function clickHouseTemplate (): string {
  if (template) return template
  const dir = join(tmpdir(), `agent-telemetry-clickhouse-template-${templateKey()}`)
  if (!existsSync(join(dir, 'clickhouse'))) {
    const building = mkdtempSync(`${dir}.building-`)
    try {
      execFileSync(process.execPath, [...TS_LOADER_ARGS, 'test/helpers/build-clickhouse-template.ts', building], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] })
      renameSync(building, dir)
    } catch (err) {
      rmSync(building, { recursive: true, force: true })
      // Another test file renamed its template into place first: that one serves.
      if (!existsSync(join(dir, 'clickhouse'))) throw err
    }
  }
  template = dir
  return dir
}

/**
 * Copies the migrated template store into `dataDir` unless a store is there already; returns whether
 * it did. The links between the engine's directories are copied as they are (relative), never
 * resolved to the template's own files.
 */
export function seedClickHouseStore (dataDir: string): boolean {
  const target = join(dataDir, 'clickhouse')
  if (existsSync(target)) return false
  // cp -a: a tenth of the time fs.cpSync takes over the store's few hundred small files.
  execFileSync('cp', ['-a', join(clickHouseTemplate(), 'clickhouse'), target], { stdio: ['ignore', 'ignore', 'inherit'] })
  return true
}
