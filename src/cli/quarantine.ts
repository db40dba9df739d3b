/**
 * Prints the rows this instance's ingest log holds in quarantine (rows ClickHouse refused, damaged
 * log entries), one JSON object a line: { position, at, reason, line }. `line` is the row as it would
 * have been inserted (JSONCompactEachRow, columns as in src/storage/events-repository.ts), or for a
 * damaged entry its bytes in base64. Safe to run beside the service.
 *   npm run ingest:quarantine [-- --limit N]
 */
import { existsSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { loadConfig } from '../config.ts'
import { DiskIngestLog } from '../ingest/log/disk-ingest-log.ts'

const { values } = parseArgs({ options: { limit: { type: 'string', default: '1000' } } })
const limit = Number(values.limit)
if (!Number.isInteger(limit) || limit < 1) {
  console.error('usage: npm run ingest:quarantine [-- --limit N]')
  process.exit(2)
}
const { ingest } = loadConfig()
if (!existsSync(ingest.logDir)) {
  console.error(`no ingest log at ${ingest.logDir} (set INGEST_LOG_DIR or DATA_DIR)`)
  process.exit(1)
}
for (const row of DiskIngestLog.readQuarantine(ingest.logDir, limit)) console.log(JSON.stringify(row))
