import t from 'tap'
import { acceptedBatch, buildTestApp, newUser, randomId, sendEvent, shipped, type TestUser } from '../../../helpers/app.ts'
import { ownTestDatabase } from '../../../helpers/env.ts'

const prefix = `test:${randomId()}:`
// A Postgres database of its own (ownTestDatabase): another file's worker, ticking on the shared
// database against its own ClickHouse, would find these alerts not firing and mark them quiet.
const DATABASE_URL = ownTestDatabase('alerts')
const app = await buildTestApp(t, { REDIS_PREFIX: prefix, DATABASE_URL })

async function fixture () {
  const user = await newUser(app, { tier: 'enterprise', burst: 100000 })
  const key = await user.createKey()
  const batch = (events: Record<string, unknown>[]) => acceptedBatch(app, key.secret, events)
  return { user, key, batch }
}
const list = async (user: TestUser, query = '') => (await app.inject({ url: `/v1/me/alerts${query}`, headers: user.auth })).json()
const post = (user: TestUser, url: string) => app.inject({ method: 'POST', url, headers: user.auth })
const failures = (agentId: string, n: number, extra: Record<string, unknown> = {}) =>
  Array.from({ length: n }, () => ({ agentId, outcome: 'failed', toolExecuted: 'http', errorMessage: 'upstream 502', ...extra }))

/** One evaluation of the user's recently seen agents, as the scheduled tick does for every user. */
async function evaluate (user: TestUser, at = Date.now()) {
  await shipped(app)
  await app.activity.flush()
  return app.anomaly.evaluateUser(user.id, at)
}

t.test('an error-rate spike goes from events to one alert; a continuing anomaly updates it', async (t) => {
  const { user, batch } = await fixture()
  const name = randomId('flaky-')
  const [first] = await batch([...failures(name, 12), { agentId: name, outcome: 'success' }, { agentId: name, outcome: 'success' }])
  t.same((await list(user)).alerts, [], 'nothing before the tick')
  await evaluate(user)
  const [alert] = (await list(user)).alerts
  t.match(alert, { agentId: first!.agentId, rule: 'error_rate', severity: 'critical', status: 'active', triggerCount: 1, figures: { failed: 12, total: 14, rate: 0.8571 } })
  t.match(alert.message, /12 of 14 events failed/)
  await batch(failures(name, 6))
  await evaluate(user)
  const after = (await list(user)).alerts
  t.equal(after.length, 1, 'no second row')
  t.match(after[0], { id: alert.id, triggerCount: 1, lastTriggeredAt: alert.lastTriggeredAt, figures: { failed: 18, total: 20 } },
    'still firing: the same trigger, not a new one')
  t.ok(Date.parse(after[0].lastSeenFiringAt) > Date.parse(alert.lastSeenFiringAt), 'lastSeenFiringAt moves at every evaluation that sees it')
})

t.test('triggerCount counts changes into firing, not evaluations; lastTriggeredAt is the last such change', async (t) => {
  const { user, batch } = await fixture()
  const name = randomId('refire-')
  await batch(failures(name, 12))
  await evaluate(user)
  const [opened] = (await list(user)).alerts
  t.match(opened, { rule: 'error_rate', status: 'active', triggerCount: 1 })
  t.equal(opened.lastTriggeredAt, opened.createdAt, 'opening is the first trigger')
  t.equal(opened.lastSeenFiringAt, opened.createdAt)

  for (let i = 0; i < 3; i++) await evaluate(user)
  const firing = (await list(user)).alerts[0]
  t.match(firing, { id: opened.id, triggerCount: 1, lastTriggeredAt: opened.lastTriggeredAt }, 'three more evaluations that still see it: no new trigger')
  t.ok(Date.parse(firing.lastSeenFiringAt) > Date.parse(opened.lastSeenFiringAt), 'but it was seen firing later')

  // An hour on, the failures are out of the window: the still-active alert goes quiet, stays open.
  const later = Date.now() + 3_600_000
  await evaluate(user, later)
  const quiet = (await list(user)).alerts[0]
  t.match(quiet, { id: opened.id, status: 'active', clearedAt: null, triggerCount: 1, lastSeenFiringAt: firing.lastSeenFiringAt }, 'quiet: nothing moves')

  // Failing again, at that later time: a change into firing.
  await batch(failures(name, 12, { timestamp: later - 60_000 }))
  await evaluate(user, later)
  const again = (await list(user)).alerts
  t.equal(again.length, 1, 're-triggering updates the open alert')
  t.match(again[0], { id: opened.id, triggerCount: 2, status: 'active' })
  t.ok(Date.parse(again[0].lastTriggeredAt) > Date.parse(firing.lastSeenFiringAt), 'lastTriggeredAt is the re-trigger')
  t.equal(again[0].lastSeenFiringAt, again[0].lastTriggeredAt)
  await evaluate(user, later)
  t.match((await list(user)).alerts[0], { triggerCount: 2, lastTriggeredAt: again[0].lastTriggeredAt }, 'and it stays at 2 while it fires')
})

t.test('concurrent evaluations (ticks, agent checks, two instances) never duplicate an alert', async (t) => {
  const other = await buildTestApp(t, { REDIS_PREFIX: prefix, DATABASE_URL })
  const { user, batch } = await fixture()
  const name = randomId('race-')
  const [r] = await batch(failures(name, 15))
  // Every evaluation must see the events: they are in ClickHouse before the race starts.
  await shipped(app)
  await app.activity.flush()
  const now = Date.now()
  await Promise.all([
    app.anomaly.tick(now), other.anomaly.tick(now),
    app.anomaly.evaluateUser(user.id, now, [r!.agentId]), other.anomaly.evaluateUser(user.id, now, [r!.agentId]),
    app.anomaly.evaluateUser(user.id, now, [r!.agentId]),
  ])
  const alerts = (await list(user)).alerts
  t.equal(alerts.length, 1)
  t.equal(alerts[0].triggerCount, 1, 'five evaluations saw one trigger')
})

t.test('spend spike, latency spike and silence rules fire from real events', async (t) => {
  const { user, batch } = await fixture()
  const now = Date.now()
  const h = 3_600_000
  const spender = randomId('spender-')
  await batch([
    ...Array.from({ length: 24 }, (_, i) => ({ agentId: spender, model: 'gpt-4o', timestamp: now - 2 * h - i * 0.9 * h, metadata: { tokensBreakdown: { output: 10_000 } } })),
    { agentId: spender, model: 'claude-opus-4-1', metadata: { tokensBreakdown: { output: 100_000 } } },
  ])
  const slow = randomId('slow-')
  await batch([
    ...Array.from({ length: 40 }, (_, i) => ({ agentId: slow, durationMs: 500, timestamp: now - 2 * h - i * 60_000 })),
    ...Array.from({ length: 25 }, () => ({ agentId: slow, durationMs: 6000 })),
  ])
  const quiet = randomId('quiet-')
  // 15 distinct hours, each event a minute or less from the middle of its hour (so none crosses into
  // the next hour whatever the time of day), the latest 2.5-3.5 h ago.
  const middle = Math.floor(now / h) * h - 3 * h + 30 * 60_000
  const [q] = await batch(Array.from({ length: 60 }, (_, i) => ({ agentId: quiet, timestamp: middle - (i % 15) * h - i * 1000 })))
  await evaluate(user)
  const alerts = (await list(user)).alerts
  const rules = Object.fromEntries(alerts.map((a: { rule: string; agentId: string }) => [a.rule, a]))
  t.match(rules.spend_spike, { figures: { lastHourUsd: 7.5, hourlyAverageUsd: 0.1 } })
  t.match(rules.latency_spike, { figures: { p95Ms: 6000, baselineP95Ms: 500 } })
  t.match(rules.silence, { agentId: q!.agentId, figures: { previousEvents: 60, activeHours: 15 } })
  t.equal(alerts.length, 3)
})

t.test('a resolved error cluster with a newer event raises a regression alert', async (t) => {
  const { user, batch } = await fixture()
  const name = randomId('regress-')
  await batch(failures(name, 2, { errorMessage: 'disk full on /var/data' }))
  const [cluster] = (await app.inject({ url: '/v1/me/errors', headers: user.auth })).json().clusters
  t.equal((await post(user, `/v1/me/errors/${cluster.fingerprint}/resolve`)).statusCode, 200)
  await evaluate(user)
  t.same((await list(user)).alerts, [], 'resolved and quiet: nothing')
  await new Promise((resolve) => setTimeout(resolve, 5))
  await batch(failures(name, 1, { errorMessage: 'disk full on /var/data' }))
  await evaluate(user)
  const [alert] = (await list(user)).alerts
  t.match(alert, { rule: `regression:${cluster.fingerprint}`, status: 'active', figures: { fingerprint: cluster.fingerprint, events: 3 } })
  await evaluate(user)
  t.equal((await list(user)).alerts.length, 1, 'idempotent')

  // Acknowledged, resolved again, regressing again: a new active alert, not a silent update.
  await post(user, `/v1/me/alerts/${alert.id}/acknowledge`)
  await post(user, `/v1/me/errors/${cluster.fingerprint}/resolve`)
  t.match((await list(user)).alerts[0], { id: alert.id, status: 'acknowledged', clearedAt: String }, 'resolving the cluster again clears it')
  await new Promise((resolve) => setTimeout(resolve, 5))
  await batch(failures(name, 1, { errorMessage: 'disk full on /var/data' }))
  await evaluate(user)
  const again = (await list(user)).alerts
  t.equal(again.length, 2)
  t.match(again[0], { rule: `regression:${cluster.fingerprint}`, status: 'active', clearedAt: null })
  t.not(again[0].id, alert.id)

  // The evaluation closes an acknowledged regression alert whose cluster went quiet, however it was resolved.
  await post(user, `/v1/me/alerts/${again[0].id}/acknowledge`)
  await app.db.query('UPDATE error_clusters SET resolved_at = now() WHERE user_id = $1 AND fingerprint = $2', [user.id, cluster.fingerprint])
  const result = await evaluate(user)
  t.ok(result.cleared >= 1)
  t.match((await list(user)).alerts[0], { id: again[0].id, clearedAt: String })
})

t.test('lifecycle: acknowledge, unacknowledge, snooze and its end; bad input; isolation; deleted agents', async (t) => {
  const { user, batch } = await fixture()
  const name = randomId('life-')
  const [r] = await batch(failures(name, 12))
  await evaluate(user)
  const [alert] = (await list(user)).alerts
  const id = alert.id

  const ack = await post(user, `/v1/me/alerts/${id}/acknowledge`)
  t.equal(ack.statusCode, 200)
  t.match(ack.json(), { status: 'acknowledged', acknowledgedAt: String })
  t.equal((await post(user, `/v1/me/alerts/${id}/acknowledge`)).statusCode, 200, 'acknowledging twice is fine')
  const badSnooze = await post(user, `/v1/me/alerts/${id}/snooze`)
  t.equal(badSnooze.statusCode, 409, 'an acknowledged alert cannot be snoozed')
  t.same(badSnooze.json(), {
    error: 'conflict',
    reason: 'invalid_transition',
    message: `alert ${id} is acknowledged; only an active or snoozed alert can be snoozed (unacknowledge it first)`,
  }, 'a 409 says the current status and the statuses the action moves from')
  const unack = await post(user, `/v1/me/alerts/${id}/unacknowledge`)
  t.equal(unack.statusCode, 200)
  t.equal(unack.json().status, 'active')
  t.equal(unack.json().acknowledgedAt, null, 'no longer acknowledged, nor said to be')

  const before = Date.now()
  const snooze = await post(user, `/v1/me/alerts/${id}/snooze?hours=2`)
  t.equal(snooze.statusCode, 200)
  t.equal(snooze.json().status, 'snoozed')
  const until = Date.parse(snooze.json().snoozedUntil)
  t.ok(until >= before + 2 * 3_600_000 - 5000 && until <= Date.now() + 2 * 3_600_000 + 5000, 'snoozed for two hours')
  const again = (await post(user, `/v1/me/alerts/${id}/snooze`)).json()
  t.equal(again.status, 'snoozed', 'snooze defaults to an hour')
  t.ok(Date.parse(again.snoozedUntil) < until - 3_000_000, 'snoozing a snoozed alert sets its end anew, an hour from now, though it was later')
  const badUnack = await post(user, `/v1/me/alerts/${id}/unacknowledge`)
  t.equal(badUnack.statusCode, 409, 'a snoozed alert is not acknowledged')
  t.equal(badUnack.json().message, `alert ${id} is snoozed; only an acknowledged alert can be unacknowledged`)
  for (const hours of ['0', '169', 'abc', '1.5']) {
    t.equal((await post(user, `/v1/me/alerts/${id}/snooze?hours=${hours}`)).statusCode, 400, `hours=${hours}`)
  }
  await app.db.query('UPDATE alerts SET snoozed_until = now() - interval \'1 second\' WHERE id = $1', [id])
  t.equal((await list(user)).alerts[0].status, 'active', 'a snooze that has ended reads as active')
  const tickResult = await app.anomaly.tick(Date.now())
  t.ok(tickResult.evaluatedAgents >= 1, 'the tick evaluates every recently active user')
  const { rows } = await app.db.query('SELECT status FROM alerts WHERE id = $1', [id])
  t.equal(rows[0].status, 'active', 'and the tick writes it back')

  const other = await newUser(app)
  for (const action of ['acknowledge', 'snooze', 'unacknowledge']) {
    t.equal((await post(other, `/v1/me/alerts/${id}/${action}`)).statusCode, 404, `another user's alert: ${action}`)
  }
  t.same((await list(other)).alerts, [])
  t.equal((await post(user, '/v1/me/alerts/nope/acknowledge')).statusCode, 404)

  t.equal((await app.inject({ method: 'DELETE', url: `/v1/me/agents/${r!.agentId}`, headers: user.auth })).statusCode, 204)
  const listed = (await list(user)).alerts.find((a: { id: string }) => a.id === id)
  t.match(listed, { agentDeleted: true, clearedAt: String }, 'a deleted agent\'s alert is still listed, cleared at the deletion')
  const onDeleted = await post(user, `/v1/me/alerts/${id}/snooze?hours=3`)
  t.equal(onDeleted.statusCode, 409, 'and closed: nothing is left to snooze')
  t.match(onDeleted.json().message, /was cleared at .* and is closed/)
})

t.test('a cleared alert is closed: unacknowledging or snoozing it is a 409, so an agent and rule never have two open alerts', async (t) => {
  const { user, batch } = await fixture()
  const name = randomId('cleared-')
  await batch(failures(name, 12))
  await evaluate(user)
  const [alert] = (await list(user)).alerts
  t.equal((await post(user, `/v1/me/alerts/${alert.id}/acknowledge`)).statusCode, 200)
  // What the evaluation does to an acknowledged alert whose anomaly is over (tested above).
  await app.db.query('UPDATE alerts SET cleared_at = now() WHERE id = $1', [alert.id])
  for (const action of ['unacknowledge', 'snooze']) {
    const res = await post(user, `/v1/me/alerts/${alert.id}/${action}`)
    t.equal(res.statusCode, 409, action)
    t.match(res.json(), { error: 'conflict', reason: 'invalid_transition', message: new RegExp(`^alert ${alert.id} was cleared at .+ and is closed; if its anomaly returns, a new alert opens$`) })
  }
  const [after] = (await list(user)).alerts
  t.match(after, { id: alert.id, status: 'acknowledged', clearedAt: String }, 'it stays as it was')
  await batch(failures(name, 12))
  await evaluate(user)
  const open = (await list(user, '?status=active')).alerts
  t.equal(open.length, 1, 'the anomaly back: one new open alert')
  t.not(open[0].id, alert.id)
})

t.test('GET /v1/me/alerts filters by status, counts on request, newest first', async (t) => {
  const { user, batch } = await fixture()
  const a = randomId('fa-')
  const b = randomId('fb-')
  await batch([...failures(a, 12), ...failures(b, 12)])
  await evaluate(user)
  const all = (await list(user)).alerts
  t.equal(all.length, 2)
  await post(user, `/v1/me/alerts/${all[0].id}/acknowledge`)
  t.equal((await list(user, '?status=active')).alerts.length, 1)
  t.equal((await list(user, '?status=acknowledged')).alerts[0].id, all[0].id)
  t.same((await list(user, '?status=snoozed')).alerts, [])
  const counted = await list(user, '?count=true')
  t.same(counted.counts, { active: 1, acknowledged: 1, snoozed: 0, total: 2 })
  for (const q of ['?status=open', '?count=maybe', '?limit=0']) {
    t.equal((await app.inject({ url: `/v1/me/alerts${q}`, headers: user.auth })).statusCode, 400, q)
  }
})

t.test('an acknowledged alert whose anomaly is over is cleared; a new anomaly opens a new alert', async (t) => {
  const { user, batch } = await fixture()
  const name = randomId('clear-')
  const hourAgo = Date.now() - 3_600_000
  await batch(failures(name, 12, { timestamp: hourAgo + 60_000 }))
  await evaluate(user, hourAgo + 120_000)
  const [alert] = (await list(user)).alerts
  await post(user, `/v1/me/alerts/${alert.id}/acknowledge`)
  await evaluate(user)
  const cleared = (await list(user)).alerts[0]
  t.match(cleared, { id: alert.id, status: 'acknowledged', clearedAt: String })
  await batch(failures(name, 12))
  await evaluate(user)
  const alerts = (await list(user)).alerts
  t.equal(alerts.length, 2)
  t.match(alerts[0], { rule: 'error_rate', status: 'active', clearedAt: null })
  t.not(alerts[0].id, alert.id)
})

t.test('alert settings: per-user thresholds, validated, used by the evaluation', async (t) => {
  const { user, batch } = await fixture()
  const defaults = (await app.inject({ url: '/v1/me/alert-settings', headers: user.auth })).json()
  t.equal(defaults.thresholds.error_rate.minFailed, 10)
  t.same(defaults.overrides, {})
  const put = await app.inject({ method: 'PUT', url: '/v1/me/alert-settings', headers: user.auth, payload: { error_rate: { minFailed: 3 }, silence: { enabled: false } } })
  t.equal(put.statusCode, 200)
  t.equal(put.json().thresholds.error_rate.minFailed, 3)
  t.equal(put.json().thresholds.error_rate.minRate, 0.5)
  for (const bad of [{ error_rate: { minFailed: 0 } }, { error_rate: { minRate: 2 } }, { nope: {} }, { error_rate: { unknown: 1 } }, { silence: { enabled: 'no' } }]) {
    t.equal((await app.inject({ method: 'PUT', url: '/v1/me/alert-settings', headers: user.auth, payload: bad })).statusCode, 400, JSON.stringify(bad))
  }
  await batch(failures(randomId('few-'), 3))
  await evaluate(user)
  t.equal((await list(user)).alerts.length, 1, 'three failures are enough for this user')
  const other = await newUser(app)
  t.same((await app.inject({ url: '/v1/me/alert-settings', headers: other.auth })).json().overrides, {}, 'settings are per user')
})

t.test('with the worker role, events lead to an alert through BullMQ without waiting for a tick', async (t) => {
  const worker = await buildTestApp(t, { REDIS_PREFIX: `test:${randomId()}:`, ROLES: 'api,worker', ANOMALY_EVERY_MS: '300000', DATABASE_URL })
  const user = await newUser(worker, { tier: 'enterprise' })
  const key = await user.createKey()
  const name = randomId('queued-')
  for (const e of failures(name, 12)) await sendEvent(worker, key.secret, e)
  const schedulers = await worker.anomalyQueue.getJobSchedulers()
  t.equal(schedulers.length, 1, 'one tick scheduler, upserted')
  // Well inside the 300 s tick, so an alert can only come from the queued agent check; the bound is
  // wide because a busy machine delays the debounced check by seconds.
  const deadline = Date.now() + 60_000
  let alerts: { rule: string }[] = []
  while (Date.now() < deadline) {
    alerts = (await worker.inject({ url: '/v1/me/alerts', headers: user.auth })).json().alerts
    if (alerts.length) break
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  t.equal(alerts.length, 1)
  t.equal(alerts[0]?.rule, 'error_rate')
  const jobs = await worker.anomalyQueue.getJobs(['completed', 'waiting', 'delayed', 'active'])
  t.equal(jobs.filter((j) => j.name === 'agent').length, 1, '12 events made one debounced agent check')
})

t.test('postgres/015 clears the open alerts of agents deleted before deleting cleared them, and no other', async (t) => {
  const { readFileSync } = await import('node:fs')
  const { user, batch } = await fixture()
  const [gone, kept] = [randomId('gone-'), randomId('kept-')]
  const [g] = await batch(failures(gone, 12))
  const [k] = await batch(failures(kept, 12))
  await evaluate(user)
  const open = (await list(user)).alerts
  t.equal(open.length, 2, 'an alert for each agent')
  t.equal((await post(user, `/v1/me/alerts/${open.find((a: { agentId: string }) => a.agentId === g!.agentId).id}/acknowledge`)).statusCode, 200)
  // Deleted as before the rule: the agent's row only, its alerts left open.
  await app.db.query('UPDATE agents SET deleted_at = now() WHERE id = $1', [g!.agentId])
  const sql = readFileSync(new URL('../../../../postgres/015.do.clear-alerts-of-deleted-agents.sql', import.meta.url), 'utf8')
  await app.db.query(sql)
  await app.db.query(sql)
  const after = (await list(user)).alerts
  t.match(after.find((a: { agentId: string }) => a.agentId === g!.agentId), { agentDeleted: true, clearedAt: String }, 'the deleted agent\'s acknowledged alert is cleared')
  t.match(after.find((a: { agentId: string }) => a.agentId === k!.agentId), { status: 'active', clearedAt: null }, 'a live agent\'s alert is left open')
})
