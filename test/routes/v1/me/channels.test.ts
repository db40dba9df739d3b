import t from 'tap'
import { Webhook } from 'standardwebhooks'
import { alertEvent, eventKey } from '../../../../src/domain/notifications.ts'
import { newMessageId } from '../../../../src/domain/ids.ts'
import { SWEEP_GRACE_MS } from '../../../../src/jobs/notify.queue.ts'
import { acceptedBatch, buildTestApp, newUser, randomId, shipped, type TestUser } from '../../../helpers/app.ts'
import { ownTestDatabase } from '../../../helpers/env.ts'
import { startReceiver, until } from '../../../helpers/receiver.ts'

// How long a delivery may take to arrive: a bound, not a speed (a busy machine delays BullMQ jobs by
// seconds); each wait ends as soon as its delivery is there.
const DELIVERY_BOUND_MS = 60_000

const DASHBOARD = 'https://dash.example.com'
const receiver = await startReceiver(t)
// The receivers listen on this machine's loopback, which channels may reach only with
// NOTIFY_ALLOW_PRIVATE_NETWORKS=1 (channels-safety.test.ts shows the refusal without it).
// A Postgres database of its own (ownTestDatabase): this file runs a worker, whose anomaly tick
// would evaluate other files' alerts against this file's ClickHouse (test/helpers/env.ts).
const app = await buildTestApp(t, {
  ROLES: 'api,worker',
  DATABASE_URL: ownTestDatabase('channels'),
  NOTIFY_ALLOW_PRIVATE_NETWORKS: '1',
  PAGERDUTY_EVENTS_URL: receiver.url('/pagerduty/v2/enqueue'),
  DASHBOARD_URL: DASHBOARD,
})

const api = (user: TestUser, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
  app.inject({ method, url, headers: user.auth, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) })

async function fixture () {
  const user = await newUser(app, { tier: 'enterprise', burst: 100000 })
  const key = await user.createKey()
  const batch = (events: Record<string, unknown>[]) => acceptedBatch(app, key.secret, events)
  const channel = async (body: Record<string, unknown>) => {
    const res = await api(user, 'POST', '/v1/me/channels', body)
    if (res.statusCode !== 201) throw new Error(`POST /v1/me/channels: ${res.statusCode} ${res.body}`)
    return res.json()
  }
  return { user, batch, channel }
}
const failures = (agentId: string, n: number, errorMessage = 'upstream 502') =>
  Array.from({ length: n }, () => ({ agentId, outcome: 'failed', toolExecuted: 'http', errorMessage }))
const successes = (agentId: string, n: number) => Array.from({ length: n }, () => ({ agentId, outcome: 'success' }))

/** One anomaly evaluation of the user, as the tick runs it. */
async function evaluate (user: TestUser) {
  await shipped(app)
  await app.activity.flush()
  return app.anomaly.evaluateUser(user.id, Date.now())
}
const bodies = (path: string) => receiver.at(path).map((r) => JSON.parse(r.body))
const deliveries = async (user: TestUser, channelId: string) => (await api(user, 'GET', `/v1/me/channels/${channelId}/deliveries`)).json().deliveries
const finished = (user: TestUser, channelId: string, n: number) =>
  until(async () => {
    const list = await deliveries(user, channelId)
    return list.length === n && list.every((d: { status: string }) => !['pending', 'retrying'].includes(d.status)) && list
  }, DELIVERY_BOUND_MS, `${n} finished deliveries`)

/** An alert event made up for tests that are about delivery, not about what raises alerts. */
function madeUpEvent () {
  const at = new Date().toISOString()
  const alert = {
    id: randomId('alert-'), rule: 'error_rate', severity: 'warning' as const, status: 'active', message: 'made up', figures: {},
    triggerCount: 1, createdAt: at, lastTriggeredAt: at, lastSeenFiringAt: at, clearedAt: null,
  }
  return alertEvent('opened', alert, { id: 'cagent', displayName: 'agent' }, DASHBOARD, new Date())
}

t.test('an error spike reaches a webhook receiver signed and verifiable; each state change is delivered once', async (t) => {
  const { user, batch, channel } = await fixture()
  const path = `/hook/${randomId()}`
  const created = await channel({ kind: 'webhook', url: receiver.url(path), label: 'ops' })
  t.match(created, { kind: 'webhook', label: 'ops', url: receiver.url(path), routingKey: null, enabled: true, disabledReason: null, secret: /^whsec_[A-Za-z0-9+/=]{40,}$/ })
  t.same(created.events, ['alert.triggered', 'alert.resolved', 'error_cluster.created', 'error_cluster.reopened', 'score.dropped'], 'every event by default')
  const listed = (await api(user, 'GET', '/v1/me/channels')).json().channels
  t.equal(listed.length, 1)
  t.notOk('secret' in listed[0], 'the secret is shown only once')

  const name = randomId('flaky-')
  const [r] = await batch([...failures(name, 12), ...successes(name, 2)])
  await evaluate(user)
  await until(() => bodies(path).length >= 2, DELIVERY_BOUND_MS, 'the alert and the new cluster')
  const webhook = new Webhook(created.secret)
  for (const req of receiver.at(path)) {
    t.same(webhook.verify(req.body, req.headers as Record<string, string>), JSON.parse(req.body), `${JSON.parse(req.body).type} verifies`)
    t.match(req.headers['webhook-id'], /^msg_[0-9A-Z]{26}$/)
  }
  const triggered = bodies(path).find((b) => b.type === 'alert.triggered')
  t.match(triggered, {
    timestamp: String,
    data: {
      alert: { id: String, rule: 'error_rate', severity: 'critical', status: 'active', message: /12 of 14 events failed/, figures: { failed: 12, total: 14 } },
      agent: { id: r!.agentId, displayName: name },
      url: `${DASHBOARD}/#/alerts`,
    },
  })
  const clusterEvent = bodies(path).find((b) => b.type === 'error_cluster.created')
  t.match(clusterEvent, {
    data: { cluster: { fingerprint: /^[0-9a-f]{16}$/, status: 'open', sampleMessage: 'upstream 502', count: 12 }, agent: { id: r!.agentId } },
  })
  t.equal(clusterEvent.data.url, `${DASHBOARD}/#/errors/${clusterEvent.data.cluster.fingerprint}`, 'a link to the cluster itself')

  await batch(failures(name, 3))
  await evaluate(user)
  await evaluate(user)
  t.equal((await deliveries(user, created.id)).length, 2, 'a continuing anomaly and a known cluster are not delivered again')

  const alertId = triggered.data.alert.id
  t.equal((await api(user, 'POST', `/v1/me/alerts/${alertId}/acknowledge`)).statusCode, 200)
  await batch(successes(name, 40))
  await evaluate(user)
  const resolved = await until(() => bodies(path).find((b) => b.type === 'alert.resolved'), DELIVERY_BOUND_MS, 'alert.resolved').catch(async (err) => {
    // Says where it stopped: the alert not cleared, or cleared and its delivery not made.
    const alert = (await api(user, 'GET', '/v1/me/alerts?status=all')).json().alerts.find((a: { id: string }) => a.id === alertId)
    throw new Error(`${(err as Error).message}; alert: ${JSON.stringify(alert)}; deliveries: ${JSON.stringify(await deliveries(user, created.id))}`)
  })
  t.match(resolved.data.alert, { id: alertId, status: 'acknowledged', clearedAt: String })

  const log = await finished(user, created.id, 3)
  t.same(log.map((d: { event: string }) => d.event), ['alert.resolved', 'error_cluster.created', 'alert.triggered'], 'newest first')
  for (const d of log) t.match(d, { status: 'delivered', attempts: 1, maxAttempts: 8, lastStatusCode: 200, lastError: null, lastResponse: 'ok', lastAttemptAt: String, nextAttemptAt: null, finishedAt: String })
  t.equal(receiver.at(path).length, 3, 'three state changes, three requests')
})

t.test('Slack and PagerDuty receivers get their own formats; a regression re-opens its cluster', async (t) => {
  const { user, batch, channel } = await fixture()
  const slackPath = `/slack/services/${randomId()}`
  const slack = await channel({ kind: 'slack', url: receiver.url(slackPath), events: ['alert.triggered', 'error_cluster.reopened'] })
  const routingKey = randomId('routing-')
  const pagerduty = await channel({ kind: 'pagerduty', routingKey, label: 'on-call' })
  t.notOk('secret' in slack, 'only webhooks have a signing secret')
  t.equal(slack.url, `http://127.0.0.1:${receiver.port}/…${slackPath.slice(-4)}`, 'a Slack URL is shown masked')
  t.match(pagerduty, { url: null, routingKey: `…${routingKey.slice(-4)}` })
  const paged = () => bodies('/pagerduty/v2/enqueue').filter((b) => b.routing_key === routingKey)

  const name = randomId('disk-')
  await batch(failures(name, 12, 'disk full on /var/data'))
  await evaluate(user)
  const message = await until(() => bodies(slackPath)[0], DELIVERY_BOUND_MS, 'the Slack message')
  t.match(message, {
    text: new RegExp(`^\\[critical\\] error_rate on ${name}: 12 of 12 events failed`),
    blocks: [{ type: 'section', text: { type: 'mrkdwn', text: /error_rate/ } }, { type: 'context', elements: [{ type: 'mrkdwn', text: new RegExp(`^agent \\*${name}\\* · `) }] }],
  })
  const context = message.blocks[1].elements[0].text
  for (const part of ['failed 12', 'total 12', `<${DASHBOARD}/#/alerts|Open in the dashboard>`]) t.ok(context.includes(part), `the context has ${part}`)
  await until(() => paged().length >= 2, DELIVERY_BOUND_MS, 'two PagerDuty events')
  const trigger = paged().find((b) => b.payload?.class === 'alert.triggered')
  const alertId = (await api(user, 'GET', '/v1/me/alerts')).json().alerts[0].id
  t.match(trigger, {
    routing_key: routingKey,
    event_action: 'trigger',
    dedup_key: alertId,
    payload: { summary: new RegExp(`error_rate on ${name}`), severity: 'critical', source: name, class: 'alert.triggered', custom_details: { alert: { id: alertId } } },
    links: [{ href: `${DASHBOARD}/#/alerts` }],
  })
  const clusterTrigger = paged().find((b) => b.payload?.class === 'error_cluster.created')
  t.match(clusterTrigger, { event_action: 'trigger', dedup_key: /^error_cluster:[0-9a-f]{16}$/, payload: { severity: 'error', summary: /disk full on \/var\/data/ } })
  const fingerprint = clusterTrigger.dedup_key.slice('error_cluster:'.length)

  // Resolved, then the error happens again: the cluster re-opens, as one event.
  t.equal((await api(user, 'POST', `/v1/me/errors/${fingerprint}/resolve`)).statusCode, 200)
  await new Promise((resolve) => setTimeout(resolve, 5))
  await batch(failures(name, 1, 'disk full on /var/data'))
  await evaluate(user)
  const reopened = await until(() => paged().find((b) => b.payload?.class === 'error_cluster.reopened'), DELIVERY_BOUND_MS, 'the re-opening')
  const regression = (await api(user, 'GET', '/v1/me/alerts')).json().alerts.find((a: { rule: string }) => a.rule === `regression:${fingerprint}`)
  t.match(reopened, { event_action: 'trigger', dedup_key: regression.id, payload: { summary: new RegExp(`Error cluster ${fingerprint} re-opened on ${name}`) } })
  // Regression: the re-opened cluster's sample message and first event were null.
  const created = clusterTrigger.payload.custom_details.cluster
  t.match(reopened.payload.custom_details.cluster, {
    fingerprint, status: 'open', sampleMessage: 'disk full on /var/data', firstSeen: created.firstSeen, count: 13, resolvedAt: String,
  }, 'the re-opened cluster carries its sample message and first event')
  t.type(created.firstSeen, 'string')
  t.ok(Date.parse(reopened.payload.custom_details.cluster.firstSeen) < Date.parse(reopened.payload.custom_details.cluster.lastSeen), 'first seen before the event that re-opened it')
  await until(() => bodies(slackPath).find((b) => b.text.startsWith(`Error cluster ${fingerprint} re-opened`)), DELIVERY_BOUND_MS, 'the re-opening on Slack')

  // Handled and resolved again: PagerDuty resolves the same incident.
  await api(user, 'POST', `/v1/me/alerts/${regression.id}/acknowledge`)
  await api(user, 'POST', `/v1/me/errors/${fingerprint}/resolve`)
  t.same(await until(() => paged().find((b) => b.event_action === 'resolve'), DELIVERY_BOUND_MS, 'the resolve'), { routing_key: routingKey, event_action: 'resolve', dedup_key: regression.id })
  await finished(user, slack.id, 2)
  t.same((await deliveries(user, slack.id)).map((d: { event: string }) => d.event).sort(), ['alert.triggered', 'error_cluster.reopened'], 'Slack got only what it subscribed to')
})

t.test('deleting an agent resolves its open alert on the channels (a PagerDuty incident closes)', async (t) => {
  const { user, batch, channel } = await fixture()
  const path = `/deleted/${randomId()}`
  await channel({ kind: 'webhook', url: receiver.url(path), events: ['alert.triggered', 'alert.resolved'] })
  const name = randomId('doomed-')
  const [r] = await batch(failures(name, 12))
  await evaluate(user)
  await until(() => bodies(path).some((b) => b.type === 'alert.triggered'), DELIVERY_BOUND_MS, 'the alert')
  const opened = bodies(path).find((b) => b.type === 'alert.triggered')
  t.equal((await api(user, 'DELETE', `/v1/me/agents/${r!.agentId}`)).statusCode, 204)
  const resolved = await until(() => bodies(path).find((b) => b.type === 'alert.resolved'), DELIVERY_BOUND_MS, 'its resolution')
  t.match(resolved.data, { alert: { id: opened.data.alert.id }, agent: { id: r!.agentId, displayName: name } }, 'the same alert, of the agent by its name')
})

t.test('receivers that hang do not hold back the notifications of the others', async (t) => {
  const { user, channel } = await fixture()
  // A receiver that takes requests and never answers: each attempt holds its slot until it times out.
  const { createServer } = await import('node:http')
  let hung = 0
  let givenUp = 0
  const hanging = createServer((req) => { hung++; req.socket.on('close', () => { givenUp++ }) })
  await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => { hanging.closeAllConnections(); hanging.close(resolve) }))
  const port = (hanging.address() as { port: number }).port
  const dead = []
  for (let i = 0; i < 12; i++) dead.push(await channel({ kind: 'webhook', url: `http://127.0.0.1:${port}/hang/${i}` }))
  const path = `/alive/${randomId()}`
  const alive = await channel({ kind: 'webhook', url: receiver.url(path) })
  await app.notifications.publish(user.id, madeUpEvent())
  await until(() => receiver.at(path).length === 1, DELIVERY_BOUND_MS, 'the working receiver\'s delivery')
  t.equal(givenUp, 0, `the working receiver was called while every hanging attempt still waited (${hung} of 12 hanging)`)
  t.match((await finished(user, alive.id, 1))[0], { status: 'delivered' })
  for (const d of dead) t.equal((await api(user, 'DELETE', `/v1/me/channels/${d.id}`)).statusCode, 204)
})

t.test('a failing receiver is retried with the same webhook-id, and the delivery log shows each attempt', async (t) => {
  const { user, channel } = await fixture()
  const path = `/flaky/${randomId()}`
  receiver.script(path, [{ status: 500, body: 'upstream down' }, { status: 200, body: 'ok' }])
  const created = await channel({ kind: 'webhook', url: receiver.url(path) })
  const [delivery] = await app.notifications.publish(user.id, madeUpEvent())
  const retrying = await until(async () => (await deliveries(user, created.id)).find((d: { status: string }) => d.status === 'retrying'), DELIVERY_BOUND_MS, 'a retrying delivery')
  t.match(retrying, { id: delivery!.id, attempts: 1, lastStatusCode: 500, lastError: 'HTTP 500', lastResponse: 'upstream down', finishedAt: null })
  t.equal(Date.parse(retrying.nextAttemptAt) - Date.parse(retrying.lastAttemptAt), 15_000, 'the first retry is due 15 s later')

  const job = (await app.notifyQueue.getJob(delivery!.id))!
  await until(async () => (await job.getState()) === 'delayed', DELIVERY_BOUND_MS, 'the job waiting for its retry')
  await job.promote()
  const [done] = await finished(user, created.id, 1)
  t.match(done, { status: 'delivered', attempts: 2, lastStatusCode: 200, lastError: null, lastResponse: 'ok' })
  const [first, second] = receiver.at(path)
  t.equal(first!.headers['webhook-id'], second!.headers['webhook-id'], 'the same webhook-id on the retry')
  const webhook = new Webhook(created.secret)
  for (const req of [first!, second!]) t.ok(webhook.verify(req.body, req.headers as Record<string, string>), 'each attempt is signed')
})

t.test('a run of failures disables the channel with the reason; enabling it clears that', async (t) => {
  const { user, channel } = await fixture()
  const path = `/down/${randomId()}`
  receiver.script(path, [{ status: 503, body: 'maintenance' }])
  const created = await channel({ kind: 'webhook', url: receiver.url(path) })
  const [delivery] = await app.notifications.publish(user.id, madeUpEvent())
  const job = (await app.notifyQueue.getJob(delivery!.id))!
  for (let attempt = 1; attempt < 8; attempt++) {
    await until(async () => (await job.getState()) === 'delayed' && (await deliveries(user, created.id))[0].attempts === attempt, 15_000, `attempt ${attempt}`)
    await job.promote()
  }
  const [failed] = await finished(user, created.id, 1)
  t.match(failed, { status: 'failed', attempts: 8, lastStatusCode: 503, lastError: 'HTTP 503', nextAttemptAt: null })
  t.equal(receiver.at(path).length, 8)
  // The worker records the last attempt, then disables the channel: wait for the second write.
  const disabled = await until(async () => {
    const [c] = (await api(user, 'GET', '/v1/me/channels')).json().channels
    return c.enabled === false && c
  }, DELIVERY_BOUND_MS, 'the channel disabled')
  t.match(disabled, { enabled: false, disabledAt: String, disabledReason: /failed \(8 attempts; last: HTTP 503\)/ })

  t.same(await app.notifications.publish(user.id, madeUpEvent()), [], 'a disabled channel gets nothing')
  const enabled = await api(user, 'PATCH', `/v1/me/channels/${created.id}`, { enabled: true })
  t.equal(enabled.statusCode, 200)
  t.match(enabled.json(), { enabled: true, disabledReason: null, disabledAt: null })
})

t.test('a delivered attempt in between means no run: the channel stays enabled', async (t) => {
  const { user, channel } = await fixture()
  const path = `/sometimes/${randomId()}`
  receiver.script(path, [{ status: 500 }])
  const created = await channel({ kind: 'webhook', url: receiver.url(path) })
  const [delivery] = await app.notifications.publish(user.id, madeUpEvent())
  const job = (await app.notifyQueue.getJob(delivery!.id))!
  for (let attempt = 1; attempt < 8; attempt++) {
    await until(async () => (await job.getState()) === 'delayed', 15_000, `attempt ${attempt}`)
    // Meanwhile another delivery to the same channel gets through.
    if (attempt === 4) await app.channels.markSucceeded(created.id)
    await job.promote()
  }
  await finished(user, created.id, 1)
  t.match((await api(user, 'GET', '/v1/me/channels')).json().channels[0], { enabled: true, disabledReason: null })
})

t.test('a delivery whose job was lost with Redis is queued again from Postgres by the sweep', async (t) => {
  const { user, channel } = await fixture()
  const path = `/lost/${randomId()}`
  const created = await channel({ kind: 'webhook', url: receiver.url(path) })
  // What a delivery looks like after Redis lost its job: in Postgres, pending, and overdue.
  const id = newMessageId()
  const event = madeUpEvent()
  await app.channels.addDelivery(created.id, { id, eventKey: eventKey(event, id), event, maxAttempts: 8 })
  await app.notifications.sweep(SWEEP_GRACE_MS)
  t.notOk(await app.notifyQueue.getJob(id), 'not overdue yet: left alone')
  await app.db.query('UPDATE notification_deliveries SET created_at = now() - interval \'10 minutes\' WHERE id = $1', [id])
  t.ok(await app.notifications.sweep(SWEEP_GRACE_MS) >= 1)
  const [done] = await finished(user, created.id, 1)
  t.match(done, { id, status: 'delivered', attempts: 1 })
  t.equal(receiver.at(path)[0]!.headers['webhook-id'], id)
})

t.test('a rotated signing secret: shown once; both sign until the old one\'s time is up; another kind or user cannot rotate', async (t) => {
  const { user, channel } = await fixture()
  const hook = await channel({ kind: 'webhook', url: receiver.url(`/rotate/${randomId()}`) })
  const delivered = async (n: number) => {
    const res = await api(user, 'POST', `/v1/me/channels/${hook.id}/test`)
    t.equal(res.statusCode, 202)
    await finished(user, hook.id, n)
    return receiver.received.find((r) => r.headers['webhook-id'] === res.json().id)!
  }
  const rotated = await api(user, 'POST', `/v1/me/channels/${hook.id}/rotate-secret`)
  t.equal(rotated.statusCode, 200, rotated.body)
  const { secret, previousSecretUntil } = rotated.json()
  t.match(secret, /^whsec_/)
  t.not(secret, hook.secret)
  const until24h = Date.parse(previousSecretUntil) - Date.now()
  t.ok(until24h > 23.9 * 3_600_000 && until24h <= 24 * 3_600_000, 'the old secret signs for 24 hours by default')
  const listed = (await api(user, 'GET', '/v1/me/channels')).json().channels.find((c: { id: string }) => c.id === hook.id)
  t.notOk('secret' in listed, 'the new secret is not listed')
  t.equal(listed.previousSecretUntil, previousSecretUntil)

  const both = await delivered(1)
  t.equal(String(both.headers['webhook-signature']).split(' ').length, 2, 'two signatures')
  for (const key of [secret, hook.secret]) {
    t.match(new Webhook(key).verify(both.body, both.headers as Record<string, string>), { type: 'channel.test' }, 'a receiver holding either secret verifies')
  }

  const now = (await api(user, 'POST', `/v1/me/channels/${hook.id}/rotate-secret`, { previousValidHours: 0 })).json()
  t.equal(now.previousSecretUntil, null, 'previousValidHours 0: the replaced secret stops at once')
  const one = await delivered(2)
  t.equal(String(one.headers['webhook-signature']).split(' ').length, 1)
  t.match(new Webhook(now.secret).verify(one.body, one.headers as Record<string, string>), { type: 'channel.test' })
  t.throws(() => new Webhook(secret).verify(one.body, one.headers as Record<string, string>), 'the replaced secret no longer verifies')

  const pd = await channel({ kind: 'pagerduty', routingKey: randomId('rk-') })
  const notHook = await api(user, 'POST', `/v1/me/channels/${pd.id}/rotate-secret`)
  t.equal(notHook.statusCode, 409)
  t.match(notHook.json(), { error: 'conflict', reason: 'not_a_webhook' })
  const other = await newUser(app)
  t.equal((await api(other, 'POST', `/v1/me/channels/${hook.id}/rotate-secret`)).statusCode, 404, 'another user\'s channel')
  t.equal((await api(user, 'POST', `/v1/me/channels/${hook.id}/rotate-secret`, { previousValidHours: 169 })).statusCode, 400)
  const { rows } = await app.db.query('SELECT signing_secret, previous_signing_secret FROM notification_channels WHERE id = $1', [hook.id])
  t.match(rows[0], { signing_secret: /^enc:v1:/, previous_signing_secret: /^enc:v1:/ }, 'both sealed at rest')
})

t.test('a test delivery is one attempt, to each kind of channel', async (t) => {
  const { user, channel } = await fixture()
  const hook = await channel({ kind: 'webhook', url: receiver.url(`/test-hook/${randomId()}`) })
  const res = await api(user, 'POST', `/v1/me/channels/${hook.id}/test`)
  t.equal(res.statusCode, 202)
  t.match(res.json(), { id: /^msg_/, event: 'channel.test', status: 'pending', attempts: 0, maxAttempts: 1 })
  const [done] = await finished(user, hook.id, 1)
  t.match(done, { status: 'delivered', attempts: 1 })
  const req = receiver.received.find((r) => r.headers['webhook-id'] === res.json().id)!
  t.match(new Webhook(hook.secret).verify(req.body, req.headers as Record<string, string>), { type: 'channel.test', data: { channel: { id: hook.id, kind: 'webhook' }, url: `${DASHBOARD}/` } })

  const routingKey = randomId('routing-')
  const pd = await channel({ kind: 'pagerduty', routingKey })
  await api(user, 'POST', `/v1/me/channels/${pd.id}/test`)
  const paged = await until(() => bodies('/pagerduty/v2/enqueue').find((b) => b.routing_key === routingKey), DELIVERY_BOUND_MS, 'the PagerDuty test')
  t.match(paged, { event_action: 'trigger', payload: { severity: 'info', class: 'channel.test' } })

  const brokenPath = `/test-broken/${randomId()}`
  receiver.script(brokenPath, [{ status: 404, body: 'no_service' }])
  const broken = await channel({ kind: 'slack', url: receiver.url(brokenPath) })
  await api(user, 'POST', `/v1/me/channels/${broken.id}/test`)
  const [failed] = await finished(user, broken.id, 1)
  t.match(failed, { status: 'failed', attempts: 1, lastStatusCode: 404, lastResponse: 'no_service' })
  t.match((await api(user, 'GET', '/v1/me/channels')).json().channels.find((c: { id: string }) => c.id === broken.id), { enabled: true }, 'a failed test does not disable a channel')
})

t.test('channels are their owner\'s: anyone else gets 404', async (t) => {
  const { user, channel } = await fixture()
  const other = await newUser(app)
  const mine = await channel({ kind: 'webhook', url: receiver.url('/mine') })
  t.same((await api(other, 'GET', '/v1/me/channels')).json().channels, [])
  for (const [method, url, payload] of [
    ['PATCH', `/v1/me/channels/${mine.id}`, { label: 'x' }],
    ['DELETE', `/v1/me/channels/${mine.id}`],
    ['POST', `/v1/me/channels/${mine.id}/test`],
    ['GET', `/v1/me/channels/${mine.id}/deliveries`],
    ['GET', '/v1/me/channels/nope/deliveries'],
  ] as const) {
    const res = await api(other, method, url, payload)
    t.equal(res.statusCode, 404, `${method} ${url}`)
    t.same(res.json(), { error: 'not_found' })
  }
  t.equal((await api(user, 'GET', '/v1/me/channels')).json().channels[0].label, '', 'unchanged')
  t.equal((await api(user, 'DELETE', `/v1/me/channels/${mine.id}`)).statusCode, 204)
  t.equal((await api(user, 'GET', `/v1/me/channels/${mine.id}/deliveries`)).statusCode, 404, 'deleted with its log')
})

t.test('bodies are validated: each kind takes its own destination', async (t) => {
  const { user, channel } = await fixture()
  const bad: [Record<string, unknown>, unknown][] = [
    [{ kind: 'webhook' }, [{ path: ['url'], message: 'is required for a webhook channel' }]],
    [{ kind: 'slack', url: receiver.url('/s'), routingKey: 'k' }, [{ path: ['routingKey'], message: 'is not used by a slack channel' }]],
    [{ kind: 'pagerduty', url: receiver.url('/p') }, [{ path: ['routingKey'], message: 'is required for a pagerduty channel' }, { path: ['url'], message: 'is not used by a pagerduty channel' }]],
    [{ kind: 'email', url: receiver.url('/e') }, undefined],
    [{ kind: 'webhook', url: 'ftp://example.com/' }, undefined],
    [{ kind: 'webhook', url: receiver.url('/e'), events: [] }, undefined],
    [{ kind: 'webhook', url: receiver.url('/e'), events: ['alert.snoozed'] }, undefined],
    [{ kind: 'webhook', url: receiver.url('/e'), extra: 1 }, undefined],
  ]
  for (const [body, details] of bad) {
    const res = await api(user, 'POST', '/v1/me/channels', body)
    t.equal(res.statusCode, 400, JSON.stringify(body))
    t.equal(res.json().error, 'validation_failed')
    if (details) t.same(res.json().details, details)
  }
  const pd = await channel({ kind: 'pagerduty', routingKey: 'key-1', events: ['alert.triggered'] })
  const patched = await api(user, 'PATCH', `/v1/me/channels/${pd.id}`, { url: receiver.url('/p') })
  t.equal(patched.statusCode, 400)
  t.equal((await api(user, 'PATCH', `/v1/me/channels/${pd.id}`, {})).statusCode, 400, 'an empty change')
  const changed = await api(user, 'PATCH', `/v1/me/channels/${pd.id}`, { routingKey: 'key-2345-of-thirty-two-characters', label: 'pager', events: ['alert.triggered', 'alert.resolved'] })
  t.match(changed.json(), { routingKey: '…ters', label: 'pager', events: ['alert.triggered', 'alert.resolved'] })
})

t.test('a user has at most 20 channels, also when 25 are asked for at once', async (t) => {
  const { user } = await fixture()
  const answers = await Promise.all(Array.from({ length: 25 }, (_, i) => api(user, 'POST', '/v1/me/channels', { kind: 'webhook', url: receiver.url(`/many/${i}`) })))
  t.same(answers.map((res) => res.statusCode).sort(), [...Array(20).fill(201), ...Array(5).fill(409)])
  t.same(answers.find((res) => res.statusCode === 409)!.json(), { error: 'conflict', reason: 'too_many_channels', message: 'you have 20 notification channels, the most allowed; delete one before adding another' })
  t.equal((await api(user, 'GET', '/v1/me/channels')).json().channels.length, 20)
})

t.test('the delivery log pages with a cursor, newest first', async (t) => {
  const { user, channel } = await fixture()
  const created = await channel({ kind: 'webhook', url: receiver.url(`/paged/${randomId()}`) })
  for (let i = 0; i < 5; i++) await app.notifications.publish(user.id, madeUpEvent())
  const seen: string[] = []
  let cursor: string | null = null
  do {
    const page: { deliveries: { id: string }[]; nextCursor: string | null } = (await api(user, 'GET', `/v1/me/channels/${created.id}/deliveries?limit=2${cursor ? `&cursor=${cursor}` : ''}`)).json()
    t.ok(page.deliveries.length <= 2)
    seen.push(...page.deliveries.map((d) => d.id))
    cursor = page.nextCursor
  } while (cursor)
  t.equal(seen.length, 5)
  t.same(seen, [...seen].sort().reverse(), 'newest first (message ids sort by time)')
  t.equal((await api(user, 'GET', `/v1/me/channels/${created.id}/deliveries?cursor=garbage`)).statusCode, 400)
})

t.test('a delivery whose stored payload is not an event is finished as skipped, saying why', async (t) => {
  const { channel } = await fixture()
  const created = await channel({ kind: 'pagerduty', routingKey: randomId('rk-') })
  const id = newMessageId()
  await app.db.query(`INSERT INTO notification_deliveries (id, channel_id, event, event_key, payload, max_attempts)
    VALUES ($1, $2, 'alert.triggered', $1, '{}', 8)`, [id, created.id])
  t.match(await app.notifications.attempt(id), { outcome: 'skipped', retryInMs: null })
  const { rows } = await app.db.query('SELECT status, last_error, finished_at FROM notification_deliveries WHERE id = $1', [id])
  t.match(rows[0], { status: 'skipped', last_error: 'the stored payload is not a notification event', finished_at: Date })
})
