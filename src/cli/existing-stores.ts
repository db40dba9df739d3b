import { ConfigError, loadConfig, type Config } from '../config.ts'
import { openExistingPostgres, StoreNotReady, type CountingPool } from '../storage/postgres.ts'

/**
 * The settings and the service's existing Postgres for a command-line tool that changes data: a bad
 * setting exits 2, a database that cannot be used (unreachable, refused, missing, not migrated) exits
 * 1, each as one line on stderr led by the tool's name. Never creates a database or migrates one.
 */
export async function openExistingStores (tool: string): Promise<{ config: Config; pool: CountingPool }> {
  let config: Config
  try {
    config = loadConfig()
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    console.error(`${tool}: ${err.message}`)
    process.exit(2)
  }
  try {
    return { config, pool: await openExistingPostgres(config.databaseUrl) }
  } catch (err) {
    if (!(err instanceof StoreNotReady)) throw err
    console.error(`${tool}: ${err.message}`)
    process.exit(1)
  }
}
