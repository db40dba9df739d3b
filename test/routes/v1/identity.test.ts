import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent } from '../../helpers/app.ts'
import { newCuid } from '../../../src/domain/ids.ts'

// No periodic flush during these tests: they flush by hand to see what was coalesced.
const app = await buildTestApp(t, { ACTIVITY_FLUSH_MS: '60000' })

async function agentRow (id: string) {
  const { rows } = await app.db.query('SELECT * FROM agents WHERE id = $1', [id])
  return rows[0]
}

t.test('resolution order: cuid, then snsName, then displayName, else a new agent', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const name = randomId('bot-')
  const first = await sendEvent(app, key.secret, { agentId: name })
  t.equal(first.statusCode, 202)
  const agentId = first.json().agentId
  t.equal((await agentRow(agentId)).display_name, name, 'a new agent is named by the label')
  t.equal((await agentRow(agentId)).is_public, false, 'agents created by ingestion are private')

  t.equal((await sendEvent(app, key.secret, { agentId: name })).json().agentId, agentId, 'displayName resolves')
  t.equal((await sendEvent(app, key.secret, { agentId })).json().agentId, agentId, 'cuid resolves')
  const sns = randomId('') + '.sol'
  await app.db.query('UPDATE agents SET sns_name = $1 WHERE id = $2', [sns, agentId])
  await app.forgetAgents()
  t.equal((await sendEvent(app, key.secret, { agentId: sns })).json().agentId, agentId, 'snsName resolves')

  const unknownCuid = newCuid()
  const created = await sendEvent(app, key.secret, { agentId: unknownCuid })
  t.equal(created.statusCode, 202)
  t.not(created.json().agentId, unknownCuid, 'an unknown cuid falls through to a new agent named by it')
  t.equal((await agentRow(created.json().agentId)).display_name, unknownCuid)
})

t.test('a user can never write to another user\'s agent', async (t) => {
  const alice = await newUser(app)
  const bob = await newUser(app)
  const aliceKey = await alice.createKey()
  const bobKey = await bob.createKey()
  const a = await sendEvent(app, aliceKey.secret, { agentId: 'shared-name' })
  const aliceAgent = a.json().agentId
  const byCuid = await sendEvent(app, bobKey.secret, { agentId: aliceAgent })
  t.equal(byCuid.statusCode, 403)
  t.same(byCuid.json(), { error: 'forbidden', reason: 'agent_not_owned' })

  const sns = randomId('') + '.sol'
  await app.db.query('UPDATE agents SET sns_name = $1 WHERE id = $2', [sns, aliceAgent])
  await app.forgetAgents()
  const bySns = await sendEvent(app, bobKey.secret, { agentId: sns })
  t.equal(bySns.statusCode, 403)

  const sameName = await sendEvent(app, bobKey.secret, { agentId: 'shared-name' })
  t.equal(sameName.statusCode, 202, 'display names are per owner')
  t.not(sameName.json().agentId, aliceAgent)

  const { rows } = await app.db.query('SELECT count(*)::int AS n FROM agents WHERE owner_id = $1', [bob.id])
  t.equal(rows[0].n, 1, 'the refused events created nothing for bob')
  const rs = await app.clickhouse.query({
    query: 'SELECT count() AS n FROM events WHERE agent_id = {a:String} AND user_id = {u:String}',
    query_params: { a: aliceAgent, u: bob.id }, format: 'JSONEachRow',
  })
  t.equal(Number((await rs.json<{ n: string }>())[0]!.n), 0, 'nothing was stored under alice\'s agent')
})

t.test('50 concurrent first events naming one new agent create exactly one agent', async (t) => {
  const user = await newUser(app, { tier: 'enterprise' })
  const key = await user.createKey()
  const name = randomId('race-')
  const results = await Promise.all(Array.from({ length: 50 }, () => sendEvent(app, key.secret, { agentId: name })))
  t.same(new Set(results.map((r) => r.statusCode)), new Set([202]))
  t.equal(new Set(results.map((r) => r.json().agentId)).size, 1)
  const { rows } = await app.db.query('SELECT count(*)::int AS n FROM agents WHERE owner_id = $1 AND display_name = $2', [user.id, name])
  t.equal(rows[0].n, 1)

  // The same race straight at Postgres, past the in-process single flight.
  const name2 = randomId('race-db-')
  const direct = await Promise.all(Array.from({ length: 50 }, () => app.agents.resolve(user.id, name2)))
  t.equal(new Set(direct.map((r) => (r.kind === 'ok' ? r.agent.id : r.kind))).size, 1)
  t.equal(direct.filter((r) => r.kind === 'ok' && r.created).length, 1, 'one call created it, the rest found it')
})

t.test('bound keys: omitted agentId uses the bound agent; another agent is 403', async (t) => {
  const user = await newUser(app)
  const unbound = await user.createKey()
  const agentName = randomId('bound-')
  const agentId = (await sendEvent(app, unbound.secret, { agentId: agentName })).json().agentId
  const other = (await sendEvent(app, unbound.secret, { agentId: randomId('other-') })).json().agentId
  const bound = await user.createKey('bound', agentId)

  const omitted = await sendEvent(app, bound.secret, { type: 'action' })
  t.equal(omitted.statusCode, 202)
  t.equal(omitted.json().agentId, agentId)
  t.equal((await sendEvent(app, bound.secret, { agentId })).statusCode, 202, 'its own cuid is fine')
  t.equal((await sendEvent(app, bound.secret, { agentId: agentName })).statusCode, 202, 'its own name is fine')
  const different = await sendEvent(app, bound.secret, { agentId: other })
  t.equal(different.statusCode, 403)
  t.same(different.json(), { error: 'forbidden', reason: 'key_bound_to_other_agent' })
  const newName = await sendEvent(app, bound.secret, { agentId: randomId('new-') })
  t.equal(newName.statusCode, 403, 'a bound key cannot create agents')
})

t.test('a soft-deleted agent answers 410 every time, by cuid, name and bound key', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const name = randomId('doomed-')
  const agentId = (await sendEvent(app, key.secret, { agentId: name })).json().agentId
  const bound = await user.createKey('bound', agentId)
  const del = await app.inject({ method: 'DELETE', url: `/v1/me/agents/${agentId}`, headers: user.auth })
  t.equal(del.statusCode, 204)
  for (let i = 0; i < 3; i++) {
    for (const [secret, payload] of [[key.secret, { agentId }], [key.secret, { agentId: name }], [bound.secret, {}]] as const) {
      const res = await sendEvent(app, secret, payload)
      t.equal(res.statusCode, 410)
      t.same(res.json(), { error: 'agent_deleted' })
    }
  }
  const again = await app.inject({ method: 'DELETE', url: `/v1/me/agents/${agentId}`, headers: user.auth })
  t.equal(again.statusCode, 404, 'deleting twice is a 404')
  const other = await newUser(app)
  const theirs = (await sendEvent(app, (await other.createKey()).secret, { agentId: 'mine' })).json().agentId
  const cross = await app.inject({ method: 'DELETE', url: `/v1/me/agents/${theirs}`, headers: user.auth })
  t.equal(cross.statusCode, 404, 'another user\'s agent cannot be deleted')
})

t.test('side effects: lastSeenAt, framework back-fill and key lastUsedAt are written, coalesced', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const name = randomId('fw-')
  const before = Date.now()
  const first = await sendEvent(app, key.secret, { agentId: name, metadata: { tool: 'langchain' } })
  await sendEvent(app, key.secret, { agentId: name, metadata: { tool: 'crewai' } })
  const agentId = first.json().agentId
  t.equal((await agentRow(agentId)).last_seen_at, null, 'nothing is written per event')
  await app.activity.flush()
  const row = await agentRow(agentId)
  t.equal(row.framework, 'langchain', 'framework is back-filled once, from the first event')
  t.ok(new Date(row.last_seen_at).getTime() >= before - 5)
  const keys = (await app.inject({ method: 'GET', url: '/v1/me/keys', headers: user.auth })).json().keys
  const listed = keys.find((k: { id: string }) => k.id === key.id)
  t.ok(listed.lastUsedAt && Date.parse(listed.lastUsedAt) >= before - 5, 'lastUsedAt is set')
})

t.test('monthly event counts are recorded per user', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  for (let i = 0; i < 3; i++) await sendEvent(app, key.secret, { agentId: 'counted', timestamp: '2020-01-01T00:00:00Z' })
  await app.inject({ method: 'POST', url: '/v1/events/batch', headers: { authorization: `Bearer ${key.secret}` }, payload: { events: [{ agentId: 'counted' }, { agentId: 'counted', type: 'bad' }] } })
  await app.activity.flush()
  t.equal((await app.users.monthlyUsage(user.id)).events, 4, 'counted by receive month, whatever the event time; refused events do not count')
  const me = (await app.inject({ url: '/v1/me', headers: user.auth })).json()
  t.same(me.usage, { month: new Date().toISOString().slice(0, 8) + '01', events: 4 }, 'GET /v1/me shows the month so far')
})
