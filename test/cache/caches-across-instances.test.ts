import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, newUser, randomId, sendEvent, TEST_DATA_DIR, TEST_DATABASE_URL } from '../helpers/app.ts'
import { TS_LOADER_ARGS } from '../helpers/ts-loader.ts'

// Two instances sharing one Redis (same prefix) and one Postgres, as behind a load balancer. No
// periodic side-effect flush: it would add Postgres queries of its own.
const prefix = `test:${randomId()}:`
const settings = { REDIS_PREFIX: prefix, ACTIVITY_FLUSH_MS: '60000' }
const a = await buildTestApp(t, settings)
const b = await buildTestApp(t, settings)

/** Resolves once `app` has been told over the bus to drop `scope` from its `cache` (key or agent). */
function told (app: FastifyInstance, cache: 'key' | 'agent', scope: string): Promise<void> {
  return new Promise((resolve) => app.bus.on(`cache-${cache}`, (id) => {
    if (id === scope) resolve()
  }))
}

t.test('a second instance answers a key and an agent from Redis without a Postgres query', async (t) => {
  const user = await newUser(a)
  const key = await user.createKey()
  const before = a.pgQueries
  t.equal((await sendEvent(a, key.secret, { agentId: 'shared-bot' })).statusCode, 202)
  t.ok(a.pgQueries > before, 'the first instance read Postgres')
  const queries = b.pgQueries
  const res = await sendEvent(b, key.secret, { agentId: 'shared-bot' })
  t.equal(res.statusCode, 202)
  t.equal(b.pgQueries, queries, 'the second instance sent no query to Postgres')
})

t.test('revoking a key on one instance makes another refuse it at once', async (t) => {
  const user = await newUser(a)
  const key = await user.createKey()
  t.equal((await sendEvent(b, key.secret, { agentId: 'bot' })).statusCode, 202, 'b has the key cached')
  const { rows } = await a.db.query('SELECT secret_sha256 FROM api_keys WHERE id = $1', [key.id])
  const bTold = told(b, 'key', rows[0].secret_sha256)
  t.equal((await a.inject({ method: 'DELETE', url: `/v1/me/keys/${key.id}`, headers: user.auth })).statusCode, 204)
  await bTold
  for (const [name, app] of [['b', b], ['a', a]] as const) {
    const res = await sendEvent(app, key.secret, { agentId: 'bot' })
    t.equal(res.statusCode, 401, `${name} refuses it`)
    t.same(res.json(), { error: 'unauthorized', reason: 'revoked_key' })
  }
  const list = await b.inject({ method: 'GET', url: '/v1/me/keys', headers: user.auth })
  t.notOk(list.json().keys.some((k: { id: string }) => k.id === key.id), 'a revoked key is no longer listed')
})

t.test('renaming or deleting an agent on one instance is seen by another at once', async (t) => {
  const user = await newUser(a)
  const key = await user.createKey()
  const other = await newUser(a)
  const otherKey = await other.createKey()
  const first = await sendEvent(a, key.secret, { agentId: 'old-name' })
  const agentId = first.json().agentId
  t.equal((await sendEvent(b, key.secret, { agentId: 'old-name' })).json().agentId, agentId, 'b has the resolution cached')
  const otherAgent = (await sendEvent(b, otherKey.secret, { agentId: 'old-name' })).json().agentId

  let bTold = told(b, 'agent', user.id)
  const renamed = await a.inject({ method: 'PATCH', url: `/v1/me/agents/${agentId}`, headers: user.auth, payload: { displayName: 'new-name' } })
  t.equal(renamed.statusCode, 200)
  await bTold
  t.equal((await sendEvent(b, key.secret, { agentId: 'new-name' })).json().agentId, agentId, 'the new name resolves')
  const reused = await sendEvent(b, key.secret, { agentId: 'old-name' })
  t.equal(reused.statusCode, 202)
  t.not(reused.json().agentId, agentId, 'the old name is free again: it names a new agent')
  const queries = b.pgQueries
  t.equal((await sendEvent(b, otherKey.secret, { agentId: 'old-name' })).json().agentId, otherAgent)
  t.equal(b.pgQueries, queries, 'another owner\'s cached resolutions were kept')

  bTold = told(b, 'agent', user.id)
  t.equal((await a.inject({ method: 'DELETE', url: `/v1/me/agents/${agentId}`, headers: user.auth })).statusCode, 204)
  await bTold
  const gone = await sendEvent(b, key.secret, { agentId: 'new-name' })
  t.equal(gone.statusCode, 410)
  t.same(gone.json(), { error: 'agent_deleted' })
})

t.test('npm run user:tier reaches running instances at once', async (t) => {
  const user = await newUser(a)
  const key = await user.createKey()
  // Ten events at 60/min: the bucket stays non-empty for ten seconds, longer than the command takes.
  const sent = await Promise.all(Array.from({ length: 10 }, () => sendEvent(b, key.secret, { agentId: 'bot' })))
  t.same(sent.map((r) => r.statusCode), Array(10).fill(202), 'b has the key (free tier, 60/min) cached')
  const { rows } = await a.db.query('SELECT secret_sha256 FROM api_keys WHERE id = $1', [key.id])
  const bTold = told(b, 'key', rows[0].secret_sha256)
  const root = fileURLToPath(new URL('../..', import.meta.url))
  const { stderr } = await promisify(execFile)(process.execPath, [...TS_LOADER_ARGS, 'src/cli/user-tier.ts', user.subject, 'free', '--burst', '1'], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL, DATA_DIR: TEST_DATA_DIR, REDIS_PREFIX: prefix },
  })
  t.notMatch(stderr, /no running instance listens/, 'the instances under the same prefix heard it')
  await bTold
  // What is left of the bucket leaves no room under a burst of 1/min; under the old 60/min it would.
  const res = await sendEvent(b, key.secret, { agentId: 'bot' })
  t.equal(res.statusCode, 429, 'b applies the new burst')
})
