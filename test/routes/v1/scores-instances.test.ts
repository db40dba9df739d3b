import t from 'tap'
import { buildTestApp, newUser, randomId, shipped } from '../../helpers/app.ts'

// Two instances sharing one Redis (same prefix), one Postgres and one ClickHouse, as behind a load balancer.
const prefix = `test:${randomId()}:`
const app = await buildTestApp(t, { REDIS_PREFIX: prefix })
const other = await buildTestApp(t, { REDIS_PREFIX: prefix })

const post = (on: typeof app, secret: string, payload: unknown, headers: Record<string, string> = {}) =>
  on.inject({ method: 'POST', url: '/v1/scores', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...headers }, payload: JSON.stringify(payload) })

/** Resolves once `on` has been told over the bus to drop the user's cached score configs. */
function told (on: typeof app, userId: string): Promise<void> {
  return new Promise((resolve) => on.bus.on('cache-score-configs', (id) => {
    if (id === userId) resolve()
  }))
}

t.test('a config set on one instance refuses scores on the other at once; its removal too', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  // The other instance caches "no configs" first.
  t.equal((await post(other, key.secret, { traceId, name: 'stars', value: 9 })).statusCode, 202)
  const heard = told(other, user.id)
  t.equal((await app.inject({ method: 'PUT', url: '/v1/me/score-configs/stars', headers: user.auth, payload: { dataType: 'numeric', min: 1, max: 5 } })).statusCode, 200)
  await heard
  const refused = await post(other, key.secret, { traceId, name: 'stars', value: 9 })
  t.equal(refused.statusCode, 400)
  t.equal(refused.json().reason, 'score_config_mismatch')
  const heardAgain = told(other, user.id)
  t.equal((await app.inject({ method: 'DELETE', url: '/v1/me/score-configs/stars', headers: user.auth })).statusCode, 204)
  await heardAgain
  t.equal((await post(other, key.secret, { traceId, name: 'stars', value: 9 })).statusCode, 202)
})

t.test('a score retried on another instance with its Idempotency-Key, or re-sent with its scoreId, is counted once', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const headers = { 'idempotency-key': randomId('k-') }
  const first = await post(app, key.secret, { traceId, name: 'q', value: 1 }, headers)
  const retry = await post(other, key.secret, { traceId, name: 'q', value: 1 }, headers)
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.same(retry.json(), first.json())
  t.equal((await post(app, key.secret, { scoreId: 'x', traceId, name: 'q', value: 2 })).statusCode, 202)
  t.equal((await post(other, key.secret, { scoreId: 'x', traceId, name: 'q', value: 3 })).statusCode, 202)
  await shipped(app)
  await shipped(other)
  for (const on of [app, other]) {
    const { scores } = (await on.inject({ method: 'GET', url: '/v1/me/scores', headers: user.auth })).json()
    t.same(scores.map((s: { value: number }) => s.value).sort(), [1, 3], 'one score per id: the last write wins')
  }
})
