import type { FastifyPluginAsync } from 'fastify'
import { pageOf } from '../../domain/cursor.ts'
import { clampInt } from '../../domain/query-params.ts'
import { startOf } from './paging.ts'
import { conflict, notFound } from '../../errors.ts'
import type { Reader } from '../../storage/dashboard-repository.ts'
import { DAY_MS as DAY, utcDay } from '../../storage/timestamps.ts'

const idParams = { type: 'object', properties: { id: { type: 'string', maxLength: 64 } } }

/** The caller's agents: list with KPIs, profile with a 30-day calendar, rename, soft delete. */
const agents: FastifyPluginAsync = async (app) => {
  /** KPIs of all the reader's agents, or of one. */
  async function kpis(reader: Reader, now: number, agentId?: string) {
    const from = utcDay(now - 29 * DAY)
    const [day, month] = await Promise.all([app.dashboard.agentWindow(reader, now - DAY, agentId), app.dashboard.spend(reader, 'agent_id', from, agentId)])
    const byAgent = new Map(month.map((m) => [m.key, m]))
    return (agentId: string) => {
      const d = day.get(agentId)
      const m = byAgent.get(agentId)
      return {
        events24h: d?.events ?? 0,
        cost24h: d?.costUsd ?? 0,
        events30d: m?.events ?? 0,
        cost30d: m?.costUsd ?? 0,
        errors30d: m?.errors ?? 0,
        errorRate30d: m && m.events > 0 ? m.errors / m.events : 0,
      }
    }
  }

  /** limit clamps to 1..1000 (default 100); newest agent first. */
  app.get<{ Querystring: Record<string, string | undefined> }>('/v1/me/agents', async (request) => {
    const limit = clampInt(request.query.limit, 1, 1000, 100)
    const start = startOf('agents', request.query.cursor, request.settledAt)
    const reader = await app.readerOf(request)
    const [owned, kpisOf] = await Promise.all([app.agents.pageOwned(reader.userId, limit + 1, start.after), kpis(reader, Date.now())])
    const page = pageOf('agents', start.asOf, owned, limit, (a) => ({ ms: Date.parse(a.createdAt), id: a.id }))
    return { agents: page.items.map((a) => ({ ...a, kpis: kpisOf(a.id) })), nextCursor: page.nextCursor }
  })

  app.get<{ Params: { id: string } }>('/v1/me/agents/:id', { schema: { params: idParams } }, async (request) => {
    const [profile, reader] = await Promise.all([app.agents.profileOwned(request.user.id, request.params.id), app.readerOf(request)])
    if (!profile) throw notFound()
    const now = Date.now()
    const [kpisOf, days, sessions, clusters] = await Promise.all([
      kpis(reader, now, profile.id),
      app.dashboard.spend(reader, 'day', utcDay(now - 29 * DAY), profile.id),
      app.dashboard.sessions(reader, { limit: 5, agentId: profile.id, start: { asOf: Date.now(), after: null } }).then((page) => page.items),
      app.dashboard.clusters(reader, { sinceMs: 0, agentId: profile.id, limit: 5 }),
    ])
    const byDay = new Map(days.map((d) => [d.key, d]))
    const calendar = Array.from({ length: 30 }, (_, i) => {
      const day = utcDay(now - (29 - i) * DAY)
      const d = byDay.get(day)
      return { day, events: d?.events ?? 0, errors: d?.errors ?? 0, costUsd: d?.costUsd ?? 0, tokens: d?.tokens.total ?? 0 }
    })
    const resolved = await app.errorClusters.resolvedAt(reader.userId, clusters.map((c) => c.fingerprint))
    return {
      ...profile,
      kpis: kpisOf(profile.id),
      calendar,
      recentSessions: sessions,
      recentErrors: clusters.map((c) => {
        const at = resolved.get(c.fingerprint)
        const open = at === undefined || c.lastSeenMs > at
        return { fingerprint: c.fingerprint, count: c.count, lastSeen: c.lastSeen, sampleMessage: c.sampleMessage, status: open ? 'open' : 'resolved' }
      }),
    }
  })

  app.patch<{ Params: { id: string }; Body: { displayName: string } }>('/v1/me/agents/:id', {
    schema: {
      params: idParams,
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['displayName'],
        properties: { displayName: { type: 'string', minLength: 1, maxLength: 120, pattern: '\\S' } },
      },
    },
  }, async (request) => {
    const renamed = await app.agents.rename(request.user.id, request.params.id, request.body.displayName.trim())
    if (renamed === 'taken') throw conflict('display_name_taken')
    if (!renamed) throw notFound()
    await app.forgetAgents(request.user.id)
    return renamed
  })

  /** Soft delete: from now on ingestion for the agent answers 410 and reads hide it. */
  app.delete<{ Params: { id: string } }>('/v1/me/agents/:id', { schema: { params: idParams } }, async (request, reply) => {
    if (!(await app.agents.softDelete(request.user.id, request.params.id))) throw notFound()
    await app.forgetAgents(request.user.id)
    return reply.code(204).send()
  })
}

export default agents
