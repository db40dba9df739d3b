/**
 * Upserts public agents from a registry export: npm run registry:import -- file.json
 * The file is a JSON array of entries (schemas/registry-entry.json), or { "agents": [...] }.
 * Entries are keyed by registryId; invalid entries are reported and skipped, the rest are applied.
 * Cached agent resolutions are then invalidated on every running instance (an snsName may have moved).
 * The database must be one the service created and migrated (exit code 1 otherwise, nothing created);
 * the summary names it (`database`).
 */
import { readFileSync } from 'node:fs'
import { cliArgs, usageError } from './args.ts'
import type { ValidateFunction } from 'ajv'
import { bodyAjv, toDetails } from '../validation.ts'
import { describePostgres } from '../storage/postgres.ts'
import { openExistingStores } from './existing-stores.ts'
import { openCaches } from './caches.ts'
import { RegistryRepository, type RegistryEntry } from '../storage/registry-repository.ts'

const USAGE = 'usage: npm run registry:import -- <file.json>'
const { positionals } = cliArgs({ allowPositionals: true, options: {} }, {
  usage: USAGE,
  about: 'Upserts public agents from a registry export (a JSON array of entries, or { "agents": [...] }) into the service\'s database.',
})
const file = positionals[0]
if (!file) usageError(USAGE, 'name the file')
let entries: unknown
try {
  const parsed = JSON.parse(readFileSync(file, 'utf8'))
  entries = Array.isArray(parsed) ? parsed : parsed?.agents
} catch (err) {
  console.error(`cannot read ${file}: ${(err as Error).message}`)
  process.exit(2)
}
if (!Array.isArray(entries)) {
  console.error(`${file}: expected a JSON array of agents or { "agents": [...] }`)
  process.exit(2)
}
const validate = bodyAjv.getSchema('registry-entry.json') as ValidateFunction
const { config, pool } = await openExistingStores('registry:import')
const repo = new RegistryRepository(pool)
const summary = { database: describePostgres(config.databaseUrl), inserted: 0, updated: 0, failed: [] as { index: number; registryId?: unknown; error: string }[] }
try {
  for (const [index, entry] of entries.entries()) {
    if (!validate(entry)) {
      summary.failed.push({ index, registryId: (entry as { registryId?: unknown })?.registryId, error: JSON.stringify(toDetails(validate.errors)) })
      continue
    }
    try {
      summary[await repo.upsert(entry as RegistryEntry)]++
    } catch (err) {
      const reason = (err as { code?: string }).code === '23505' ? 'snsName already belongs to another agent' : (err as Error).message
      summary.failed.push({ index, registryId: (entry as RegistryEntry).registryId, error: reason })
    }
  }
  if (summary.inserted + summary.updated > 0) {
    const caches = await openCaches(config, pool)
    if (!(await caches.agents.forgetAll())) caches.warnUntold()
    else await caches.warnIfUnheard()
    caches.close()
  }
} finally {
  await pool.end()
}
console.log(JSON.stringify(summary, null, 2))
process.exit(summary.failed.length > 0 ? 1 : 0)
