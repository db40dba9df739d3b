import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent, shipped } from '../helpers/app.ts'
import { until } from '../helpers/receiver.ts'

// Every write here goes to the repository itself, not through a route: the caches must hear of it
// from the repository that changed, whoever called it.
const app = await buildTestApp(t, { REDIS_PREFIX: `test:${randomId()}:` })

t.test('a key revoked through its repository is refused at once', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  t.equal((await sendEvent(app, key.secret, { agentId: 'a' })).statusCode, 202, 'the key is cached')
  t.ok(await app.keys.revoke(user.id, key.id))
  const res = await sendEvent(app, key.secret, { agentId: 'a' })
  t.equal(res.statusCode, 401)
  t.equal(res.json().reason, 'revoked_key')
})

t.test('an agent renamed through its repository no longer resolves by its old name', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const old = randomId('bot-')
  const first = (await sendEvent(app, key.secret, { agentId: old })).json().agentId
  t.equal((await sendEvent(app, key.secret, { agentId: old })).json().agentId, first, 'the resolution is cached')
  await app.agents.update(user.id, first, { displayName: randomId('renamed-') })
  t.not((await sendEvent(app, key.secret, { agentId: old })).json().agentId, first, 'the old name is free: a new agent')
})

t.test('an agent deleted through its repository is refused at once', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const agentId = (await sendEvent(app, key.secret, { agentId: 'doomed' })).json().agentId
  t.ok(await app.agents.softDelete(user.id, agentId))
  t.equal((await sendEvent(app, key.secret, { agentId: 'doomed' })).statusCode, 410)
})

t.test('a price set through its repository prices the next event', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const model = randomId('house-llm-')
  const send = async () => (await sendEvent(app, key.secret, { agentId: 'priced', model, metadata: { tokensBreakdown: { inputBase: 1_000_000, output: 0 } } })).json().eventId
  const before = await send()
  await app.modelPrices.put(user.id, model, { inputPerMTok: 2, outputPerMTok: 3, cacheReadPerMTok: null, cacheWritePerMTok: null }, 200)
  const after = await send()
  await shipped(app)
  t.equal((await app.events.getRow(user.id, before))!.cost_status, 'unknown_model', 'no price while the empty list was cached')
  t.match(await app.events.getRow(user.id, after), { cost_status: 'user_price' })
})

t.test('a handle set through its repository tells every instance to drop the cached user', async (t) => {
  const user = await newUser(app)
  const told: string[] = []
  app.bus.on('user', (subject) => { told.push(subject) })
  const handle = randomId('h_')
  await app.users.updateHandle(user.id, handle)
  await until(() => told.includes(user.subject), 5_000, 'the message on the bus')
  t.pass('the bus carried the user\'s subject')
  await until(async () => (await app.inject({ method: 'GET', url: '/v1/me', headers: user.auth })).json().handle === handle, 5_000, 'the handle')
  t.pass('GET /v1/me shows the handle')
})
