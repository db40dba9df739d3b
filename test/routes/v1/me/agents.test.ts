import t, { type Test } from 'tap'
import { buildTestApp, newUser, randomId, sendEvent, shipped } from '../../../helpers/app.ts'

const app = await buildTestApp(t)

t.test('PATCH /v1/me/agents/:id { isPublic } publishes an ingested agent and hides it again, past the public caches', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const name = randomId('pub-')
  const sent = await sendEvent(app, key.secret, { agentId: name, type: 'tool', toolExecuted: 'search' })
  t.equal(sent.statusCode, 202)
  const agentId = sent.json().agentId as string
  await shipped(app)
  const listed = async () => (await app.inject({ url: `/v1/agents?search=${name}` })).json().agents.map((a: { id: string }) => a.id)
  const total = async () => (await app.inject({ url: '/v1/stats' })).json().agents.total as number
  // Other test files publish agents in the same database meanwhile: right after a publish, the stats
  // answer the live count (read just before and after them), not the count they cached earlier.
  const live = async () => (await app.registry.counts()).total
  const liveCount = async (t: Test, message: string) => {
    const [a, stats, b] = [await live(), await total(), await live()]
    if (a === b) t.equal(stats, a, message)
    else t.ok(stats >= Math.min(a, b) && stats <= Math.max(a, b), `${message} (the count moved meanwhile)`)
  }

  t.same(await listed(), [], 'an ingested agent is private')
  t.equal((await app.inject({ url: `/v1/agents/${agentId}` })).statusCode, 404)
  await total() // now cached
  await app.inject({ url: '/v1/explorer' })

  const patch = (payload: object) => app.inject({ method: 'PATCH', url: `/v1/me/agents/${agentId}`, headers: user.auth, payload })
  const published = await patch({ isPublic: true })
  t.equal(published.statusCode, 200)
  t.match(published.json(), { id: agentId, displayName: name, isPublic: true })
  t.same(await listed(), [agentId], 'listed publicly at once')
  t.equal((await app.inject({ url: `/v1/agents/${agentId}` })).json().kpis.eventCount, 1, 'its public profile answers')
  await liveCount(t, 'the cached stats count it at once')
  const explorer = (await app.inject({ url: '/v1/explorer' })).json()
  t.ok(explorer.recentActivity.some((a: { agentId: string }) => a.agentId === agentId), 'the cached explorer shows its activity at once')

  const both = await patch({ displayName: `${name}-x`, isPublic: false })
  t.match(both.json(), { displayName: `${name}-x`, isPublic: false }, 'a rename and an unpublish in one request')
  t.same(await listed(), [], 'unpublished: gone from the listing')
  t.equal((await app.inject({ url: `/v1/agents/${agentId}` })).statusCode, 404)
  await liveCount(t, 'and from the stats')

  const other = await newUser(app)
  t.equal((await app.inject({ method: 'PATCH', url: `/v1/me/agents/${agentId}`, headers: other.auth, payload: { isPublic: true } })).statusCode, 404, 'only the owner publishes')
  t.equal((await patch({ isPublic: 'yes' })).statusCode, 400)

  // Published again, then renamed and deleted: the cached public reads follow each at once.
  t.equal((await patch({ isPublic: true })).statusCode, 200)
  await total()
  await app.inject({ url: '/v1/explorer' })
  t.equal((await patch({ displayName: `${name}-renamed` })).statusCode, 200)
  const explorerName = (await app.inject({ url: '/v1/explorer' })).json().recentActivity.find((a: { agentId: string }) => a.agentId === agentId)
  t.equal(explorerName?.agentName ?? explorerName?.displayName ?? explorerName?.agent?.displayName, `${name}-renamed`, 'the cached explorer shows the new name at once')
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/me/agents/${agentId}`, headers: user.auth })).statusCode, 204)
  await liveCount(t, 'deleted: the cached stats no longer count it')
  const afterDelete = (await app.inject({ url: '/v1/explorer' })).json()
  t.notOk(afterDelete.recentActivity.some((a: { agentId: string }) => a.agentId === agentId), 'nor does the cached explorer show it')
})
