import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import type { FastifyRequest } from 'fastify'
import { getSession, getTrace, listEventFacets, listEventHistogram, listEvents, listSessions, listTraces } from '../../../../schemas/me-routes.ts'

import { filterQueryProblems } from '../../../domain/search-filters.ts'
import { querystringInvalid } from '../../../http-error.ts'

/** Before the schema, whose messages would not say it: a repeated single-valued filter, a filter that is not UTF-8. */
async function filterQuery (request: FastifyRequest) {
  const problems = filterQueryProblems(request.url)
  if (problems.length > 0) throw querystringInvalid(problems)
}

/** Recent events, sessions and traces of the caller. */
const events: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.dashboardService
  // The lists answer their filters (docs/api.md#search); a list without one is the plain list.
  const search = app.searchService

  app.get('/events', { schema: listEvents, preValidation: filterQuery }, async (request) => search.events(await request.reader, request.query))

  app.get('/events/facets', { schema: listEventFacets, preValidation: filterQuery }, async (request) => search.facets(await request.reader, request.query))

  app.get('/events/histogram', { schema: listEventHistogram, preValidation: filterQuery }, async (request) => search.histogram(await request.reader, request.query))

  app.get('/sessions', { schema: listSessions, preValidation: filterQuery }, async (request) => search.sessions(await request.reader, request.query))

  app.get('/sessions/:id', { schema: getSession }, async (request) => service.session(await request.reader, request.params.id))

  app.get('/traces', { schema: listTraces, preValidation: filterQuery }, async (request) => search.traces(await request.reader, request.query))

  app.get('/traces/:traceId', { schema: getTrace }, async (request) => service.trace(await request.reader, request.params.traceId))
}

export default events
