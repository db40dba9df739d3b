import type { FastifyPluginAsync } from 'fastify'
import { DAY_MS, utcDay } from '../../storage/timestamps.ts'

/** Spend summary from the daily rollup. */
const spend: FastifyPluginAsync = async (app) => {
  /** days: 1..365 (default 30): the window is today (UTC) and the days - 1 before it. */
  app.get<{ Querystring: { days: number } }>('/v1/me/spend-summary', {
    schema: { querystring: { type: 'object', properties: { days: { type: 'integer', minimum: 1, maximum: 365, default: 30 } } } },
  }, async (request) => {
    const reader = await app.readerOf(request)
    const from = utcDay(Date.now() - (request.query.days - 1) * DAY_MS)
    const [total, byAgent, byModel, byDay, owned] = await Promise.all([
      app.dashboard.spend(reader, 'total', from),
      app.dashboard.spend(reader, 'agent_id', from),
      app.dashboard.spend(reader, 'model', from),
      app.dashboard.spend(reader, 'day', from),
      app.agents.listOwned(reader.userId),
    ])
    const names = new Map(owned.map((a) => [a.id, a.displayName]))
    const t = total[0]
    const row = (r: { costUsd: number; events: number; errors: number; tokens: unknown; unpricedEvents: number }) =>
      ({ costUsd: r.costUsd, events: r.events, errors: r.errors, tokens: r.tokens, unpricedEvents: r.unpricedEvents })
    return {
      days: request.query.days,
      from,
      total: t ? row(t) : { costUsd: 0, events: 0, errors: 0, tokens: { inputBase: 0, cacheCreation: 0, cacheRead: 0, output: 0, total: 0 }, unpricedEvents: 0 },
      by_agent: byAgent.map((r) => ({ agentId: r.key, displayName: names.get(r.key) ?? null, ...row(r) })),
      by_model: byModel.map((r) => ({ model: r.key === '' ? null : r.key, ...row(r) })),
      by_day: byDay.map((r) => ({ day: r.key, ...row(r) })),
      // Models the price catalogue does not know: their events count with cost 0 in every figure above.
      unpriced_models: byModel.filter((r) => r.unpricedEvents > 0).map((r) => ({ model: r.key, events: r.unpricedEvents })),
    }
  })
}

export default spend
