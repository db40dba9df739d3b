/**
 * Run by clickhouse-template.ts in a child process (the embedded engine is one per process):
 *   node --import ./src/ts-loader.mjs test/helpers/build-clickhouse-template.ts DATA_DIR
 * migrates a new embedded store under DATA_DIR/clickhouse and closes it.
 */
import { migrateClickHouse, openClickHouse } from '../../src/storage/clickhouse-client.ts'

const handle = openClickHouse({ dataDir: process.argv[2]! })
await migrateClickHouse(handle.client)
await handle.release()
