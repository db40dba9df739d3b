import type { FastifyPluginAsync } from 'fastify'
import { pageOf } from '../../domain/cursor.ts'
import { startOf } from './paging.ts'
import { conflict, notFound } from '../../errors.ts'
import { mergeThresholds, DEFAULT_THRESHOLDS } from '../../domain/anomaly-rules.ts'
import type { AlertStatus } from '../../storage/alerts-repository.ts'

const idParams = { type: 'object', properties: { id: { type: 'string', maxLength: 64 } } }

/** A partial override of one rule's thresholds: the same fields as the defaults, each optional. */
function ruleSchema(defaults: Record<string, unknown>) {
  const properties: Record<string, unknown> = {}
  for (const [field, value] of Object.entries(defaults)) {
    if (typeof value === 'boolean') properties[field] = { type: 'boolean' }
    else if (field === 'minRate') properties[field] = { type: 'number', exclusiveMinimum: 0, maximum: 1 }
    else if (/Minutes$/.test(field)) properties[field] = { type: 'integer', minimum: 1, maximum: 1440 }
    else if (/^min(Failed|Events|ActiveHours)$/.test(field)) properties[field] = { type: 'integer', minimum: 1, maximum: 1_000_000 }
    else properties[field] = { type: 'number', exclusiveMinimum: 0, maximum: 1_000_000 }
  }
  return { type: 'object', additionalProperties: false, properties }
}

/**
 * Alerts: list with status filter and counts; acknowledge, snooze, unacknowledge; per-user
 * thresholds. Transitions: active|snoozed → acknowledged; active|snoozed → snoozed (re-snoozing
 * extends); acknowledged → active. Repeating a transition that already holds answers 200 unchanged;
 * a transition from a state that does not allow it is a 409.
 */
const alerts: FastifyPluginAsync = async (app) => {
  app.get<{ Querystring: { status: AlertStatus | 'all'; count: boolean; limit: number; cursor?: string } }>('/v1/me/alerts', {
    schema: {
      querystring: {
        type: 'object',
        properties: {
          status: { enum: ['active', 'acknowledged', 'snoozed', 'all'], default: 'all' },
          count: { type: 'boolean', default: false },
          limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
          cursor: { type: 'string', maxLength: 512 },
        },
      },
    },
  }, async (request) => {
    const { status, count, limit, cursor } = request.query
    const start = startOf('alerts', cursor, request.settledAt)
    const rows = await app.alerts.list(request.user.id, status, limit + 1, start.after)
    const page = pageOf('alerts', start.asOf, rows, limit, (a) => ({ ms: Date.parse(a.createdAt), id: a.id }))
    const body = { alerts: page.items, nextCursor: page.nextCursor }
    return count ? { ...body, counts: await app.alerts.counts(request.user.id) } : body
  })

  const transition = (path: string, from: AlertStatus[], to: AlertStatus, already: AlertStatus) =>
    app.post<{ Params: { id: string }; Querystring: { hours: number } }>(`/v1/me/alerts/:id/${path}`, {
      schema: {
        params: idParams,
        ...(to === 'snoozed'
          ? { querystring: { type: 'object', properties: { hours: { type: 'integer', minimum: 1, maximum: 168, default: 1 } } } }
          : {}),
      },
    }, async (request) => {
      const result = await app.alerts.transition(request.user.id, request.params.id, from, to, request.query.hours)
      if (!result) throw notFound()
      if (!result.changed && result.alert.status !== already) throw conflict('invalid_transition')
      return result.alert
    })

  transition('acknowledge', ['active', 'snoozed'], 'acknowledged', 'acknowledged')
  transition('snooze', ['active', 'snoozed'], 'snoozed', 'snoozed')
  transition('unacknowledge', ['acknowledged'], 'active', 'active')

  app.get('/v1/me/alert-settings', async (request) => {
    const overrides = await app.alerts.thresholds(request.user.id)
    return { thresholds: mergeThresholds(overrides), overrides }
  })

  app.put<{ Body: Record<string, Record<string, unknown>> }>('/v1/me/alert-settings', {
    schema: {
      body: {
        type: 'object',
        additionalProperties: false,
        properties: Object.fromEntries(Object.entries(DEFAULT_THRESHOLDS).map(([rule, d]) => [rule, ruleSchema(d)])),
      },
    },
  }, async (request) => {
    await app.alerts.setThresholds(request.user.id, request.body)
    return { thresholds: mergeThresholds(request.body), overrides: request.body }
  })
}

export default alerts
