import type { FastifyRequest } from 'fastify'
import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { callerOfKey } from '../../ingest/ingestion-service.ts'
import { idempotencyHooks } from '../../ingest/idempotency.ts'
import { postBatch, postEvent } from '../../../schemas/ingest-routes.ts'

/**
 * POST /v1/events and POST /v1/events/batch. Each event is checked by the ingestion pipeline (its
 * `schema` step, the same for one event or 500), not by the route: src/validation.ts says why (the
 * batch route checks only its envelope, `events`). Both take an Idempotency-Key: a retry with the
 * key of an answered request gets that answer again.
 */
const ingest: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const { bodyLimit, batchBodyLimit } = app.routeSettings
  const authenticate = app.ingestion.pipeline.hook('key', (request: FastifyRequest) => app.authenticateKey(request))
  const idempotent = idempotencyHooks(app.idempotency)

  app.post('/events', { bodyLimit, onRequest: authenticate, ...idempotent, schema: postEvent }, async (request, reply) => {
    const ack = await app.ingestion.ingestOne(callerOfKey(request.apiKey), request.body)
    return reply.code(202).send(ack)
  })

  app.post('/events/batch', {
    bodyLimit: batchBodyLimit,
    onRequest: authenticate,
    ...idempotent,
    config: { jsonItems: 'events' },
    schema: postBatch,
  }, async (request, reply) => {
    const { results, retryAfter } = await app.ingestion.ingestBatch(callerOfKey(request.apiKey), request.body.events, {
      refusalOf: (i) => request.itemRefusal(i),
      parsedFrom: request.jsonItemsText ?? undefined,
    })
    if (retryAfter !== null) reply.header('retry-after', retryAfter)
    return reply.code(207).send({ results })
  })
}

export default ingest
