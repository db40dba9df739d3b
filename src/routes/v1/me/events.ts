import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { getSession, getTrace, listEventFacets, listEvents, listSessions, listTraces } from '../../../../schemas/me-routes.ts'

/** Recent events, sessions and traces of the caller. */
const events: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.dashboardService
  // The lists answer their filters (docs/api.md#search); a list without one is the plain list.
  const search = app.searchService

  app.get('/events', { schema: listEvents }, async (request) => search.events(await request.reader, request.query))

  app.get('/events/facets', { schema: listEventFacets }, async (request) => search.facets(await request.reader, request.query))

  app.get('/sessions', { schema: listSessions }, async (request) => search.sessions(await request.reader, request.query))

  app.get('/sessions/:id', { schema: getSession }, async (request) => service.session(await request.reader, request.params.id))

  app.get('/traces', { schema: listTraces }, async (request) => search.traces(await request.reader, request.query))

  app.get('/traces/:traceId', { schema: getTrace }, async (request) => service.trace(await request.reader, request.params.traceId))
}

export default events
