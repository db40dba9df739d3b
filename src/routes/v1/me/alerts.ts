import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { alertTransition, getAlertSettings, listAlerts, putAlertSettings, snoozeAlert } from '../../../../schemas/me-routes.ts'

/** Alerts: list with status filter and counts; acknowledge, snooze, unacknowledge; per-user thresholds. */
const alerts: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.alertsService

  app.get('/alerts', { schema: listAlerts }, async (request) => service.list(request.user.id, request.settledAt, request.query))

  app.post('/alerts/:id/acknowledge', { schema: alertTransition('Acknowledge an active or snoozed alert') }, async (request) =>
    service.transition(request.user.id, request.params.id, 'acknowledge'))

  app.post('/alerts/:id/snooze', { schema: snoozeAlert }, async (request) =>
    service.transition(request.user.id, request.params.id, 'snooze', request.query.hours))

  app.post('/alerts/:id/unacknowledge', { schema: alertTransition('Re-open an acknowledged alert') }, async (request) =>
    service.transition(request.user.id, request.params.id, 'unacknowledge'))

  app.get('/alert-settings', { schema: getAlertSettings }, async (request) => service.settings(request.user.id))

  app.put('/alert-settings', { schema: putAlertSettings }, async (request) => service.replaceSettings(request.user.id, request.body))
}

export default alerts
