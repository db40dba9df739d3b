import type { FastifyReply, FastifyRequest } from 'fastify'
import { forbidden, rateLimited } from '../../http-error.ts'
import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { callerOfKey } from '../../ingest/ingestion-service.ts'
import { EXPOSED_HEADERS } from '../../plugins/cors.ts'
import { idempotencyHooks } from '../../ingest/idempotency.ts'
import { postScore, postScoreBatch } from '../../../schemas/score.ts'

/** Requests a minute a publishable key may send from one client address (docs/api.md#publishable-keys). */
export const PUBLISHABLE_PER_MINUTE = 30

/**
 * POST /v1/scores and POST /v1/scores/batch (API key): scores through the ingestion pipeline, as
 * events go through theirs (src/ingest/score-ingestion.ts). Each score is checked by the pipeline's
 * `schema` and `configs` steps, not by the route; both take an Idempotency-Key.
 */
const scores: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const { bodyLimit, batchBodyLimit } = app.routeSettings
  const authenticate = app.ingestion.pipeline.hook('key', (request: FastifyRequest) => app.authenticateKey(request))
  const { preHandler: idempotency, onSend } = idempotencyHooks(app.idempotency)

  /**
   * A publishable key is used from a page of one of its origins (the Origin header, which browsers
   * set and pages cannot), at most PUBLISHABLE_PER_MINUTE requests a minute per client address; the
   * answer then carries CORS headers for that origin. Run right after the key is checked, before the
   * body is parsed, so that the page can read every later refusal (a 415, a 400, a 429), and before
   * the Idempotency-Key, so a replay is checked too.
   */
  async function publishable (request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const key = request.apiKey
    if (key.kind !== 'publishable') return
    const origin = request.headers.origin
    if (origin === undefined || !(key.allowedOrigins ?? []).includes(origin)) throw forbidden('origin_not_allowed')
    reply.header('access-control-allow-origin', origin).header('access-control-expose-headers', EXPOSED_HEADERS)
    const admission = await app.rateLimiter.take(`pk:${key.keyId}:${request.ip}`, PUBLISHABLE_PER_MINUTE)
    if (admission.admitted < 1) throw rateLimited(admission.retryAfterMs / 1000)
  }
  const onRequest = [authenticate, publishable]
  const hooks = { onRequest, preHandler: idempotency, onSend, config: { publishableKeys: true } }

  app.post('/scores', { bodyLimit, ...hooks, schema: postScore }, async (request, reply) => {
    const ack = await app.scoreIngestion.ingestOne(callerOfKey(request.apiKey), request.body)
    return reply.code(202).send(ack)
  })

  app.post('/scores/batch', {
    bodyLimit: batchBodyLimit,
    ...hooks,
    config: { jsonItems: 'scores', publishableKeys: true },
    schema: postScoreBatch,
  }, async (request, reply) => {
    const { results, retryAfter } = await app.scoreIngestion.ingestBatch(callerOfKey(request.apiKey), request.body.scores, (i) => request.itemRefusal(i))
    if (retryAfter !== null) reply.header('retry-after', retryAfter)
    return reply.code(207).send({ results })
  })
}

export default scores
