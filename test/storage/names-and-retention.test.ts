import t from 'tap'
import { readFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { createClient, ClickHouseLogLevel } from '@clickhouse/client'
import { buildTestApp, newUser, randomId, sendEvent, shipped, TEST_CLICKHOUSE_URL } from '../helpers/app.ts'
import { ownTestDatabase } from '../helpers/env.ts'
import { applyRetentionTtl, cleanPostgres } from '../../src/storage/retention.ts'
import { MAINTENANCE_QUEUE, NAMES_SCHEDULER_ID, RETENTION_SCHEDULER_ID } from '../../src/jobs/maintenance.queue.ts'
import { TS_LOADER_ARGS } from '../helpers/ts-loader.ts'

const PASSWORD = 'analyst-test-password'
// A Postgres database of its own (ownTestDatabase): this file runs a worker, whose anomaly tick
// would evaluate other files' alerts against this file's ClickHouse (test/helpers/env.ts).
const DATABASE_URL = ownTestDatabase('names')
const app = await buildTestApp(t, { ANALYTICS_PORT: '0', ANALYST_PASSWORD: PASSWORD, DATABASE_URL })
// Analysts read through the service's SQL port on the embedded engine, and straight from a server.
const analyst = TEST_CLICKHOUSE_URL
  ? createClient({ url: TEST_CLICKHOUSE_URL, log: { level: ClickHouseLogLevel.OFF } })
  : createClient({ url: `http://127.0.0.1:${await app.analyticsSql!.listen()}`, username: 'analyst', password: PASSWORD, log: { level: ClickHouseLogLevel.OFF } })
t.teardown(() => analyst.close())

async function rows<T> (query: string, params: Record<string, unknown> = {}): Promise<T[]> {
  const rs = await analyst.query({ query, query_params: params, format: 'JSONEachRow' })
  return rs.json<T>()
}

function example (name: string): string {
  return readFileSync(new URL(`../../clickhouse/examples/${name}.sql`, import.meta.url), 'utf8')
}

/** Polls until check() returns true (generous: the machine may be loaded). */
async function until (check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

const user = await newUser(app)
const handle = randomId('h')
const patched = await app.inject({ method: 'PATCH', url: '/v1/me', headers: user.auth, payload: { handle } })
if (patched.statusCode !== 200) throw new Error(`PATCH /v1/me: ${patched.statusCode} ${patched.body}`)
const key = await user.createKey()
const acks: Record<string, string> = {}
for (const [name, model, duration, failed] of [
  ['planner', 'gpt-4o', 100, false], ['planner', 'gpt-4o', 300, true], ['coder', 'claude-sonnet-4-5', 2000, true], ['coder', 'claude-sonnet-4-5', 1000, false],
] as const) {
  const res = await sendEvent(app, key.secret, {
    agentId: name, type: 'tool', toolExecuted: name === 'planner' ? 'search' : 'shell', model, durationMs: duration,
    ...(failed ? { outcome: 'failed', errorMessage: `${name} failed` } : {}),
    metadata: { tokensBreakdown: { inputBase: 1000, output: 100 } },
  })
  if (res.statusCode !== 202) throw new Error(`POST /v1/events: ${res.statusCode} ${res.body}`)
  acks[name] = res.json().agentId
}
await shipped(app)

t.test('agent names and user handles are copied to ClickHouse, follow renames and deletions, and copying twice changes nothing', async (t) => {
  await app.maintenance.copyNames()
  const names = () => rows<{ display_name: string; deleted: boolean; user_id: string }>(
    'SELECT display_name, deleted, user_id FROM agent_names FINAL WHERE agent_id = {id:String}', { id: acks.planner })
  t.same(await names(), [{ display_name: 'planner', deleted: false, user_id: user.id }])
  t.same(await rows('SELECT handle FROM user_handles FINAL WHERE user_id = {id:String}', { id: user.id }), [{ handle }])

  const renamed = await app.inject({ method: 'PATCH', url: `/v1/me/agents/${acks.planner}`, headers: user.auth, payload: { displayName: 'Trip planner' } })
  t.equal(renamed.statusCode, 200, renamed.body)
  await app.maintenance.copyNames()
  t.same(await names(), [{ display_name: 'Trip planner', deleted: false, user_id: user.id }])

  const deleted = await app.inject({ method: 'DELETE', url: `/v1/me/agents/${acks.planner}`, headers: user.auth })
  t.ok(deleted.statusCode < 300, deleted.body)
  await app.maintenance.copyNames()
  t.same(await names(), [{ display_name: 'Trip planner', deleted: true, user_id: user.id }])

  await app.maintenance.copyNames()
  const [count] = await rows<{ n: string }>('SELECT count() AS n FROM agent_names FINAL WHERE user_id = {u:String}', { u: user.id })
  t.equal(Number(count!.n), 2, 'one row per agent however often it is copied')
})

t.test('the documented example queries run for an analyst, name agents and users, and leave deleted agents out', async (t) => {
  // The planner was deleted by the test before: the dashboard hides it and its events, and so do the examples.
  await app.maintenance.copyNames()
  const spend = await rows<{ agent: string; events: string; tokens: string; usd: number }>(example('spend-by-agent-name-per-day'), { handle, days: 30 })
  t.same(spend.map((r) => [r.agent, r.events, r.tokens]).sort(), [['coder', '2', '2200']])
  t.ok(spend.every((r) => Number(r.usd) > 0), 'priced models have a cost')
  t.same(await rows(example('spend-by-agent-name-per-day'), { handle: handle.toUpperCase(), days: 30 }), spend, 'the handle whatever its case')
  t.same(await rows(example('spend-by-agent-name-per-day'), { handle, days: 1 }), spend, 'days=1 is today alone, as the dashboard counts it')

  const clusters = (await rows<{ tool: string; errors: string; agents: string[]; owner: string; latest_message: string }>(example('error-clusters-by-tool')))
    .filter((r) => r.owner === handle)
  t.same(clusters.map((r) => [r.tool, r.errors, r.agents, r.latest_message]).sort(), [['shell', '1', ['coder'], 'coder failed']])

  // Another user's agent of the same name and model: names are unique per user only.
  const other = await newUser(app)
  const otherHandle = randomId('h')
  t.equal((await app.inject({ method: 'PATCH', url: '/v1/me', headers: other.auth, payload: { handle: otherHandle } })).statusCode, 200)
  const otherKey = await other.createKey()
  t.equal((await sendEvent(app, otherKey.secret, { agentId: 'coder', type: 'tool', model: 'claude-sonnet-4-5', durationMs: 50 })).statusCode, 202)
  await shipped(app)
  await app.maintenance.copyNames()
  const p95 = await rows<{ model: string; agent: string; agent_id: string; p95_ms: number; events: string }>(example('p95-duration-by-model'), { handle })
  t.same(p95.map((r) => [r.agent, r.agent_id]), [['coder', acks.coder]], 'the user\'s agents alone, by id (the deleted planner left out)')
  const theirs = await rows<{ agent: string; events: string }>(example('p95-duration-by-model'), { handle: otherHandle })
  t.same(theirs.map((r) => [r.agent, r.events]), [['coder', '1']], 'the other user\'s coder apart')
  const coder = p95[0]!
  t.equal(coder.model, 'claude-sonnet-4-5')
  t.equal(Number(coder.events), 2)
  t.ok(coder.p95_ms > 1000 && coder.p95_ms <= 2000, `p95 ${coder.p95_ms}`)
})

t.test('RETENTION_DAYS becomes a TTL on events by receive time; rollups keep theirs; setting it again changes nothing', async (t) => {
  const ttl = async (table: string) => (await rows<{ engine_full: string }>(
    'SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = {t:String}', { t: table }))[0]!.engine_full
  t.match(await ttl('events'), /TTL toDateTime\(received_at\) \+ toIntervalDay\(90\)/, 'the default, set at start')
  t.match(await ttl('group_totals'), /TTL toDateTime\(last_received\) \+ toIntervalDay\(90\)/, 'session and trace totals go with their newest event')
  t.notMatch(await ttl('spend_daily'), /TTL/, 'rollups are kept forever by default')

  const days = { events: 30, rollups: 400, alerts: 90, waitlist: 730 }
  t.same((await applyRetentionTtl(app.clickhouse, days)).sort(), ['agent_hourly', 'error_clusters_daily', 'error_clusters_hourly', 'events', 'group_totals', 'spend_daily'])
  t.same(await applyRetentionTtl(app.clickhouse, days), [], 'idempotent')
  t.match(await ttl('spend_daily'), /TTL toDateTime\(day\) \+ toIntervalDay\(400\)/)
  t.match(await ttl('error_clusters_hourly'), /TTL toDateTime\(hour\) \+ toIntervalDay\(400\)/)
  t.match(await ttl('error_clusters_daily'), /TTL toDateTime\(day\) \+ toIntervalDay\(400\)/)
  t.match(await ttl('agent_hourly'), /TTL toDateTime\(hour\) \+ toIntervalDay\(400\)/)
  t.match(await ttl('group_totals'), /TTL toDateTime\(last_received\) \+ toIntervalDay\(30\)/)

  // A row received long ago goes at the next merge; one received now (with an old timestamp) stays.
  const id = randomId('ttl-')
  const base = { user_id: id, agent_id: 'a', type: 'decision', content_hash: '0'.repeat(64), ts: '2020-01-01 00:00:00.000' }
  await app.clickhouse.insert({
    table: 'events',
    values: [{ ...base, event_id: 'old', received_at: '2020-01-01 00:00:00.000' }, { ...base, event_id: 'new', received_at: new Date().toISOString().replace('T', ' ').slice(0, 23) }],
    format: 'JSONEachRow',
  })
  await app.clickhouse.command({ query: 'OPTIMIZE TABLE events PARTITION 202001 FINAL' })
  t.same(await rows('SELECT event_id FROM events WHERE user_id = {u:String} ORDER BY event_id', { u: id }), [{ event_id: 'new' }])

  t.same((await applyRetentionTtl(app.clickhouse, { ...days, events: 90, rollups: 0 })).sort(), ['agent_hourly', 'error_clusters_daily', 'error_clusters_hourly', 'events', 'group_totals', 'spend_daily'])
  t.notMatch(await ttl('spend_daily'), /TTL/, '0 removes the TTL')
})

t.test('old cleared alerts, finished deliveries and waitlist sign-ups are deleted; recent ones and open alerts stay', async (t) => {
  const mk = async (clearedDaysAgo: number | null, rule: string) => {
    const id = randomId('alert-')
    await app.db.query(`INSERT INTO alerts (id, user_id, agent_id, rule, severity, message, cleared_at)
      VALUES ($1, $2, $3, $4, 'warning', 'm', CASE WHEN $5::int IS NULL THEN NULL ELSE now() - make_interval(days => $5::int) END)`,
    [id, user.id, acks.coder, rule, clearedDaysAgo])
    return id
  }
  const old = await mk(200, 'error_rate')
  const recent = await mk(10, 'spend_spike')
  const open = await mk(null, 'silence')
  const oldEmail = `${randomId('old-')}@example.com`
  const newEmail = `${randomId('new-')}@example.com`
  await app.db.query('INSERT INTO waitlist (email, created_at) VALUES ($1, now() - interval \'1000 days\'), ($2, now())', [oldEmail, newEmail])
  const channel = (await app.channels.create(user.id, { kind: 'pagerduty', label: '', url: null, routingKey: 'k', signingSecret: null, events: ['alert.triggered'] }, 20))!
  const delivery = async (finishedDaysAgo: number | null) => {
    const id = randomId('msg_')
    await app.db.query(`INSERT INTO notification_deliveries (id, channel_id, event, event_key, payload, max_attempts, finished_at)
      VALUES ($1, $2, 'alert.triggered', $1, '{}', 8, CASE WHEN $3::int IS NULL THEN NULL ELSE now() - make_interval(days => $3::int) END)`,
    [id, channel.id, finishedDaysAgo])
    return id
  }
  const deliveries = [await delivery(200), await delivery(10), await delivery(null)]
  // Their payloads are not events: no worker of another test file sharing the database may find them.
  t.teardown(() => app.db.query('DELETE FROM notification_deliveries WHERE id = ANY($1)', [deliveries]))

  const first = await cleanPostgres(app.db, { events: 90, rollups: 0, alerts: 90, waitlist: 730 })
  t.ok(first.alerts >= 1 && first.deliveries >= 1 && first.waitlist >= 1, JSON.stringify(first))
  const left = await app.db.query('SELECT id FROM alerts WHERE id = ANY($1) ORDER BY id', [[old, recent, open]])
  t.same(left.rows.map((r) => r.id).sort(), [recent, open].sort())
  const emails = await app.db.query('SELECT email FROM waitlist WHERE email = ANY($1)', [[oldEmail, newEmail]])
  t.same(emails.rows.map((r) => r.email), [newEmail])
  const kept = await app.db.query('SELECT id FROM notification_deliveries WHERE id = ANY($1)', [deliveries])
  t.same(kept.rows.map((r) => r.id).sort(), deliveries.slice(1).sort(), 'recent and unfinished deliveries stay')
  t.same(await cleanPostgres(app.db, { events: 90, rollups: 0, alerts: 90, waitlist: 730 }), { alerts: 0, deliveries: 0, waitlist: 0 }, 'a second run deletes nothing')
})

t.test('in the worker role, schedulers copy names without being asked', async (t) => {
  const worker = await buildTestApp(t, { ROLES: 'api,worker', NAMES_SYNC_EVERY_MS: '1000', DATABASE_URL })
  t.ok(await worker.maintenance.queue.getJobScheduler(NAMES_SCHEDULER_ID))
  t.ok(await worker.maintenance.queue.getJobScheduler(RETENTION_SCHEDULER_ID))
  t.equal(worker.maintenance.queue.name, MAINTENANCE_QUEUE)
  const renamed = await app.inject({ method: 'PATCH', url: `/v1/me/agents/${acks.coder}`, headers: user.auth, payload: { displayName: 'Code writer' } })
  t.equal(renamed.statusCode, 200, renamed.body)
  await until(async () => {
    const r = await rows<{ display_name: string }>('SELECT display_name FROM agent_names FINAL WHERE agent_id = {id:String}', { id: acks.coder })
    return r[0]?.display_name === 'Code writer'
  })
  t.pass('the rename reached ClickHouse through the scheduled job')

  const health = (prefix: string) => spawnSync(process.execPath, [...TS_LOADER_ARGS, new URL('../../src/cli/worker-health.ts', import.meta.url).pathname], {
    env: { PATH: process.env.PATH ?? '', REDIS_PREFIX: prefix }, encoding: 'utf8', timeout: 60_000,
  })
  t.equal(health(worker.redisPrefix).status, 0, 'the worker healthcheck sees the workers')
  t.equal(health(`${randomId('none-')}:`).status, 1, 'and fails where there are none')
})
