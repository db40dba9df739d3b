/**
 * Applies the Postgres and ClickHouse migrations and exits (docker-compose runs it once before the
 * api and worker containers; they find nothing left to apply). Same locks as the service's start.
 *   node --import ./src/ts-loader.mjs src/cli/migrate.ts
 */
import { loadConfig } from '../config.ts'
import { cliArgs, exitIfDataDirInUse } from './args.ts'
import { openPostgres } from '../storage/postgres.ts'
import { migrateClickHouse, openClickHouse } from '../storage/clickhouse-client.ts'
import { CLICKHOUSE_MIGRATION_LOCK, withPostgresLock } from '../storage/migration-lock.ts'
import { ensureServerDatabase } from '../plugins/clickhouse.ts'

cliArgs({ options: {} }, {
  usage: 'usage: node --import ./src/ts-loader.mjs src/cli/migrate.ts',
  about: 'Applies the Postgres and ClickHouse migrations of the stores the settings name, and exits (the service applies them at start too).',
})
const config = loadConfig()
if (!config.clickhouseUrl) exitIfDataDirInUse(config.dataDir)
const pool = await openPostgres(config.databaseUrl, undefined, (applied) => console.log(JSON.stringify({ postgres: applied })))
if (config.clickhouseUrl) await ensureServerDatabase(config.clickhouseUrl, config.clickhouseCluster)
const handle = openClickHouse({ url: config.clickhouseUrl, dataDir: config.dataDir })
try {
  const applied = await withPostgresLock(pool, CLICKHOUSE_MIGRATION_LOCK, () => migrateClickHouse(handle.client, { cluster: config.clickhouseCluster }))
  console.log(JSON.stringify({ clickhouse: applied }))
} finally {
  await handle.release()
  await pool.end()
}
