import type { FastifyPluginAsync } from 'fastify'
import type { IncomingEvent } from '../domain/event-row.ts'

const errorResponse = { $ref: 'error.json#' }

/** POST /v1/events and POST /v1/events/batch. */
const ingest = (opts: { bodyLimit: number; batchBodyLimit: number }): FastifyPluginAsync => async (app) => {
  app.post<{ Body: IncomingEvent }>('/v1/events', {
    bodyLimit: opts.bodyLimit,
    onRequest: app.authenticateKey,
    schema: {
      body: { $ref: 'event.json#' },
      response: { 202: { $ref: 'event-ack.json#' }, '4xx': errorResponse, '5xx': errorResponse },
    },
  }, async (request, reply) => {
    const ack = await app.ingestion.ingestOne(request.apiKey, request.body)
    return reply.code(202).send(ack)
  })

  app.post<{ Body: { events: unknown[] } }>('/v1/events/batch', {
    bodyLimit: opts.batchBodyLimit,
    onRequest: app.authenticateKey,
    schema: { body: { $ref: 'event-batch.json#' } },
  }, async (request, reply) => {
    const results = await app.ingestion.ingestBatch(request.apiKey, request.body.events)
    return reply.code(207).send({ results })
  })
}

export default ingest
