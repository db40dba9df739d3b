import type { RegistryRepository } from '../storage/registry-repository.ts'
import type { PublicEventsRepository } from '../storage/events-repository.ts'
import type { ResponseCache } from '../cache/response-cache.ts'
import type { ListFilter } from '../storage/registry-repository.ts'

const DAY_MS = 86_400_000

/** What the service reads of the registry (RegistryRepository is the one implementation). */
export type RegistryReads = Pick<RegistryRepository, 'counts' | 'deletedIds' | 'list' | 'find' | 'top' | 'collections' | 'activeOwned'>
/** What the service reads of public events (PublicEventsRepository is the one implementation). */
export type PublicEventReads = Pick<PublicEventsRepository, 'countSince' | 'agentKpis' | 'recentActivity' | 'paymentStats'>
/** The response cache the service reads through (ResponseCache, in Redis). */
export type PublicCache = Pick<ResponseCache, 'get' | 'forget'>

/** The public surface's reads: registry counts, listing, profiles and the explorer page, cached where the README says. */
export class PublicService {
  constructor (
    private readonly registry: RegistryReads,
    private readonly events: PublicEventReads,
    private readonly cache: PublicCache,
    private readonly opts: { statsCacheSeconds: number; explorerCacheSeconds: number; profileKpisCacheSeconds: number },
  ) {}

  stats () {
    return this.cache.get('stats', this.opts.statsCacheSeconds, async () => {
      const now = Date.now()
      const [counts, events24h] = await Promise.all([
        this.registry.counts(),
        this.registry.deletedIds().then((deleted) => this.events.countSince(now - DAY_MS, deleted)),
      ])
      return {
        agents: { total: counts.total, identified: counts.identified, unknown: counts.total - counts.identified },
        events24h,
        lastUpdated: new Date(now).toISOString(),
      }
    })
  }

  async list (q: { limit: number; offset: number; search?: string | undefined; filter: ListFilter }) {
    const { agents, total } = await this.registry.list({ ...q, search: q.search?.trim() || undefined })
    return { agents, total, offset: q.offset }
  }

  /**
   * A public agent with its KPIs (events of the agent; last event time, else lastSeenAt); null when
   * not public. The KPIs are a ClickHouse query (milliseconds of the engine's CPU, on the cores that
   * ingest when it is embedded), so they are cached in Redis for PROFILE_KPIS_CACHE_SECONDS: however
   * often a profile is read, its KPIs cost about one query a second, on every instance together
   * (with Redis failing, they are read from ClickHouse as without the cache). Whether the agent is
   * public is checked on every read.
   */
  async profile (identifier: string) {
    const found = await this.registry.find(identifier)
    if (!found) return null
    const owned = found.ownerId ? { ownerId: found.ownerId, id: found.agent.id } : null
    const ttl = this.opts.profileKpisCacheSeconds
    const kpis = !owned
      ? { eventCount: 0, lastEventAt: null }
      : ttl > 0
        ? await this.cache.get(`kpis:${owned.id}`, ttl, () => this.events.agentKpis(owned), { computeWhenRedisFails: true })
        : await this.events.agentKpis(owned)
    return {
      ...found.agent,
      framework: found.framework,
      createdAt: found.createdAt,
      kpis: { eventCount: kpis.eventCount, lastActivityAt: kpis.lastEventAt ?? found.agent.lastSeenAt, reputationScore: found.agent.reputationScore },
    }
  }

  explorer () {
    return this.cache.get('explorer', this.opts.explorerCacheSeconds, async () => {
      const now = Date.now()
      const [topAgents, collections, active] = await Promise.all([this.registry.top(10), this.registry.collections(20), this.registry.activeOwned(1000)])
      const names = new Map(active.map((a) => [a.id, { displayName: a.displayName, snsName: a.snsName }]))
      const [recent, payments] = await Promise.all([this.events.recentActivity(active, 25), this.events.paymentStats(active, now)])
      return {
        topAgents,
        collections,
        recentActivity: recent.map((r) => ({ ...r, displayName: names.get(r.agentId)?.displayName ?? null, snsName: names.get(r.agentId)?.snsName ?? null })),
        payments: {
          byToken: payments,
          totals: { count24h: payments.reduce((n, p) => n + p.count24h, 0), count7d: payments.reduce((n, p) => n + p.count7d, 0) },
        },
        lastUpdated: new Date(now).toISOString(),
      }
    })
  }

  /** Drops the cached figures that a change of the registry (an agent published or hidden) makes stale. */
  async registryChanged (): Promise<void> {
    await this.cache.forget('stats', 'explorer')
  }
}
