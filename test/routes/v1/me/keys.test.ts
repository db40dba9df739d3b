import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent } from '../../../helpers/app.ts'
import { hashSecret } from '../../../../src/storage/keys-repository.ts'

const prefix = `test:${randomId()}:`
const app = await buildTestApp(t, { REDIS_PREFIX: prefix })

t.test('creating a key shows the secret once and stores only its hash', async (t) => {
  const user = await newUser(app)
  const res = await app.inject({ method: 'POST', url: '/v1/me/keys', headers: user.auth, payload: { label: 'ci' } })
  t.equal(res.statusCode, 201)
  const body = res.json()
  t.match(body, { id: String, label: 'ci', keyPrefix: String, secret: /^vk_[A-Za-z0-9_-]{43,}$/ })
  t.ok(Buffer.from(body.secret.slice(3), 'base64url').length >= 32, 'at least 32 random bytes')
  t.ok(body.secret.startsWith(body.keyPrefix))
  const { rows } = await app.db.query('SELECT * FROM api_keys WHERE id = $1', [body.id])
  t.equal(rows[0].secret_sha256, hashSecret(body.secret))
  t.notOk(JSON.stringify(rows[0]).includes(body.secret.slice(12)), 'the secret is nowhere in the row')

  const list = await app.inject({ method: 'GET', url: '/v1/me/keys', headers: user.auth })
  t.equal(list.statusCode, 200)
  const [listed] = list.json().keys
  t.same(Object.keys(listed).sort(), ['agentId', 'allowedOrigins', 'createdAt', 'id', 'keyPrefix', 'kind', 'label', 'lastUsedAt'])
  t.notOk(list.body.includes(body.secret.slice(12)), 'the list never shows the secret')
})

t.test('key bodies are validated; binding needs an agent the caller owns', async (t) => {
  const user = await newUser(app)
  for (const payload of [{}, { label: '' }, { label: 'x', extra: 1 }, { label: 'x', agentId: 'not-a-cuid' }]) {
    const res = await app.inject({ method: 'POST', url: '/v1/me/keys', headers: user.auth, payload })
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    t.equal(res.json().error, 'validation_failed')
  }
  const other = await newUser(app)
  const theirAgent = (await sendEvent(app, (await other.createKey()).secret, { agentId: 'theirs' })).json().agentId
  const res = await app.inject({ method: 'POST', url: '/v1/me/keys', headers: user.auth, payload: { label: 'x', agentId: theirAgent } })
  t.equal(res.statusCode, 404, 'another user\'s agent behaves like a missing one')
})

t.test('keys are scoped to their owner', async (t) => {
  const alice = await newUser(app)
  const bob = await newUser(app)
  const key = await alice.createKey()
  const list = await app.inject({ method: 'GET', url: '/v1/me/keys', headers: bob.auth })
  t.same(list.json().keys, [], 'bob sees none of alice\'s keys')
  const del = await app.inject({ method: 'DELETE', url: `/v1/me/keys/${key.id}`, headers: bob.auth })
  t.equal(del.statusCode, 404)
  t.equal((await sendEvent(app, key.secret, { agentId: 'a' })).statusCode, 202, 'the key still works')
  const missing = await app.inject({ method: 'DELETE', url: '/v1/me/keys/nope', headers: alice.auth })
  t.equal(missing.statusCode, 404)
  t.same(missing.json(), { error: 'not_found' })
})
