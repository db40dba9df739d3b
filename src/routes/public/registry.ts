import type { FastifyPluginAsync } from 'fastify'
import { notFound } from '../../errors.ts'
import publicAgentSchema from '../../../schemas/public-agent.json' with { type: 'json' }
import type { ListFilter } from '../../storage/registry-repository.ts'

const publicAgent = { $ref: 'public-agent.json#' }

/** Public registry reads: stats, the agent listing, agent profiles and the explorer. No auth. */
const registry = (opts: { statsCacheSeconds: number; explorerCacheSeconds: number }): FastifyPluginAsync => async (app) => {
  app.get('/v1/stats', {
    schema: {
      response: {
        200: {
          type: 'object',
          properties: {
            agents: { type: 'object', properties: { total: { type: 'integer' }, identified: { type: 'integer' }, unknown: { type: 'integer' } } },
            events24h: { type: 'integer' },
            lastUpdated: { type: 'string' },
          },
        },
      },
    },
  }, async () => app.responseCache.get('stats', opts.statsCacheSeconds, async () => {
    const now = Date.now()
    const [counts, events24h] = await Promise.all([
      app.registry.counts(),
      app.registry.deletedIds().then((deleted) => app.publicEvents.countSince(now - 86_400_000, deleted)),
    ])
    return {
      agents: { total: counts.total, identified: counts.identified, unknown: counts.total - counts.identified },
      events24h,
      lastUpdated: new Date(now).toISOString(),
    }
  }))

  app.get<{ Querystring: { limit: number; offset: number; search?: string; filter: ListFilter } }>('/v1/agents', {
    schema: {
      querystring: {
        type: 'object',
        properties: {
          limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
          offset: { type: 'integer', minimum: 0, maximum: 1_000_000, default: 0 },
          search: { type: 'string', maxLength: 100 },
          filter: { enum: ['all', 'identified', 'unknown'], default: 'all' },
        },
      },
      response: {
        200: { type: 'object', properties: { agents: { type: 'array', items: publicAgent }, total: { type: 'integer' }, offset: { type: 'integer' } } },
      },
    },
  }, async (request) => {
    const { limit, offset, search, filter } = request.query
    const { agents, total } = await app.registry.list({ limit, offset, search: search?.trim() || undefined, filter })
    return { agents, total, offset }
  })

  app.get<{ Params: { identifier: string } }>('/v1/agents/:identifier', {
    schema: {
      params: { type: 'object', properties: { identifier: { type: 'string', minLength: 1, maxLength: 200 } } },
      response: {
        200: {
          type: 'object',
          allOf: [publicAgent],
          properties: {
            ...publicAgentSchema.properties,
            framework: { type: ['string', 'null'] },
            createdAt: { type: 'string' },
            kpis: {
              type: 'object',
              properties: { eventCount: { type: 'integer' }, lastActivityAt: { type: ['string', 'null'] }, reputationScore: { type: ['number', 'null'] } },
            },
          },
        },
      },
    },
  }, async (request) => {
    const found = await app.registry.find(request.params.identifier)
    if (!found) throw notFound()
    const kpis = found.ownerId
      ? await app.publicEvents.agentKpis({ ownerId: found.ownerId, id: found.agent.id })
      : { eventCount: 0, lastEventAt: null }
    return {
      ...found.agent,
      framework: found.framework,
      createdAt: found.createdAt,
      kpis: {
        eventCount: kpis.eventCount,
        lastActivityAt: kpis.lastEventAt ?? found.agent.lastSeenAt,
        reputationScore: found.agent.reputationScore,
      },
    }
  })

  app.get('/v1/explorer', async () => app.responseCache.get('explorer', opts.explorerCacheSeconds, async () => {
    const now = Date.now()
    const [topAgents, collections, active] = await Promise.all([
      app.registry.top(10),
      app.registry.collections(20),
      app.registry.activeOwned(1000),
    ])
    const names = new Map(active.map((a) => [a.id, { displayName: a.displayName, snsName: a.snsName }]))
    const [recent, payments] = await Promise.all([
      app.publicEvents.recentActivity(active, 25),
      app.publicEvents.paymentStats(active, now),
    ])
    return {
      topAgents,
      collections,
      recentActivity: recent.map((r) => ({ ...r, ...names.get(r.agentId) })),
      payments: {
        byToken: payments,
        totals: {
          count24h: payments.reduce((n, p) => n + p.count24h, 0),
          count7d: payments.reduce((n, p) => n + p.count7d, 0),
        },
      },
      lastUpdated: new Date(now).toISOString(),
    }
  }))
}

export default registry
