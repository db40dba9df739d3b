import type { FastifyPluginAsync } from 'fastify'
import { isCuid } from '../../domain/ids.ts'
import { clampInt, sinceBound } from '../../domain/query-params.ts'
import { notFound } from '../../errors.ts'
import { traceTree } from '../../domain/trace-tree.ts'
import type { DashboardEvent } from '../../storage/dashboard-repository.ts'

type Query = Record<string, string | undefined>
const idParams = (name: string) => ({ type: 'object', properties: { [name]: { type: 'string', minLength: 1, maxLength: 200 } } })

/** Recent events, sessions and traces of the caller. */
const events: FastifyPluginAsync = async (app) => {
  /** limit clamps to 1..1000 (default 50); since and agentId that do not fit are dropped. */
  app.get<{ Querystring: Query }>('/v1/me/events', async (request) => {
    const q = request.query
    const reader = await app.readerOf(request)
    return {
      events: await app.dashboard.events(reader, {
        limit: clampInt(q.limit, 1, 1000, 50),
        sinceMs: sinceBound(q.since, Date.now()),
        agentId: q.agentId && isCuid(q.agentId) ? q.agentId : undefined,
      }),
    }
  })

  /** limit clamps to 1..100 (default 20). */
  app.get<{ Querystring: Query }>('/v1/me/sessions', async (request) => {
    const reader = await app.readerOf(request)
    return { sessions: await app.dashboard.sessions(reader, { limit: clampInt(request.query.limit, 1, 100, 20) }) }
  })

  app.get<{ Params: { id: string } }>('/v1/me/sessions/:id', { schema: { params: idParams('id') } }, async (request) => {
    const reader = await app.readerOf(request)
    const list = await app.dashboard.eventsOf(reader, 'session_id', request.params.id)
    if (list.length === 0) throw notFound()
    const first = list[0]!
    const last = list[list.length - 1]!
    return {
      sessionId: request.params.id,
      start: first.timestamp,
      end: last.timestamp,
      durationMs: Date.parse(last.timestamp) - Date.parse(first.timestamp),
      ...totals(list),
      events: list,
    }
  })

  /** since: 24h | 7d | 30d | all (default 7d; anything else is dropped); limit clamps to 1..200 (default 50). */
  app.get<{ Querystring: Query }>('/v1/me/traces', async (request) => {
    const reader = await app.readerOf(request)
    return {
      traces: await app.dashboard.traces(reader, {
        limit: clampInt(request.query.limit, 1, 200, 50),
        sinceMs: sinceBound(request.query.since, Date.now(), '7d'),
      }),
    }
  })

  app.get<{ Params: { traceId: string } }>('/v1/me/traces/:traceId', { schema: { params: idParams('traceId') } }, async (request) => {
    const reader = await app.readerOf(request)
    const list = await app.dashboard.eventsOf(reader, 'trace_id', request.params.traceId)
    if (list.length === 0) throw notFound()
    const start = Date.parse(list[0]!.timestamp)
    const end = Date.parse(list[list.length - 1]!.timestamp)
    const { roots, links } = traceTree(list)
    const withContext = (key: 'git' | 'cwd') => {
      for (const e of list) {
        const value = (e.metadata as Record<string, unknown> | null)?.[key]
        if (value !== undefined && value !== '') return value
      }
      return null
    }
    return {
      traceId: request.params.traceId,
      start: list[0]!.timestamp,
      end: list[list.length - 1]!.timestamp,
      durationMs: end - start,
      ...totals(list),
      git: withContext('git'),
      cwd: withContext('cwd'),
      timeline: list.map((e) => ({
        eventId: e.eventId,
        agentId: e.agentId,
        type: e.type,
        toolExecuted: e.toolExecuted,
        outcome: e.outcome,
        offsetMs: Date.parse(e.timestamp) - start,
        durationMs: e.durationMs,
        privacyChip: e.privacyChip,
        spanId: e.spanId,
        parentSpanId: e.parentSpanId,
        ...links.get(e.eventId)!,
      })),
      // Event ids of the root spans; each timeline entry names its parentEventId, children and depth.
      roots,
      events: list,
    }
  })
}

function totals(list: DashboardEvent[]) {
  const tokens = { inputBase: 0, cacheCreation: 0, cacheRead: 0, output: 0, total: 0 }
  let nano = 0
  for (const e of list) {
    for (const k of Object.keys(tokens) as (keyof typeof tokens)[]) tokens[k] += e.tokens[k]
    nano += Math.round(e.costUsd * 1e9)
  }
  return {
    eventCount: list.length,
    agents: [...new Set(list.map((e) => e.agentId))].sort(),
    errors: list.filter((e) => e.errorFingerprint).length,
    tokens,
    costUsd: nano / 1e9,
  }
}

export default events
