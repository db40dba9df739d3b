import t from 'tap'
import type { ChildProcess } from 'node:child_process'
import { createServer, type Server } from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { createClient } from '@clickhouse/client'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import pg from 'pg'
import { request } from 'undici'
import { TEST_SECRETS_KEY, ownTestDatabase, randomId } from './helpers/env.ts'

// A Postgres database of its own (ownTestDatabase): these instances run workers, whose anomaly ticks
// would evaluate other files' alerts against this file's ClickHouse (test/helpers/env.ts).
const TEST_DATABASE_URL = ownTestDatabase('multi_instance')
import { Queue, type JobType } from 'bullmq'
import { startClickHouseEndpoint } from './helpers/clickhouse-endpoint.ts'
import { freePort, startService, waitHealthy } from './helpers/service-process.ts'
import { withDefaultUser } from '../src/storage/postgres.ts'

/*
 * Three instances of the service, each with the api and worker roles and its own ingest log, on one
 * ClickHouse endpoint (the engine behind ClickHouse's HTTP interface), one Postgres database and one
 * Redis prefix: what a deployment behind a load balancer looks like. A key revoked on one instance
 * and refused by another is tested with two apps in one process (test/cache/caches-across-instances.test.ts),
 * which waits for the message on the bus rather than for a time.
 */

const work = mkdtempSync(join(tmpdir(), 'agent-telemetry-multi-'))
process.once('exit', () => rmSync(work, { recursive: true, force: true }))

const clickhouse = await startClickHouseEndpoint({ dataDir: join(work, 'clickhouse') })
t.teardown(() => clickhouse.close())

// One identity provider for all instances, as in production: a local JWKS.
const ISSUER = 'https://idp.test/'
const AUDIENCE = 'agent-telemetry-multi'
const { publicKey, privateKey } = await generateKeyPair('ES256')
const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] })
const idp: Server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(jwks))
await new Promise<void>((resolve) => idp.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise((resolve) => idp.close(resolve)))
const jwksUrl = `http://127.0.0.1:${(idp.address() as { port: number }).port}/jwks.json`

async function tokenFor (subject: string): Promise<string> {
  return new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setSubject(subject)
    .setIssuer(ISSUER).setAudience(AUDIENCE).setIssuedAt().setExpirationTime('1h').sign(privateKey)
}

const shared = {
  PATH: process.env.PATH ?? '',
  CLICKHOUSE_URL: clickhouse.url,
  SECRETS_KEY: TEST_SECRETS_KEY,
  DATABASE_URL: TEST_DATABASE_URL,
  REDIS_PREFIX: `test:${randomId()}:`,
  AUTH_JWKS_URL: jwksUrl,
  AUTH_ISSUER: ISSUER,
  AUTH_AUDIENCE: AUDIENCE,
  ROLES: 'api,worker',
  ANALYTICS_PORT: 'off',
  LOG_LEVEL: 'warn',
  // Ticks only at start: the alert below must come from the agent checks the three instances enqueue.
  ANOMALY_EVERY_MS: '300000',
  INGEST_SHIP_MIN_INTERVAL_MS: '100',
  METRICS_TOKEN: 'multi-instance-metrics-token',
}

interface Instance { name: string; base: string; env: Record<string, string>; child: ChildProcess }

async function instance (name: string, extra: Record<string, string> = {}): Promise<Instance> {
  const port = await freePort()
  const env = { ...shared, PORT: String(port), DATA_DIR: join(work, name), INGEST_LOG_DIR: join(work, name, 'ingest-log'), ...extra }
  return { name, base: `http://127.0.0.1:${port}`, env, child: launch(env) }
}

function launch (env: Record<string, string>): ChildProcess {
  return startService(t, env)
}

async function call (i: Instance, method: 'GET' | 'POST' | 'DELETE' | 'PUT', path: string, auth: string, body?: unknown) {
  const res = await request(`${i.base}${path}`, {
    method,
    headers: { authorization: `Bearer ${auth}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.body.text()
  return { status: res.statusCode, json: text ? JSON.parse(text) : undefined }
}

async function until<T> (what: () => Promise<T | undefined | false>, ms: number): Promise<T | undefined> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    const found = await what()
    if (found) return found
    await sleep(100)
  }
  return undefined
}

// Started at the same moment: the migrations of all three race under the lock.
const instances = await Promise.all(['a', 'b', 'c'].map((name) => instance(name)))
const [a, b, c] = instances as [Instance, Instance, Instance]

t.test('three instances started at once all migrate and become healthy', async (t) => {
  await Promise.all(instances.map((i) => waitHealthy(i.child, i.base)))
  for (const i of instances) t.equal(i.child.exitCode, null, `${i.name} is running`)
  const ch = createClient({ url: clickhouse.url })
  t.teardown(() => ch.close())
  const rows = await (await ch.query({ query: 'SELECT version, count() AS n FROM schema_migrations GROUP BY version HAVING n > 1', format: 'JSONEachRow' })).json()
  t.same(rows, [], 'each ClickHouse migration recorded once')
})

const subject = randomId('multi-')
const token = await tokenFor(subject)
let secret = ''
let userId = ''
const accepted: string[] = []

t.test('a user made on one instance is known to all; load spreads over the three', async (t) => {
  const me = await call(a, 'GET', '/v1/me', token)
  t.equal(me.status, 200)
  userId = me.json.id
  const db = new pg.Client({ connectionString: withDefaultUser(TEST_DATABASE_URL) })
  await db.connect()
  await db.query('UPDATE users SET tier = \'enterprise\', burst_per_minute = 100000000 WHERE privy_id = $1', [subject])
  await db.end()
  const key = await call(b, 'POST', '/v1/me/keys', token, { label: 'multi' })
  t.equal(key.status, 201)
  secret = key.json.secret
  for (const i of instances) t.equal((await call(i, 'GET', '/v1/me', token)).json.id, userId, `${i.name} sees the same user`)

  const perInstance = new Map<string, number>()
  await Promise.all(Array.from({ length: 90 }, async (_, n) => {
    const i = instances[n % 3]!
    const res = await call(i, 'POST', '/v1/events', secret, { agentId: 'multi-agent', reasoning: `event ${n}`, metadata: { sessionId: `s${n % 5}` } })
    if (res.status === 202) {
      accepted.push(res.json.eventId)
      perInstance.set(i.name, (perInstance.get(i.name) ?? 0) + 1)
    }
  }))
  t.equal(accepted.length, 90, 'every event acknowledged')
  t.same(Object.fromEntries(perInstance), { a: 30, b: 30, c: 30 }, 'each instance acknowledged its share')
  // Each instance counts what its own ingest log took: the acknowledgements above were its own.
  for (const i of instances) {
    const res = await request(`${i.base}/metrics`, { headers: { authorization: `Bearer ${shared.METRICS_TOKEN}` } })
    const text = await res.body.text()
    t.equal(res.statusCode, 200)
    t.match(text, /^agent_telemetry_events_accepted_total 30$/m, `${i.name}'s ingest log took its 30 events`)
  }
})

t.test('an instance SIGKILLed with acknowledged events in its log ships them after a restart', async (t) => {
  // c stops shipping for a while, takes events, and dies before shipping them.
  const gone = new Promise((resolve) => c.child.once('exit', resolve))
  c.child.kill('SIGTERM')
  await gone
  // The longest pause after an insert: at most the first of the events below ships before the kill.
  c.env = { ...c.env, INGEST_SHIP_MIN_INTERVAL_MS: '60000' }
  c.child = launch(c.env)
  await waitHealthy(c.child, c.base)
  const held: string[] = []
  for (let n = 0; n < 30; n++) {
    const res = await call(c, 'POST', '/v1/events', secret, { agentId: 'multi-agent', reasoning: `held ${n}` })
    if (res.status === 202) held.push(res.json.eventId)
  }
  t.equal(held.length, 30, 'c acknowledged every event')
  const killed = new Promise<string | null>((resolve) => c.child.once('exit', (_code, signal) => resolve(signal)))
  c.child.kill('SIGKILL')
  t.equal(await killed, 'SIGKILL')
  accepted.push(...held)
  const ch = createClient({ url: clickhouse.url })
  t.teardown(() => ch.close())
  const storedBefore = await (await ch.query({ query: 'SELECT count() AS n FROM events WHERE event_id IN {ids:Array(String)}', query_params: { ids: held }, format: 'JSONEachRow' })).json<{ n: string }>()
  t.ok(Number(storedBefore[0]!.n) < held.length, `${storedBefore[0]!.n} of ${held.length} shipped before the kill: the rest only in c's log`)

  c.env = { ...c.env, INGEST_SHIP_MIN_INTERVAL_MS: '100' }
  c.child = launch(c.env)
  await waitHealthy(c.child, c.base)
  const shipped = await until(async () => {
    const res = await request(`${c.base}/health`)
    const backlog = ((await res.body.json()) as { ingest: { backlogRows: number } }).ingest.backlogRows
    return backlog === 0
  }, 60_000)
  t.ok(shipped, 'the restarted instance shipped its backlog')
})

t.test('every acknowledged event is stored exactly once and readable from every instance', async (t) => {
  const ch = createClient({ url: clickhouse.url })
  t.teardown(() => ch.close())
  const [row] = await (await ch.query({
    query: 'SELECT count() AS rows, uniqExact(event_id) AS ids, countIf(event_id IN {ids:Array(String)}) AS acked FROM events WHERE user_id = {u:String}',
    query_params: { u: userId, ids: accepted },
    format: 'JSONEachRow',
  })).json<{ rows: string; ids: string; acked: string }>()
  t.equal(Number(row!.acked), accepted.length, `all ${accepted.length} acknowledged events stored`)
  t.equal(Number(row!.rows), Number(row!.ids), 'none stored twice')
  t.equal(Number(row!.rows), accepted.length, 'nothing stored that was not acknowledged')

  const expected = [...accepted].sort()
  for (const i of instances) {
    const seen = await until(async () => {
      const res = await call(i, 'GET', '/v1/me/events?limit=1000', token)
      const ids = (res.json.events as { eventId: string }[]).map((e) => e.eventId).sort()
      return ids.length === expected.length ? ids : false
    }, 10_000)
    t.same(seen, expected, `${i.name} reads all ${expected.length} events`)
  }
})

t.test('the burst limit holds across instances', async (t) => {
  const limited = randomId('multi-burst-')
  const limitedToken = await tokenFor(limited)
  t.equal((await call(b, 'GET', '/v1/me', limitedToken)).status, 200)
  const db = new pg.Client({ connectionString: withDefaultUser(TEST_DATABASE_URL) })
  await db.connect()
  await db.query('UPDATE users SET tier = \'enterprise\', burst_per_minute = 30 WHERE privy_id = $1', [limited])
  await db.end()
  const key = await call(c, 'POST', '/v1/me/keys', limitedToken, { label: 'burst' })
  const started = Date.now()
  const statuses = await Promise.all(Array.from({ length: 120 }, async (_, n) =>
    (await call(instances[n % 3]!, 'POST', '/v1/events', key.json.secret, { agentId: 'burst-agent' })).status))
  const elapsed = Date.now() - started
  const ok = statuses.filter((s) => s === 202).length
  // 30 a minute is one token every 2 s beyond the burst of 30.
  const allowed = 30 + Math.floor(elapsed / 2000)
  t.ok(ok <= allowed, `${ok} accepted of 120 in ${elapsed} ms across three instances, at most ${allowed} allowed`)
  t.ok(ok >= 10, `most of the burst is usable (${ok})`)
  t.same([...new Set(statuses.filter((s) => s !== 202))], [429], 'the rest are refused with 429')
})

t.test('an alert fires once, not once per instance', async (t) => {
  const owner = randomId('multi-alert-')
  const ownerToken = await tokenFor(owner)
  t.equal((await call(a, 'GET', '/v1/me', ownerToken)).status, 200)
  const key = await call(a, 'POST', '/v1/me/keys', ownerToken, { label: 'alerts' })
  // Failures reach all three instances at once: each schedules a check of the agent.
  await Promise.all(Array.from({ length: 24 }, (_, n) => call(instances[n % 3]!, 'POST', '/v1/events', key.json.secret, {
    agentId: 'failing-agent', outcome: 'failed', toolExecuted: 'http', errorMessage: 'upstream 503',
  })))
  const alerts = await until(async () => {
    const res = await call(b, 'GET', '/v1/me/alerts', ownerToken)
    return res.json.alerts?.length > 0 ? res.json.alerts : false
  }, 20_000)
  t.ok(alerts, 'an alert was raised')
  // Every instance scheduled a check of the agent before answering its events (delayed 1 s): once no
  // check of this owner's agents is waiting, delayed or running, every check that was scheduled has run.
  const ownerId = (await call(a, 'GET', '/v1/me', ownerToken)).json.id
  const queue = new Queue('anomaly', { connection: { host: '127.0.0.1', port: 6379 }, prefix: `${shared.REDIS_PREFIX}bull` })
  t.teardown(() => queue.close())
  const checks = async (states: JobType[]) => (await queue.getJobs(states)).filter((j) => j?.name === 'agent' && j.data.userId === ownerId)
  t.ok(await until(async () => (await checks(['waiting', 'prioritized', 'delayed', 'active'])).length === 0, 20_000), 'no check left to run')
  t.equal((await checks(['completed', 'failed'])).length, 1, 'one check of the agent ran, for the three instances')
  const after = (await call(c, 'GET', '/v1/me/alerts', ownerToken)).json.alerts as { rule: string; triggerCount: number }[]
  t.equal(after.length, 1, 'one alert')
  t.match(after[0], { rule: 'error_rate', triggerCount: 1 }, 'raised by one evaluation')
})
