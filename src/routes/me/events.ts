import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { getSession, getTrace, listEvents, listSessions, listTraces } from '../../../schemas/me-routes.ts'

/** Recent events, sessions and traces of the caller. */
const events: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.dashboardService

  app.get('/v1/me/events', { schema: listEvents }, async (request) => service.events(await app.readerOf(request), request.query))

  app.get('/v1/me/sessions', { schema: listSessions }, async (request) => service.sessions(await app.readerOf(request), request.query))

  app.get('/v1/me/sessions/:id', { schema: getSession }, async (request) => service.session(await app.readerOf(request), request.params.id))

  app.get('/v1/me/traces', { schema: listTraces }, async (request) => service.traces(await app.readerOf(request), request.query))

  app.get('/v1/me/traces/:traceId', { schema: getTrace }, async (request) => service.trace(await app.readerOf(request), request.params.traceId))
}

export default events
