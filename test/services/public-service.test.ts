import t from 'tap'
import { PublicService, type PublicCache, type PublicEventReads, type RegistryReads } from '../../src/services/public-service.ts'
import type { PublicAgent } from '../../src/storage/registry-repository.ts'

const DAY = 86_400_000
const OPTS = { statsCacheSeconds: 60, explorerCacheSeconds: 30, profileKpisCacheSeconds: 5 }

function agent (id: string, over: Partial<PublicAgent> = {}): PublicAgent {
  return {
    id, snsName: null, displayName: id, registryId: null, reputationScore: 40, source: 'registry',
    metadata: { agentUri: null, feedback_count: null }, enriched: { name: null, description: null, image: null, capabilities: [], profiled: false },
    lastSeenAt: '2026-04-30T00:00:00.000Z', ...over,
  }
}

/**
 * Fakes of the registry and public events repositories, and of the response cache: a cache that
 * holds what it computed under its name (a hit never computes again) and records the lifetime asked.
 */
function fakes (opts = OPTS) {
  const calls: { name: string; args: unknown[] }[] = []
  const record = (name: string, args: unknown[]) => { calls.push({ name, args }) }
  const found = new Map<string, Awaited<ReturnType<RegistryReads['find']>>>()
  const kpis = { eventCount: 7, lastEventAt: '2026-05-01T10:00:00.000Z' as string | null }
  const registry: RegistryReads = {
    async counts () { record('counts', []); return { total: 10, identified: 4 } },
    async deletedIds () { record('deletedIds', []); return ['gone'] },
    async list (...args) { record('list', args); return { agents: [agent('a')], total: 1 } },
    async find (...args) { record('find', args); return found.get(args[0]) ?? null },
    async top (...args) { record('top', args); return [agent('top')] },
    async collections (...args) { record('collections', args); return [{ source: 'registry', agents: 3, identified: 1 }] },
    async activeOwned (...args) { record('activeOwned', args); return [{ id: 'a1', ownerId: 'u1', displayName: 'alpha', snsName: 'alpha.sol' }] },
  }
  const events: PublicEventReads = {
    async countSince (...args) { record('countSince', args); return 42 },
    async agentKpis (...args) { record('agentKpis', args); return { ...kpis } },
    async recentActivity (...args) {
      record('recentActivity', args)
      return [{ agentId: 'a1', type: 'tx', tool: 'swap', outcome: 'success', at: 'x' }, { agentId: 'unknown', type: 'tool', tool: 't', outcome: 'failed', at: 'y' }]
    },
    async paymentStats (...args) {
      record('paymentStats', args)
      return [{ token: 'SOL', count24h: 1, amount24h: 2, count7d: 3, amount7d: 4 }, { token: 'USDC', count24h: 5, amount24h: 6, count7d: 7, amount7d: 8 }]
    },
  }
  const held = new Map<string, unknown>()
  const cache: PublicCache = {
    async get<T>(name: string, ttlSeconds: number, compute: () => Promise<T>, options?: { computeWhenRedisFails?: boolean }) {
      record('cache.get', [name, ttlSeconds, options])
      if (!held.has(name)) held.set(name, await compute())
      return held.get(name) as T
    },
    async forget (...names) { record('cache.forget', names); for (const n of names) held.delete(n) },
  }
  const service = new PublicService(registry, events, cache, opts)
  const named = (name: string) => calls.filter((c) => c.name === name).map((c) => c.args)
  return { service, named, found, kpis }
}

t.test('stats: identified and unknown agents, events of the last day without deleted agents, cached', async (t) => {
  const { service, named } = fakes()
  const before = Date.now()
  const stats = await service.stats()
  const after = Date.now()
  t.same(stats.agents, { total: 10, identified: 4, unknown: 6 })
  t.equal(stats.events24h, 42)
  const [sinceMs, excluded] = named('countSince')[0]!
  t.ok((sinceMs as number) >= before - DAY && (sinceMs as number) <= after - DAY, 'the last 24 hours')
  t.same(excluded, ['gone'], 'deleted agents are not counted')
  t.same(named('cache.get')[0]!.slice(0, 2), ['stats', 60])
  t.same(await service.stats(), stats, 'a second read is the cached one')
  t.equal(named('counts').length, 1)
})

t.test('list: the search trimmed (blank is none), the offset echoed', async (t) => {
  const { service, named } = fakes()
  t.same(await service.list({ limit: 5, offset: 10, search: '  swap  ', filter: 'identified' }), { agents: [agent('a')], total: 1, offset: 10 })
  await service.list({ limit: 5, offset: 0, search: '   ', filter: 'all' })
  t.same(named('list'), [
    [{ limit: 5, offset: 10, search: 'swap', filter: 'identified' }],
    [{ limit: 5, offset: 0, search: undefined, filter: 'all' }],
  ])
})

t.test('profile: null when not public; an agent nobody owns has no events; an owned one\'s KPIs are cached', async (t) => {
  const { service, named, found, kpis } = fakes()
  t.equal(await service.profile('nobody.sol'), null)

  found.set('unowned', { agent: agent('r1', { lastSeenAt: null }), ownerId: null, createdAt: 'c', framework: null })
  t.same((await service.profile('unowned'))!.kpis, { eventCount: 0, lastActivityAt: null, reputationScore: 40 })
  t.equal(named('agentKpis').length, 0, 'no query for an agent without events')

  found.set('owned', { agent: agent('a1'), ownerId: 'u1', createdAt: '2026-01-01T00:00:00.000Z', framework: 'langchain' })
  const profile = await service.profile('owned')
  t.match(profile, { id: 'a1', framework: 'langchain', createdAt: '2026-01-01T00:00:00.000Z', kpis: { eventCount: 7, lastActivityAt: '2026-05-01T10:00:00.000Z', reputationScore: 40 } })
  t.same(named('agentKpis'), [[{ ownerId: 'u1', id: 'a1' }]])
  t.same(named('cache.get').at(-1), ['kpis:a1', 5, { computeWhenRedisFails: true }], 'cached for PROFILE_KPIS_CACHE_SECONDS, computed when Redis fails')

  kpis.lastEventAt = null
  found.set('quiet', { agent: agent('a2'), ownerId: 'u1', createdAt: 'c', framework: null })
  t.equal((await service.profile('quiet'))!.kpis.lastActivityAt, '2026-04-30T00:00:00.000Z', 'no event yet: the last time it was seen')
})

t.test('profile: with PROFILE_KPIS_CACHE_SECONDS=0 the KPIs are read every time, past the cache', async (t) => {
  const { service, named, found } = fakes({ ...OPTS, profileKpisCacheSeconds: 0 })
  found.set('owned', { agent: agent('a1'), ownerId: 'u1', createdAt: 'c', framework: null })
  await service.profile('owned')
  await service.profile('owned')
  t.equal(named('agentKpis').length, 2)
  t.equal(named('cache.get').length, 0)
})

t.test('explorer: recent activity named from the active agents, payment totals summed, cached; a registry change forgets it', async (t) => {
  const { service, named } = fakes()
  const page = await service.explorer()
  t.same(page.topAgents, [agent('top')])
  t.same(named('top'), [[10]])
  t.same(named('collections'), [[20]])
  t.same(named('activeOwned'), [[1000]])
  t.same(page.recentActivity.map((r) => [r.agentId, r.displayName, r.snsName]), [['a1', 'alpha', 'alpha.sol'], ['unknown', null, null]])
  t.same(page.payments.totals, { count24h: 6, count7d: 10 })
  t.same(named('cache.get')[0]!.slice(0, 2), ['explorer', 30])

  await service.explorer()
  t.equal(named('top').length, 1, 'the second read is cached')
  await service.registryChanged()
  t.same(named('cache.forget'), [['stats', 'explorer']])
  await service.explorer()
  t.equal(named('top').length, 2, 'computed afresh after the change')
})
