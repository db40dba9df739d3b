import t from 'tap'
import { TEST_DATABASE_URL, randomId } from '../helpers/env.ts'
import { openPostgres } from '../../src/storage/postgres.ts'
import { AgentsRepository, type AgentChange } from '../../src/storage/agents-repository.ts'
import { KeysRepository, hashSecret, type KeyChange } from '../../src/storage/keys-repository.ts'
import { UsersRepository, type UserChange } from '../../src/storage/users-repository.ts'
import { ModelPricesRepository, type ModelPriceChange } from '../../src/storage/model-prices-repository.ts'

const pool = await openPostgres(TEST_DATABASE_URL)
t.teardown(() => pool.end())
const users = new UsersRepository(pool)
const agents = new AgentsRepository(pool)
const keys = new KeysRepository(pool)
const prices = new ModelPricesRepository(pool)

/** The changes a repository announces, collected. */
function heard<C> (repo: { onChanged (listener: (change: C) => unknown): () => void }): C[] {
  const list: C[] = []
  repo.onChanged((change) => { list.push(change) })
  return list
}

const PRICE = { inputPerMTok: 1, outputPerMTok: 2, cacheReadPerMTok: null, cacheWritePerMTok: null }

t.test('agents: an update announces the fields it set, a delete that it deleted; nothing else is announced', async (t) => {
  const owner = await users.upsertBySubject(randomId('user-'))
  const other = await users.upsertBySubject(randomId('user-'))
  const changes = heard<AgentChange>(agents)
  const first = await agents.resolve(owner.id, randomId('agent-'))
  const second = await agents.resolve(owner.id, randomId('agent-'))
  if (first.kind !== 'ok' || second.kind !== 'ok') throw new Error('resolution failed')
  await agents.recordActivity(new Map([[first.agent.id, { lastSeenAt: Date.now(), framework: 'x' }]]))
  t.same(changes, [], 'creation by resolution and activity are not announced')

  const name = randomId('renamed-')
  await agents.update(owner.id, first.agent.id, { displayName: name })
  await agents.update(owner.id, first.agent.id, { isPublic: true, displayName: undefined })
  const held = randomId('n-')
  await agents.update(owner.id, first.agent.id, { displayName: held, isPublic: false })
  t.equal(await agents.update(owner.id, second.agent.id, { displayName: held }), 'taken')
  t.equal(await agents.update(other.id, first.agent.id, { displayName: randomId('n-') }), null, 'another owner\'s agent')
  await agents.update(owner.id, first.agent.id, {})
  t.ok(await agents.softDelete(owner.id, second.agent.id))
  t.notOk(await agents.softDelete(owner.id, second.agent.id), 'already deleted')
  t.same(changes, [
    { kind: 'updated', ownerId: owner.id, agentId: first.agent.id, fields: ['displayName'] },
    { kind: 'updated', ownerId: owner.id, agentId: first.agent.id, fields: ['isPublic'] },
    { kind: 'updated', ownerId: owner.id, agentId: first.agent.id, fields: ['displayName', 'isPublic'] },
    { kind: 'deleted', ownerId: owner.id, agentId: second.agent.id },
  ], 'a taken name, another owner\'s agent, an empty change and a second delete change nothing and are not announced')
})

t.test('a write returns only once its listeners are done', async (t) => {
  const owner = await users.upsertBySubject(randomId('user-'))
  const repo = new AgentsRepository(pool)
  let done = false
  repo.onChanged(async () => {
    await new Promise((resolve) => setTimeout(resolve, 50))
    done = true
  })
  const agent = await repo.resolve(owner.id, randomId('agent-'))
  if (agent.kind !== 'ok') throw new Error('resolution failed')
  await repo.softDelete(owner.id, agent.agent.id)
  t.ok(done)
})

t.test('a listener that fails fails the call, after the write', async (t) => {
  const owner = await users.upsertBySubject(randomId('user-'))
  const repo = new KeysRepository(pool)
  repo.onChanged(() => { throw new Error('redis down') })
  const key = await repo.create(owner.id, 'k', null)
  await t.rejects(repo.revoke(owner.id, key.id), /redis down/)
  t.equal((await repo.findByHash(hashSecret(key.secret)))?.revoked, true, 'the key is revoked all the same')
})

t.test('keys: a revocation is announced with the secret\'s hash; a new key and its use are not', async (t) => {
  const owner = await users.upsertBySubject(randomId('user-'))
  const changes = heard<KeyChange>(keys)
  const key = await keys.create(owner.id, 'k', null)
  await keys.touch(new Map([[key.id, Date.now()]]))
  t.same(changes, [])
  t.equal(await keys.revoke(owner.id, key.id), hashSecret(key.secret))
  t.equal(await keys.revoke(owner.id, key.id), null, 'already revoked')
  t.same(changes, [{ kind: 'revoked', userId: owner.id, keyId: key.id, secretHash: hashSecret(key.secret) }])
})

t.test('users: a handle or tier change is announced with the subject; a first sight and usage are not', async (t) => {
  const changes = heard<UserChange>(users)
  const subject = randomId('user-')
  const user = await users.upsertBySubject(subject)
  await users.addUsage(new Map([[user.id, new Map([['2026-05-01', 1]])]]))
  t.same(changes, [])
  const handle = randomId('h_')
  await users.updateHandle(user.id, handle)
  const rival = await users.upsertBySubject(randomId('user-'))
  t.equal(await users.updateHandle(rival.id, handle.toUpperCase()), 'taken')
  await users.updateTier(subject, 'pro', 100)
  t.equal(await users.updateTier(randomId('nobody-'), 'pro', null), null)
  await users.setTier(subject, 'free', null)
  t.same(changes, [
    { userId: user.id, subject, fields: ['handle'] },
    { userId: user.id, subject, fields: ['tier'] },
    { userId: user.id, subject, fields: ['tier'] },
  ])
})

t.test('model prices: a put and a removal are announced; a refused put and a removal of nothing are not', async (t) => {
  const owner = await users.upsertBySubject(randomId('user-'))
  const changes = heard<ModelPriceChange>(prices)
  await prices.put(owner.id, 'm1', PRICE, 1)
  t.equal(await prices.put(owner.id, 'm2', PRICE, 1), null, 'one more than allowed')
  t.ok(await prices.remove(owner.id, 'm1'))
  t.notOk(await prices.remove(owner.id, 'm1'))
  t.same(changes, [{ kind: 'put', userId: owner.id, model: 'm1' }, { kind: 'removed', userId: owner.id, model: 'm1' }])
})
