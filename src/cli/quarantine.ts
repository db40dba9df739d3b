/**
 * Prints the rows this instance's ingest log holds in quarantine (rows ClickHouse refused, damaged
 * log entries), one JSON object a line: { position, at, reason, line }. `line` is the row as it would
 * have been inserted (JSONCompactEachRow, columns as in src/storage/events-repository.ts), or for a
 * damaged entry its bytes in base64. Safe to run beside the service.
 *   npm run ingest:quarantine [-- --limit N]
 */
import { existsSync } from 'node:fs'
import { cliArgs, usageError } from './args.ts'
import { loadConfig } from '../config.ts'
import { DiskIngestLog } from '../ingest/log/disk-ingest-log.ts'

const USAGE = 'usage: npm run ingest:quarantine [-- --limit N]'
const { values } = cliArgs({ options: { limit: { type: 'string', default: '1000' } } }, {
  usage: USAGE,
  about: 'Prints the rows this instance\'s ingest log holds in quarantine, one JSON object a line (safe to run beside the service).',
})
const limit = Number(values.limit)
if (!Number.isInteger(limit) || limit < 1) usageError(USAGE, '--limit must be a whole number above 0')
const { ingest } = loadConfig()
if (!existsSync(ingest.logDir)) {
  console.error(`no ingest log at ${ingest.logDir} (set INGEST_LOG_DIR or DATA_DIR)`)
  process.exit(1)
}
for (const row of DiskIngestLog.readQuarantine(ingest.logDir, limit)) console.log(JSON.stringify(row))
