import fp from 'fastify-plugin'
import type { FastifyError } from 'fastify'
import { HttpError } from '../errors.ts'
import { bodyAjv, queryAjv, toDetails } from '../schemas.ts'

const OUTAGE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', '57P01', '57P03', '08000', '08003', '08006'])

/** A failure to reach Postgres or Redis (not a bug): the caller should retry, so it is a 503. */
function isStoreOutage(err: { code?: unknown; name?: string; message?: string }): boolean {
  if (typeof err.code === 'string' && OUTAGE_CODES.has(err.code)) return true
  if (err.name === 'MaxRetriesPerRequestError') return true
  return err.message === 'Connection is closed.' || /^Connection terminated/.test(err.message ?? '')
}

/**
 * One error handler for every route: typed HttpErrors become their JSON body; schema failures become
 * 400 validation_failed with details; body problems get their own codes; anything else is a 500
 * whose body says nothing about internals (the log has the stack, keyed by request id).
 */
export default fp(async function errors(app) {
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : queryAjv).compile(schema))

  app.setErrorHandler(function handle(err: FastifyError | HttpError, request, reply) {
    if (err instanceof HttpError) {
      if (err.statusCode >= 500) request.log.warn({ code: err.code }, 'request refused: %s', err.code)
      return reply.code(err.statusCode).headers(err.headers).send(err.body())
    }
    if (err.validation) {
      return reply.code(400).send({ error: 'validation_failed', in: err.validationContext, details: toDetails(err.validation as never) })
    }
    switch (err.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return reply.code(413).send({ error: 'payload_too_large', message: `request body exceeds ${request.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit} bytes` })
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return reply.code(415).send({ error: 'unsupported_media_type', message: 'send the body as Content-Type: application/json' })
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return reply.code(400).send({ error: 'invalid_json', message: 'the JSON body is empty' })
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return reply.code(400).send({ error: 'invalid_json', message: 'the body is not valid JSON' })
    }
    if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH') {
      return reply.code(400).send({ error: 'invalid_json', message: 'the body is not valid JSON' })
    }
    // Postgres refuses text holding a NUL byte; that is the caller's input, not our failure.
    if ((err as { code?: string }).code === '22021' || (err as { code?: string }).code === '22P05') {
      return reply.code(400).send({ error: 'bad_request', message: 'text may not contain NUL characters' })
    }
    if (isStoreOutage(err)) {
      request.log.error({ err }, 'a backing store is unreachable; answering 503')
      return reply.code(503).headers({ 'retry-after': '1' }).send({ error: 'unavailable', message: 'a backing store is unreachable, retry with backoff' })
    }
    const status = err.statusCode ?? 500
    if (status >= 400 && status < 500) {
      return reply.code(status).send({ error: 'bad_request', message: err.message })
    }
    request.log.error({ err }, 'unhandled error')
    return reply.code(500).send({ error: 'internal_error', requestId: request.id })
  })

  // The API speaks JSON only: a text/plain body is refused with 415 instead of reaching validation as a string.
  app.removeContentTypeParser('text/plain')

  app.setNotFoundHandler((request, reply) => reply.code(404).send({ error: 'not_found' }))
}, { name: 'errors' })
