/**
 * Serves ClickHouse's HTTP interface over the embedded engine, writes allowed, until SIGTERM/SIGINT:
 * a stand-in for a ClickHouse server in development and tests (`npm run test:server`), not a server
 * for production (docs/clickhouse-serve.md says what it cannot show).
 *   npm run clickhouse:serve -- [--port 8123] [--host 127.0.0.1] [--data-dir ./data] [--log-level warn] [--exit-with-parent]
 * Prints one line, `clickhouse-serve listening on http://HOST:PORT`, once it accepts queries.
 */
import type { AddressInfo } from 'node:net'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import pino from 'pino'
import { AnalyticsEngine } from '../analytics-sql/engine.ts'
import { createAnalyticsHttpServer } from '../analytics-sql/http-interface.ts'
import { prettyStream } from '../log-format.ts'
import { checkDataDirFree } from '../startup-failure.ts'
import { makeDirs } from '../data-dir.ts'

const USAGE = `usage: npm run clickhouse:serve -- [--port 8123] [--host 127.0.0.1] [--data-dir ./data] [--log-level warn] [--exit-with-parent]

Serves ClickHouse's HTTP interface (queries, inserts, /ping) over the embedded engine, with writes
allowed and no authentication, until SIGTERM or SIGINT. The engine's files are kept under
DATA-DIR/clickhouse, where the service keeps its embedded store. --port 0 picks a free port. Once it
accepts queries it prints one line: "clickhouse-serve listening on http://HOST:PORT".
--exit-with-parent stops it when the process that started it is gone, however that ended.

A development and test tool (npm run test:server uses it), not a server for production: it has one
process's concurrency, no users, quotas, sessions, async inserts or replication. See
docs/clickhouse-serve.md.`

/** Largest body: the service's insert blocks, with room to spare. */
const MAX_BODY_BYTES = 512 * 1024 * 1024

function parse () {
  try {
    return parseArgs({
      options: {
        port: { type: 'string', default: '8123' },
        host: { type: 'string', default: '127.0.0.1' },
        'data-dir': { type: 'string', default: './data' },
        'log-level': { type: 'string', default: 'warn' },
        'exit-with-parent': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values
  } catch (err) {
    console.error(`${(err as Error).message}\n${USAGE}`)
    process.exit(2)
  }
}

const args = parse()
if (args.help) {
  console.log(USAGE)
  process.exit(0)
}
const port = Number(args.port)
if (!Number.isInteger(port) || port < 0 || port > 65535 || !pino.levels.values[args['log-level']]) {
  console.error(USAGE)
  process.exit(2)
}

const log = pino({ level: args['log-level'] }, prettyStream(process.stderr))
const dataDir = resolve(args['data-dir'])
try {
  checkDataDirFree(dataDir, 'stop that process (the service, or another clickhouse:serve), or give this one another --data-dir.', '--data-dir')
} catch (err) {
  // One line naming the process that holds the directory, rather than the engine's lock error.
  console.error(`clickhouse-serve: ${(err as Error).message}`)
  process.exit(1)
}
const path = join(dataDir, 'clickhouse')
makeDirs(path)
const engine = await AnalyticsEngine.open(path, { writable: true })
const server = createAnalyticsHttpServer({ engine, credentials: null, log, maxBodyBytes: MAX_BODY_BYTES, displayName: 'clickhouse-serve' })
// Inserts of large blocks and long statements (OPTIMIZE … FINAL) take longer than a browser request.
server.requestTimeout = 0

await new Promise<void>((resolve, reject) => {
  server.once('error', reject)
  server.listen(port, args.host, () => resolve())
})
const bound = (server.address() as AddressInfo).port
const host = args.host.includes(':') ? `[${args.host}]` : args.host
// The one line a parent process waits for (test/helpers/clickhouse-endpoint.ts parses it).
console.log(`clickhouse-serve listening on http://${host}:${bound}`)

let closing = false
async function shutdown (signal: string): Promise<void> {
  if (closing) return
  closing = true
  log.info({ signal }, 'clickhouse-serve: finishing the queries running, then exiting')
  server.close()
  await engine.close()
  server.closeAllConnections()
  process.exit(0)
}
process.on('SIGTERM', () => void shutdown('SIGTERM'))
process.on('SIGINT', () => void shutdown('SIGINT'))
if (args['exit-with-parent']) {
  // A parent killed by a signal cannot stop its children: once it is gone, this process is
  // re-parented, and stops itself rather than serve nobody for ever (a test run cut short).
  const parent = process.ppid
  setInterval(() => {
    if (process.ppid !== parent) void shutdown('parent exited')
  }, 1000).unref()
}
