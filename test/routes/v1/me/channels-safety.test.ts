import t from 'tap'
import { buildTestApp, newUser, randomId, type TestUser } from '../../../helpers/app.ts'
import { ownTestDatabase } from '../../../helpers/env.ts'
import { startReceiver, until } from '../../../helpers/receiver.ts'
import { alertEvent } from '../../../../src/domain/notifications.ts'

// Without NOTIFY_ALLOW_PRIVATE_NETWORKS, destinations that resolve to non-public addresses are refused:
// at creation, and at delivery on the address the connection would use. The receiver is a real
// server on the loopback: it counts connections, to show that none is ever made.
const receiver = await startReceiver(t)
const prefix = `test:${randomId()}:`
// A Postgres database of its own (ownTestDatabase): this file runs a worker, whose anomaly tick
// would evaluate other files' alerts against this file's ClickHouse (test/helpers/env.ts).
const DATABASE_URL = ownTestDatabase('channels_safety')
// The default: refuses private destinations, and runs the notify worker.
const strict = await buildTestApp(t, { REDIS_PREFIX: prefix, ROLES: 'api,worker', DATABASE_URL })
// Another instance on the same queues, set up for local use: it lets channels be created towards the
// loopback (as a name that resolved to a public address at creation would), but it runs no worker,
// so the strict instance makes every attempt.
const lenient = await buildTestApp(t, { REDIS_PREFIX: prefix, NOTIFY_ALLOW_PRIVATE_NETWORKS: '1', DATABASE_URL })

const post = (app: typeof strict, user: TestUser, url: string, payload?: Record<string, unknown>) =>
  app.inject({ method: 'POST', url, headers: user.auth, ...(payload ? { payload } : {}) })

t.test('creating a channel towards a non-public address is refused', async (t) => {
  const user = await newUser(strict)
  const before = receiver.connections
  for (const url of [
    receiver.url('/inside'),
    `http://localhost:${receiver.port}/inside`,
    `http://[::1]:${receiver.port}/`,
    `http://[::ffff:127.0.0.1]:${receiver.port}/`,
    'http://169.254.169.254/latest/meta-data/',
    'http://10.0.0.7/hook',
    'http://0.0.0.0/',
  ]) {
    const res = await post(strict, user, '/v1/me/channels', { kind: 'webhook', url })
    t.equal(res.statusCode, 400, url)
    t.match(res.json(), {
      error: 'destination_refused',
      message: /^refused: .* (loopback|link-local|private|unspecified) address, not on the public internet; NOTIFY_ALLOW_PRIVATE_NETWORKS=1 allows such destinations \(local use and tests only\)$/,
    }, 'the refusal names the setting that lifts it')
  }
  const existing = (await post(lenient, user, '/v1/me/channels', { kind: 'webhook', url: receiver.url('/ok') })).json()
  const patch = await strict.inject({ method: 'PATCH', url: `/v1/me/channels/${existing.id}`, headers: user.auth, payload: { url: 'http://192.168.1.1/' } })
  t.equal(patch.statusCode, 400, 'nor can a channel be pointed there')
  t.equal(receiver.connections, before, 'no connection was made')
})

t.test('a refusal names the kind of address in words, with its article', async (t) => {
  const user = await newUser(strict)
  for (const [url, words] of <const>[
    ['http://0.0.0.0/', 'is an unspecified address'],
    ['http://[64:ff9b::a00:1]/', 'is a NAT64 (RFC 6052) address'],
    ['http://[fd00::1]/', 'is a unique-local address'],
  ]) {
    const res = await post(strict, user, '/v1/me/channels', { kind: 'webhook', url })
    t.equal(res.statusCode, 400, url)
    t.match(res.json().message, `${words}, not on the public internet`, url)
  }
})

t.test('at delivery the resolved address is checked again: refused, no connection, the reason in the log', async (t) => {
  const user = await newUser(lenient)
  const before = { connections: receiver.connections, requests: receiver.received.length }
  for (const url of [receiver.url('/inside'), `http://localhost:${receiver.port}/inside`]) {
    const channel = (await post(lenient, user, '/v1/me/channels', { kind: 'webhook', url })).json()
    const test = await post(lenient, user, `/v1/me/channels/${channel.id}/test`)
    t.equal(test.statusCode, 202)
    const delivery = await until(async () => {
      const [d] = (await strict.inject({ url: `/v1/me/channels/${channel.id}/deliveries`, headers: user.auth })).json().deliveries
      return d.status === 'failed' && d
    }, 15_000, 'the attempt')
    t.match(delivery, {
      attempts: 1,
      lastStatusCode: null,
      lastResponse: null,
      lastError: /^refused: (127\.0\.0\.1 is|localhost resolves to (127\.0\.0\.1|::1),) a loopback address, not on the public internet; NOTIFY_ALLOW_PRIVATE_NETWORKS=1 allows/,
    }, url)
  }
  t.equal(receiver.connections, before.connections, 'no connection was made')
  t.equal(receiver.received.length, before.requests)
})

t.test('a delivery (not a test) to a refused destination fails at once with the reason, without retries', async (t) => {
  const user = await newUser(lenient)
  const before = receiver.connections
  const channel = (await post(lenient, user, '/v1/me/channels', { kind: 'webhook', url: receiver.url('/inside-for-real') })).json()
  const at = new Date().toISOString()
  const alert = { id: randomId('alert-'), rule: 'error_rate', severity: 'warning' as const, status: 'active', message: 'm', figures: {}, triggerCount: 1, createdAt: at, lastTriggeredAt: at, lastSeenFiringAt: at, clearedAt: null }
  const [published] = await lenient.notifications.publish(user.id, alertEvent('opened', alert, { id: 'cagent', displayName: 'a' }, 'https://dash.example.com', new Date()))
  const delivery = await until(async () => {
    const [d] = (await strict.inject({ url: `/v1/me/channels/${channel.id}/deliveries`, headers: user.auth })).json().deliveries
    return d.status !== 'pending' && d
  }, 15_000, 'the attempt')
  t.match(delivery, { id: published!.id, status: 'failed', attempts: 1, maxAttempts: 8, nextAttemptAt: null, lastError: /^refused: 127\.0\.0\.1 is a loopback address.*NOTIFY_ALLOW_PRIVATE_NETWORKS=1/ })
  t.equal(receiver.connections, before, 'no connection was made')
  const [listed] = (await strict.inject({ url: '/v1/me/channels', headers: user.auth })).json().channels
  t.match(listed, { enabled: true, disabledReason: null }, 'the channel is not disabled by one refusal')
})

t.test('a destination name that does not resolve in time is not waited on (nor refused: delivery checks again)', async (t) => {
  const { addressesOf } = await import('../../../../src/services/notification-sender.ts')
  // A resolver that never answers (as a name server that drops queries): the check still ends.
  const silent = () => {}
  t.same(await addressesOf('hangs.example', 50, silent), [])
  t.ok((await addressesOf('localhost', 2000)).includes('127.0.0.1'), 'a name that resolves gives its addresses')
})
