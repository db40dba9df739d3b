import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'

// What every test file may need and nothing that starts a store: a test of Postgres or Redis alone
// imports this, not app.ts (whose import loads the app and, in server mode, starts a ClickHouse endpoint).

/** Tests share one Postgres database whose name ends in _test; each test makes its own users. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://localhost:5432/agent_telemetry_test'

/**
 * A test database of a file's own (`agent_telemetry_<name>_test` beside TEST_DATABASE_URL; the app
 * makes and migrates it at start), for a file whose ticks or alerts must not meet other files': an
 * anomaly tick evaluates every user's recently seen agents against its own file's ClickHouse, which
 * holds none of the other files' events, and would find their alerts not firing.
 */
export function ownTestDatabase (name: string): string {
  const url = new URL(TEST_DATABASE_URL)
  url.pathname = `/agent_telemetry_${name}_test`
  return url.toString()
}

/** The embedded engine is one per process, so each test file (a process) gets one fresh data dir. */
export const TEST_DATA_DIR = mkdtempSync(join(tmpdir(), 'agent-telemetry-test-'))
process.once('exit', () => rmSync(TEST_DATA_DIR, { recursive: true, force: true }))

/**
 * The key that encrypts notification secrets in every test instance (base64 of the 32 bytes
 * `agent-telemetry-tests-only-key!!`): instances sharing the test database open each other's
 * channels, and server mode (CLICKHOUSE_URL) requires one.
 */
export const TEST_SECRETS_KEY = 'YWdlbnQtdGVsZW1ldHJ5LXRlc3RzLW9ubHkta2V5ISE='

/**
 * A unique name: the prefix and 12 hex characters, the last always a letter. Markers go into text the
 * client redacts, and hex of digits alone (1 in 280) followed by `-${i}` would read as a card number.
 */
export function randomId (prefix = ''): string {
  const bytes = randomBytes(6)
  return prefix + bytes.toString('hex').slice(0, 11) + 'abcdef'.charAt(bytes.readUInt8(5) % 6)
}
