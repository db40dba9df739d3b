import type { FastifyRequest } from 'fastify'
import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { callerOfKey } from '../ingest/ingestion-service.ts'
import { idempotencyHooks } from '../ingest/idempotency.ts'
import { postScore, postScoreBatch } from '../../schemas/score.ts'

/**
 * POST /v1/scores and POST /v1/scores/batch (API key): scores through the ingestion pipeline, as
 * events go through theirs (src/ingest/score-ingestion.ts). Each score is checked by the pipeline's
 * `schema` and `configs` steps, not by the route; both take an Idempotency-Key.
 */
const scores = (opts: { bodyLimit: number; batchBodyLimit: number }): FastifyPluginAsyncJsonSchemaToTs => async (app) => {
  const authenticate = app.ingestion.pipeline.hook('key', (request: FastifyRequest) => app.authenticateKey(request))
  const idempotent = idempotencyHooks(app.idempotency)

  app.post('/v1/scores', { bodyLimit: opts.bodyLimit, onRequest: authenticate, ...idempotent, schema: postScore }, async (request, reply) => {
    const ack = await app.scoreIngestion.ingestOne(callerOfKey(request.apiKey), request.body)
    return reply.code(202).send(ack)
  })

  app.post('/v1/scores/batch', {
    bodyLimit: opts.batchBodyLimit,
    onRequest: authenticate,
    ...idempotent,
    config: { jsonItems: 'scores' },
    schema: postScoreBatch,
  }, async (request, reply) => {
    const { results, retryAfter } = await app.scoreIngestion.ingestBatch(callerOfKey(request.apiKey), request.body.scores, (i) => request.inputProblemsOf(i))
    if (retryAfter !== null) reply.header('retry-after', retryAfter)
    return reply.code(207).send({ results })
  })
}

export default scores
