import { rmSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { loadConfig, type Config } from '../../src/config.ts'
import { loadLocalSigningKey, signLocalToken } from '../../src/auth/local-signing-key.ts'
import type { Tier } from '../../src/storage/users-repository.ts'
import { openClickHouse, type ClickHouseHandle } from '../../src/storage/clickhouse-client.ts'
import { startClickHouseEndpoint } from './clickhouse-endpoint.ts'
import { seedClickHouseStore } from './clickhouse-template.ts'
import { randomId, TEST_DATA_DIR, TEST_DATABASE_URL, TEST_SECRETS_KEY } from './env.ts'

export { randomId, TEST_DATA_DIR, TEST_DATABASE_URL, TEST_SECRETS_KEY }

/** A ClickHouse endpoint over a copy of the migrated template store (clickhouse-template.ts). */
async function startSeededEndpoint (): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), 'clickhouse-serve-'))
  seedClickHouseStore(dataDir)
  const endpoint = await startClickHouseEndpoint({ dataDir })
  // After the endpoint's own exit handler (which kills it); retries: the child may still be writing as it dies.
  process.once('exit', () => {
    try {
      rmSync(dataDir, { recursive: true, force: true, maxRetries: 5 })
    } catch {
      // A temporary directory left behind is no reason to fail a test run.
    }
  })
  return endpoint.url
}

/**
 * `npm run test:server` sets TEST_CLICKHOUSE=server: each test file (a process) that imports this
 * module then gets its own ClickHouse endpoint (`npm run clickhouse:serve` in a child process), over
 * a copy of the migrated template store, and talks to it as to a ClickHouse server, through
 * CLICKHOUSE_URL. Undefined: the embedded engine under TEST_DATA_DIR, which testConfig() seeds with
 * the template when nothing opened it before. A test that needs no ClickHouse imports env.ts instead.
 */
export const TEST_CLICKHOUSE_URL = process.env.TEST_CLICKHOUSE === 'server' ? await startSeededEndpoint() : undefined

/** The environment a child process of the service needs to reach the same ClickHouse as this test, and the tests' secrets key. */
export const TEST_CLICKHOUSE_ENV: Record<string, string> = {
  ...(TEST_CLICKHOUSE_URL ? { CLICKHOUSE_URL: TEST_CLICKHOUSE_URL } : {}),
  // Always the tests' key: a child with a key of its own would encrypt the shared database's
  // plaintext rows (left there by the legacy-row test) under a key no other test has.
  SECRETS_KEY: TEST_SECRETS_KEY,
}

/** This test file's ClickHouse, opened directly (the server endpoint, or the embedded engine). */
export function openTestClickHouse (): ClickHouseHandle {
  return openClickHouse({ url: TEST_CLICKHOUSE_URL, dataDir: TEST_DATA_DIR })
}

/**
 * This test file's ClickHouse with no table in it, for the tests of the migrations themselves: in
 * server mode the endpoint serves a copy of the migrated template, whose views and tables this drops.
 */
export async function openEmptyTestClickHouse (): Promise<ClickHouseHandle> {
  const handle = openTestClickHouse()
  const rs = await handle.client.query({
    query: "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY engine = 'MaterializedView' DESC",
    format: 'JSONEachRow',
  })
  for (const { name } of await rs.json<{ name: string }>()) await handle.client.command({ query: `DROP TABLE \`${name}\`` })
  return handle
}

/** Settings for a test instance; refuses any database that is not a test database. */
export function testConfig (overrides: Record<string, string> = {}): Config {
  const env: Record<string, string | undefined> = {
    DATABASE_URL: TEST_DATABASE_URL,
    REDIS_PREFIX: `test:${randomId()}:`,
    DATA_DIR: TEST_DATA_DIR,
    SECRETS_KEY: TEST_SECRETS_KEY,
    ...TEST_CLICKHOUSE_ENV,
    // Each app instance owns its ingest log, as each service instance does.
    INGEST_LOG_DIR: join(TEST_DATA_DIR, `ingest-log-${randomId()}`),
    LOG_LEVEL: 'silent',
    // Test apps run no BullMQ worker unless a test asks for one (ROLES: 'api,worker').
    ROLES: 'api',
    // No test reaches PagerDuty, not even with a delivery another test left behind (port 9: discard).
    PAGERDUTY_EVENTS_URL: 'http://127.0.0.1:9/v2/enqueue',
    ...overrides,
  }
  const dbName = new URL(env.DATABASE_URL!).pathname.slice(1)
  if (!dbName.endsWith('_test')) throw new Error(`refusing to run tests against ${dbName}: its name must end in _test`)
  // The app finds this file's embedded store migrated, as the template left it, unless something
  // opened it first (a test of the migrations themselves starts from an empty store).
  if (!env.CLICKHOUSE_URL && env.DATA_DIR === TEST_DATA_DIR) seedClickHouseStore(TEST_DATA_DIR)
  return loadConfig(env)
}

interface Teardown { teardown(fn: () => unknown): void }

export async function buildTestApp (t: Teardown, overrides: Record<string, string> = {}): Promise<FastifyInstance> {
  // Imported here, not at the top: a test file that builds no app does not pay for loading it.
  const { buildApp } = await import('../../src/app.ts')
  const app = await buildApp(testConfig(overrides), { logger: false })
  t.teardown(() => app.close())
  await app.ready()
  return app
}

export interface TestUser {
  subject: string
  token: string
  id: string
  auth: { authorization: string }
  /** Creates an API key through the API and returns its secret and id. */
  createKey(label?: string, agentId?: string): Promise<{ id: string; secret: string }>
}

/** A fresh user with a dashboard token, optionally on a tier or with a burst override. */
export async function newUser (app: FastifyInstance, opts: { tier?: Tier; burst?: number } = {}): Promise<TestUser> {
  const subject = randomId('user-')
  const token = await signLocalToken(await loadLocalSigningKey(TEST_DATA_DIR), subject)
  const auth = { authorization: `Bearer ${token}` }
  const me = await app.inject({ method: 'GET', url: '/v1/me', headers: auth })
  if (me.statusCode !== 200) throw new Error(`GET /v1/me: ${me.statusCode} ${me.body}`)
  if (opts.tier || opts.burst) await app.users.setTier(subject, opts.tier ?? 'free', opts.burst ?? null)
  return {
    subject,
    token,
    id: me.json().id,
    auth,
    async createKey (label = 'test', agentId?: string) {
      const res = await app.inject({ method: 'POST', url: '/v1/me/keys', headers: auth, payload: agentId ? { label, agentId } : { label } })
      if (res.statusCode !== 201) throw new Error(`POST /v1/me/keys: ${res.statusCode} ${res.body}`)
      return { id: res.json().id, secret: res.json().secret }
    },
  }
}

/** POSTs one event with a key. */
export function sendEvent (app: FastifyInstance, secret: string, payload: unknown) {
  return app.inject({
    method: 'POST',
    url: '/v1/events',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    payload: JSON.stringify(payload),
  })
}

/** POSTs a batch of events with a key. */
export function sendBatch (app: FastifyInstance, secret: string, events: unknown[]) {
  return app.inject({
    method: 'POST',
    url: '/v1/events/batch',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ events }),
  })
}

/** POSTs a batch of events with a key and returns its results; throws unless every event was accepted (207, each 202). */
export async function acceptedBatch (app: FastifyInstance, secret: string, events: unknown[]): Promise<{ status: number; eventId: string; agentId: string }[]> {
  const res = await sendBatch(app, secret, events)
  const results = res.json().results as { status: number; eventId: string; agentId: string }[] | undefined
  if (res.statusCode !== 207 || results?.some((r) => r.status !== 202)) throw new Error(`batch: ${res.statusCode} ${res.body.slice(0, 300)}`)
  return results!
}

/** Waits until everything the app acknowledged is in ClickHouse (the shipper runs behind the 202). */
export async function shipped (app: FastifyInstance, timeoutMs = 10_000): Promise<void> {
  if (!(await app.shipper.drain(timeoutMs))) throw new Error(`the ingest log was not shipped within ${timeoutMs} ms`)
}
