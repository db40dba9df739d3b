import t from 'tap'
import { Writable } from 'node:stream'
import { Webhook } from 'standardwebhooks'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../../../src/app.ts'
import { alertEvent } from '../../../../src/domain/notifications.ts'
import { keyId, newKeyText } from '../../../../src/domain/secret-box.ts'
import { newSigningSecret } from '../../../../src/domain/standard-webhooks.ts'
import { buildTestApp, newUser, randomId, testConfig, TEST_SECRETS_KEY, type TestUser } from '../../../helpers/app.ts'
import { ownTestDatabase } from '../../../helpers/env.ts'
import { startReceiver, until } from '../../../helpers/receiver.ts'

// Credentials of notification channels are encrypted in Postgres (docs/operations.md#secrets-at-rest).
// Receivers listen on the loopback, so the instances here allow private networks.
const receiver = await startReceiver(t)
const PAGERDUTY = '/pagerduty-secrets/v2/enqueue'
// A Postgres database of its own (ownTestDatabase): this file runs a worker, whose anomaly tick
// would evaluate other files' alerts against this file's ClickHouse (test/helpers/env.ts).
const DATABASE_URL = ownTestDatabase('channels_secrets')
const settings = (extra: Record<string, string> = {}) => ({ NOTIFY_ALLOW_PRIVATE_NETWORKS: '1', PAGERDUTY_EVENTS_URL: receiver.url(PAGERDUTY), DATABASE_URL, ...extra })
const app = await buildTestApp(t, settings({ ROLES: 'api,worker' }))

const keyIdOf = (text: string) => keyId(Buffer.from(text, 'base64'))

const api = (on: FastifyInstance, user: TestUser, method: 'GET' | 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>) =>
  on.inject({ method, url, headers: user.auth, ...(payload ? { payload } : {}) })

async function create (on: FastifyInstance, user: TestUser, body: Record<string, unknown>) {
  const res = await api(on, user, 'POST', '/v1/me/channels', body)
  if (res.statusCode !== 201) throw new Error(`POST /v1/me/channels: ${res.statusCode} ${res.body}`)
  return res.json()
}

/** The channel's columns as Postgres holds them. */
async function stored (id: string): Promise<{ url: string | null; routing_key: string | null; signing_secret: string | null }> {
  const { rows } = await app.db.query('SELECT url, routing_key, signing_secret FROM notification_channels WHERE id = $1', [id])
  return rows[0]
}

/** Sends a test notification through `on` (which must run the worker) and waits for its delivery to finish. */
async function tested (on: FastifyInstance, user: TestUser, channelId: string) {
  const res = await api(on, user, 'POST', `/v1/me/channels/${channelId}/test`)
  if (res.statusCode !== 202) throw new Error(`test: ${res.statusCode} ${res.body}`)
  return finished(on, user, channelId, res.json().id)
}

const finished = (on: FastifyInstance, user: TestUser, channelId: string, deliveryId: string) =>
  until(async () => {
    const list = (await api(on, user, 'GET', `/v1/me/channels/${channelId}/deliveries`)).json().deliveries
    const d = list.find((x: { id: string }) => x.id === deliveryId)
    return d && !['pending', 'retrying'].includes(d.status) && d
  }, 15_000, 'the delivery to finish')

function madeUpEvent () {
  const at = new Date().toISOString()
  const alert = {
    id: randomId('alert-'), rule: 'error_rate', severity: 'warning' as const, status: 'active', message: 'made up', figures: {},
    triggerCount: 1, createdAt: at, lastTriggeredAt: at, lastSeenFiringAt: at, clearedAt: null,
  }
  return alertEvent('opened', alert, { id: 'cagent', displayName: 'agent' }, 'https://dash.example.com', new Date())
}

/** An instance whose warnings and errors are kept, to read its log lines. */
async function loggedApp (overrides: Record<string, string>) {
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({
    write (chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line))
      done()
    },
  })
  const instance = await buildApp(testConfig(overrides), { logger: { level: 'warn', stream } })
  t.teardown(() => instance.close())
  await instance.ready()
  return { instance, lines }
}

t.test('Postgres holds no credential in clear; deliveries still sign and arrive', async (t) => {
  const user = await newUser(app)
  const hookPath = `/secrets-hook/${randomId()}`
  const slackPath = `/secrets-slack/services/${randomId()}`
  const routingKey = randomId('routing-key-')
  const hook = await create(app, user, { kind: 'webhook', url: receiver.url(hookPath) })
  const slack = await create(app, user, { kind: 'slack', url: receiver.url(slackPath) })
  const pd = await create(app, user, { kind: 'pagerduty', routingKey })

  const prefix = `enc:v1:${keyIdOf(TEST_SECRETS_KEY)}:`
  const rows = { hook: await stored(hook.id), slack: await stored(slack.id), pd: await stored(pd.id) }
  t.ok(rows.hook.url!.startsWith(prefix) && rows.hook.signing_secret!.startsWith(prefix), 'the webhook URL and signing secret are encrypted')
  t.ok(rows.slack.url!.startsWith(prefix), 'the Slack URL is encrypted')
  t.ok(rows.pd.routing_key!.startsWith(prefix), 'the routing key is encrypted')
  const raw = JSON.stringify(rows)
  for (const plain of [hookPath, hook.secret, hook.secret.slice('whsec_'.length), slackPath, routingKey, '127.0.0.1']) t.notOk(raw.includes(plain), `${plain} is not stored`)

  t.match(await tested(app, user, hook.id), { status: 'delivered', attempts: 1 })
  const [req] = receiver.at(hookPath)
  t.match(new Webhook(hook.secret).verify(req!.body, req!.headers as Record<string, string>), { type: 'channel.test' }, 'signed with the secret shown at creation')
  t.match(await tested(app, user, slack.id), { status: 'delivered' })
  t.equal(receiver.at(slackPath).length, 1, 'the Slack URL is used as given')
  t.match(await tested(app, user, pd.id), { status: 'delivered' })
  t.ok(receiver.at(PAGERDUTY).some((r) => JSON.parse(r.body).routing_key === routingKey), 'PagerDuty gets the routing key as given')
  t.equal((await api(app, user, 'GET', '/v1/me/channels')).json().channels.find((c: { id: string }) => c.id === hook.id).url, receiver.url(hookPath), 'reads show the webhook URL as given')
})

t.test('the schema says the credentials are sealed, not kept in clear', async (t) => {
  const { rows } = await app.db.query(`SELECT a.attname AS column, col_description(a.attrelid, a.attnum) AS comment
    FROM pg_attribute a WHERE a.attrelid = 'notification_channels'::regclass AND a.attname IN ('url', 'routing_key', 'signing_secret') ORDER BY 1`)
  t.equal(rows.length, 3)
  for (const row of rows) {
    t.match(row.comment, /sealed at rest/, `${row.column}: says how it is kept`)
    t.notMatch(row.comment, /in clear/, `${row.column}: never "in clear"`)
  }
})

t.test('rotation: a new SECRETS_KEY with the old one in SECRETS_PREVIOUS_KEYS re-encrypts at start; then the old key can go', async (t) => {
  const oldKey = newKeyText()
  const newKey = newKeyText()
  const before = await buildTestApp(t, settings({ SECRETS_KEY: oldKey }))
  const user = await newUser(before)
  const path = `/rotated/${randomId()}`
  const hook = await create(before, user, { kind: 'webhook', url: receiver.url(path) })
  const routingKey = randomId('rotated-key-')
  const pd = await create(before, user, { kind: 'pagerduty', routingKey })
  t.ok((await stored(hook.id)).signing_secret!.startsWith(`enc:v1:${keyIdOf(oldKey)}:`))

  // The operator sets the new key, moves the old one to SECRETS_PREVIOUS_KEYS and restarts.
  await buildTestApp(t, settings({ SECRETS_KEY: newKey, SECRETS_PREVIOUS_KEYS: `${newKeyText()}, ${oldKey}` }))
  for (const id of [hook.id, pd.id]) {
    const row = await stored(id)
    for (const value of [row.url, row.routing_key, row.signing_secret].filter((v) => v !== null)) {
      t.ok(value!.startsWith(`enc:v1:${keyIdOf(newKey)}:`), 'encrypted again with the new key')
    }
  }

  // Then the old key is dropped: everything still works with the new key alone.
  const after = await buildTestApp(t, settings({ SECRETS_KEY: newKey, ROLES: 'api,worker' }))
  const [listed] = (await api(after, user, 'GET', '/v1/me/channels')).json().channels.filter((c: { kind: string }) => c.kind === 'pagerduty')
  t.equal(listed.routingKey, `…${routingKey.slice(-4)}`)
  t.match(await tested(after, user, hook.id), { status: 'delivered', lastError: null })
  const [req] = receiver.at(path)
  t.ok(new Webhook(hook.secret).verify(req!.body, req!.headers as Record<string, string>), 'the signing secret survived the rotation')
})

t.test('with a wrong key, deliveries fail with the reason and a log line naming the channel; nothing crashes', async (t) => {
  const user = await newUser(app)
  const path = `/wrong-key/${randomId()}`
  const hook = await create(app, user, { kind: 'webhook', url: receiver.url(path) })
  const storedBefore = await stored(hook.id)
  const { instance: wrong, lines } = await loggedApp(settings({ SECRETS_KEY: newKeyText(), ROLES: 'api,worker' }))

  const list = await api(wrong, user, 'GET', '/v1/me/channels')
  t.equal(list.statusCode, 200, 'reads still answer')
  t.match(list.json().channels[0], { id: hook.id, url: null, enabled: true }, 'what cannot be decrypted reads as null')

  const reason = new RegExp(`^the channel cannot be used: its URL cannot be decrypted: it was encrypted with key ${keyIdOf(TEST_SECRETS_KEY)}, which is neither SECRETS_KEY nor in SECRETS_PREVIOUS_KEYS; ` +
    'its signing secret cannot be decrypted')
  t.match(await tested(wrong, user, hook.id), { status: 'failed', attempts: 1, lastStatusCode: null, lastError: reason })
  const [delivery] = await wrong.notifications.publish(user.id, madeUpEvent())
  t.match(await finished(wrong, user, hook.id, delivery!.id), { status: 'failed', attempts: 1, nextAttemptAt: null, lastError: reason }, 'failed at once, not retried')
  t.equal(receiver.at(path).length, 0, 'nothing was sent')
  t.match((await api(wrong, user, 'GET', '/v1/me/channels')).json().channels[0], { enabled: true, disabledReason: null }, 'a key problem does not disable the channel')
  t.ok(lines.some((l) => l.level === 50 && l.channel === hook.id && /cannot be decrypted/.test(String(l.msg))), 'the log names the channel')
  t.same(await stored(hook.id), storedBefore, 'what the wrong key cannot open is left as it is')

  // The instance still serves: the owner's channels on the right key deliver.
  t.match(await tested(app, user, hook.id), { status: 'delivered' })
})

t.test('a value copied to another row does not decrypt there', async (t) => {
  const user = await newUser(app)
  const a = await create(app, user, { kind: 'slack', url: receiver.url(`/copy-a/services/${randomId()}`) })
  const b = await create(app, user, { kind: 'slack', url: receiver.url(`/copy-b/services/${randomId()}`) })
  await app.db.query('UPDATE notification_channels SET url = (SELECT url FROM notification_channels WHERE id = $1) WHERE id = $2', [a.id, b.id])
  t.match(await tested(app, user, b.id), { status: 'failed', lastError: /its URL cannot be decrypted: it does not decrypt with key/ })
})

t.test('values stored in clear before encryption are read, and encrypted at the next start', async (t) => {
  const user = await newUser(app)
  const path = `/legacy/${randomId()}`
  const slackPath = `/legacy-slack/services/${randomId()}`
  const secret = newSigningSecret()
  const routingKey = randomId('legacy-routing-')
  const hook = await create(app, user, { kind: 'webhook', url: receiver.url(`/placeholder/${randomId()}`) })
  const slack = await create(app, user, { kind: 'slack', url: receiver.url(`/placeholder/${randomId()}`) })
  const pd = await create(app, user, { kind: 'pagerduty', routingKey: 'placeholder-placeholder' })
  // As the release before encryption stored them (one row half in clear, as a change of its URL by that release leaves it).
  await app.db.query('UPDATE notification_channels SET url = $2, signing_secret = $3 WHERE id = $1', [hook.id, receiver.url(path), secret])
  await app.db.query('UPDATE notification_channels SET url = $2 WHERE id = $1', [slack.id, receiver.url(slackPath)])
  await app.db.query('UPDATE notification_channels SET routing_key = $2 WHERE id = $1', [pd.id, routingKey])

  const listed = (await api(app, user, 'GET', '/v1/me/channels')).json().channels
  t.equal(listed.find((c: { id: string }) => c.id === hook.id).url, receiver.url(path), 'a URL in clear reads as it is')
  t.equal(listed.find((c: { id: string }) => c.id === pd.id).routingKey, `…${routingKey.slice(-4)}`)
  t.match(await tested(app, user, hook.id), { status: 'delivered' })
  t.ok(new Webhook(secret).verify(receiver.at(path)[0]!.body, receiver.at(path)[0]!.headers as Record<string, string>), 'signed with the secret in clear')

  // The next start encrypts them, each row in one statement.
  await buildTestApp(t, settings())
  const prefix = `enc:v1:${keyIdOf(TEST_SECRETS_KEY)}:`
  const rows = [await stored(hook.id), await stored(slack.id), await stored(pd.id)]
  for (const row of rows) for (const v of [row.url, row.routing_key, row.signing_secret].filter((x) => x !== null)) t.ok(v!.startsWith(prefix), 'encrypted')
  t.notOk(JSON.stringify(rows).includes(secret.slice('whsec_'.length)) || JSON.stringify(rows).includes(routingKey), 'nothing in clear is left')

  // Idempotent: a second run changes nothing.
  await app.notifications.sealStoredSecrets(app.db)
  t.same([await stored(hook.id), await stored(slack.id), await stored(pd.id)], rows)
  t.match(await tested(app, user, hook.id), { status: 'delivered' })
  t.ok(new Webhook(secret).verify(receiver.at(path)[1]!.body, receiver.at(path)[1]!.headers as Record<string, string>), 'still signed with the same secret')
  t.match(await tested(app, user, slack.id), { status: 'delivered' })
  t.equal(receiver.at(slackPath).length, 1)
})

t.test('a stored URL that does not parse fails its deliveries at once, saying why', async (t) => {
  const user = await newUser(app)
  const hook = await create(app, user, { kind: 'webhook', url: receiver.url(`/unparsable/${randomId()}`) })
  // As stored before URLs were parsed on the way in.
  await app.db.query('UPDATE notification_channels SET url = $2 WHERE id = $1', [hook.id, app.secrets.seal('http://[/', `notification_channels.url:${hook.id}`)])
  t.match(await tested(app, user, hook.id), { status: 'failed', attempts: 1, lastStatusCode: null, lastError: 'the destination URL is not a valid URL' })
  const [delivery] = await app.notifications.publish(user.id, madeUpEvent())
  t.match(await finished(app, user, hook.id, delivery!.id), { status: 'failed', attempts: 1, nextAttemptAt: null, lastError: 'the destination URL is not a valid URL' }, 'not retried')
  const read = await api(app, user, 'GET', '/v1/me/channels')
  t.equal(read.statusCode, 200)
  t.match(read.json().channels[0], { url: 'http://[/', enabled: true })
})

t.test('regression: a URL that passes the pattern but does not parse is a 400, on create and on change', async (t) => {
  const strict = await buildTestApp(t, { DATABASE_URL })
  for (const on of [app, strict]) {
    const user = await newUser(on)
    const ok = await create(on, user, { kind: 'pagerduty', routingKey: 'k'.repeat(32) })
    const hook = await create(app, user, { kind: 'webhook', url: 'https://hooks.example.com/x' })
    for (const url of ['http://[/', 'http://:80', 'https://exa mple.com', 'http://999.1.1.1/']) {
      for (const [method, path, body] of [
        ['POST', '/v1/me/channels', { kind: 'webhook', url }],
        ['POST', '/v1/me/channels', { kind: 'slack', url }],
        ['PATCH', `/v1/me/channels/${hook.id}`, { url }],
      ] as const) {
        const res = await api(on, user, method, path, body)
        t.equal(res.statusCode, 400, `${method} ${url}`)
        t.equal(res.json().error, 'validation_failed')
        t.match(res.json(), url.includes(' ') ? { details: [{ path: ['url'] }] } : { message: 'url is not a valid URL', details: [{ path: ['url'], message: 'is not a valid URL' }] })
      }
    }
    t.equal((await api(on, user, 'GET', '/v1/me/channels')).json().channels.length, 2, 'nothing was stored')
    t.ok(ok.id)
  }
})
