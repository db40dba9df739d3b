import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { request } from 'undici'
import { loadLocalSigningKey, signLocalToken } from '../../src/auth/local-signing-key.ts'
import { withDefaultUser } from '../../src/storage/postgres.ts'
import { ownTestDatabase, randomId } from './env.ts'
import { TS_LOADER_ARGS } from './ts-loader.ts'

// The services these files start run the worker role too (the default): a Postgres database apart
// from the other files' (ownTestDatabase), which their anomaly ticks would otherwise evaluate.
const SERVICE_DATABASE_URL = ownTestDatabase('service_processes')

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

interface Teardown { teardown(fn: () => unknown): void }

/**
 * What a test needs to run the service in a process of its own: a data directory (removed when the
 * test process exits), a free port and its URL, and the settings: the test database, a Redis prefix
 * of its own, warnings only, no analysts' port (the default one may be taken on a shared machine).
 * `storeEnv` reaches this file's ClickHouse (TEST_CLICKHOUSE_ENV of app.ts).
 */
export async function serviceSetup (label: string, storeEnv: Record<string, string>): Promise<{ dataDir: string; port: number; base: string; env: Record<string, string | undefined> }> {
  const dataDir = mkdtempSync(join(tmpdir(), `agent-telemetry-${label}-`))
  process.once('exit', () => rmSync(dataDir, { recursive: true, force: true }))
  const port = await freePort()
  const env = {
    ...process.env,
    PORT: String(port),
    DATA_DIR: dataDir,
    DATABASE_URL: SERVICE_DATABASE_URL,
    REDIS_PREFIX: `test:${randomId()}:`,
    LOG_LEVEL: 'warn',
    ANALYTICS_PORT: 'off',
    ...storeEnv,
  }
  return { dataDir, port, base: `http://127.0.0.1:${port}`, env }
}

/** A port nothing listens on now (the service is then started on it). */
export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** The service (`src/main.ts`) in a process of its own with these settings, SIGKILLed at teardown if still running. */
export function startService (t: Teardown, env: Record<string, string | undefined>): ChildProcess {
  const child = spawn(process.execPath, [...TS_LOADER_ARGS, 'src/main.ts'], { cwd: ROOT, env, stdio: ['ignore', 'inherit', 'inherit'] })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  return child
}

/** Resolves once `${base}/health` answers 200; throws if the process exits first or after `ms`. */
export async function waitHealthy (child: ChildProcess, base: string, ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the service at ${base} exited with ${child.exitCode}`)
    try {
      const res = await request(`${base}/health`)
      await res.body.dump()
      if (res.statusCode === 200) return
    } catch { /* not listening yet */ }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`the service at ${base} did not become healthy`)
}

/** Resolves with the exit code and signal of a child process once it exits. */
export function exited (child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
}

/**
 * A user of the service at `base` (signed in with a token of the local key in `dataDir`), on the
 * enterprise tier with a burst that load cannot reach, and an API key of theirs, made through the API.
 */
export async function enterpriseUserOf (base: string, dataDir: string, label: string): Promise<{ userId: string; secret: string }> {
  const subject = randomId(`${label}-`)
  const token = await signLocalToken(await loadLocalSigningKey(dataDir), subject)
  const me = await request(`${base}/v1/me`, { headers: { authorization: `Bearer ${token}` } })
  const userId = ((await me.body.json()) as { id: string }).id
  const db = new pg.Client({ connectionString: withDefaultUser(SERVICE_DATABASE_URL) })
  await db.connect()
  await db.query('UPDATE users SET tier = \'enterprise\', burst_per_minute = 100000000 WHERE privy_id = $1', [subject])
  await db.end()
  const created = await request(`${base}/v1/me/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ label }),
  })
  const { secret } = (await created.body.json()) as { secret: string }
  return { userId, secret }
}
