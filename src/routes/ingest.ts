import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { callerOfKey } from '../services/ingestion-service.ts'

const errorResponse = { $ref: 'error.json#' }

/**
 * POST /v1/events and POST /v1/events/batch. Bodies are validated by the ingestion pipeline (its
 * schema step, the same for one event or 500), not by the route, so both run the same steps.
 */
const ingest = (opts: { bodyLimit: number; batchBodyLimit: number }): FastifyPluginAsync => async (app) => {
  const authenticate = (request: FastifyRequest) => app.ingestion.steps.run('key', 1, () => app.authenticateKey(request))

  app.post<{ Body: unknown }>('/v1/events', {
    bodyLimit: opts.bodyLimit,
    onRequest: authenticate,
    schema: { response: { 202: { $ref: 'event-ack.json#' }, '4xx': errorResponse, '5xx': errorResponse } },
  }, async (request, reply) => {
    const ack = await app.ingestion.ingestOne(callerOfKey(request.apiKey), request.body)
    return reply.code(202).send(ack)
  })

  app.post<{ Body: { events: unknown[] } }>('/v1/events/batch', {
    bodyLimit: opts.batchBodyLimit,
    onRequest: authenticate,
    config: { jsonItems: 'events' },
    schema: { body: { $ref: 'event-batch.json#' } },
  }, async (request, reply) => {
    const results = await app.ingestion.ingestBatch(callerOfKey(request.apiKey), request.body.events, (i) => request.inputProblemsOf(i))
    return reply.code(207).send({ results })
  })
}

export default ingest
