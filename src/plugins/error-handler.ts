import fp from 'fastify-plugin'
import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { isClickHouseRequestTimeout, NETWORK_ERROR_CODES } from '../domain/network-errors.ts'
import { HttpError, invalidText, payloadTooLarge } from '../http-error.ts'
import { KeyedLogThrottle, LogThrottle } from '../log-lines.ts'
import { IngestLogRefused } from '../ingest/log/ingest-log.ts'
import { compileRouteValidator, toDetails } from '../validation.ts'

// Network errors, and the SQLSTATEs of a Postgres that is not there for us right now: classes 08
// (connection exception), 53 (insufficient resources: too many connections, out of memory, disk
// full) and 57 (operator intervention: shutting down, starting up, a statement cancelled by
// statement_timeout), a database that refuses connections (55000), a lock not granted in time
// (55P03) and a database that does not exist (3D000, e.g. during a restore).
const OUTAGE_CODES = new Set([...NETWORK_ERROR_CODES, '55000', '55P03', '3D000'])
const OUTAGE_SQLSTATE_CLASSES = ['08', '53', '57']
// What node-postgres, ioredis and @clickhouse/client say when a connect, a pool checkout, a command
// or a request lost its connection or timed out (@clickhouse/client's own request timeout is
// recognised by isClickHouseRequestTimeout).
const OUTAGE_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|Connection is closed\.|Command timed out|Client has encountered a connection error|Stream isn't writeable)/
// A ClickHouse server's errors (their `type`) that say it cannot serve now, not that the query is wrong:
// its network to another node, a socket timeout, too many queries at once, a server shutting down.
const CLICKHOUSE_OUTAGE_TYPES = new Set(['NETWORK_ERROR', 'SOCKET_TIMEOUT', 'TOO_MANY_SIMULTANEOUS_QUERIES', 'ALL_CONNECTION_TRIES_FAILED', 'ABORTED'])

/** How often at most the 503 of a store that cannot be reached is logged (with the count of the others). */
const OUTAGE_LOG_EVERY_MS = 10_000

/** A failure to reach Postgres, Redis or ClickHouse in time (not a bug): the caller should retry, so it is a 503. */
function isStoreOutage (err: { code?: unknown; name?: string; message?: string; type?: unknown }): boolean {
  const code = typeof err.code === 'string' ? err.code : ''
  if (OUTAGE_CODES.has(code)) return true
  if (typeof err.type === 'string' && CLICKHOUSE_OUTAGE_TYPES.has(err.type)) return true
  if (/^[0-9A-Z]{5}$/.test(code) && OUTAGE_SQLSTATE_CLASSES.includes(code.slice(0, 2))) return true
  if (err.name === 'MaxRetriesPerRequestError') return true
  return isClickHouseRequestTimeout(err) || OUTAGE_MESSAGES.test(err.message ?? '')
}

// Values Postgres refuses as text of their type: a NUL character (22021, 22P05), an unpaired UTF-16
// surrogate in JSON (22P02). They come from the caller's input, not from us.
const INVALID_TEXT_CODES = new Set(['22021', '22P05', '22P02'])

/**
 * Errors Fastify answers before a route is found (the `frameworkErrors` server option): our JSON
 * bodies instead of Fastify's own, which echo the URL back.
 */
export function frameworkErrors (err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  switch (err.code) {
    case 'FST_ERR_MAX_PARAM_LENGTH':
      reply.code(414).send({ error: 'uri_too_long', message: 'a path parameter is too long' })
      return
    case 'FST_ERR_BAD_URL':
      reply.code(400).send({ error: 'bad_request', message: 'the URL is not valid' })
      return
    default:
      request.log.error({ err }, 'framework error')
      reply.code(500).send({ error: 'internal_error', requestId: request.id })
  }
}

/**
 * Requests Node's HTTP parser refuses before Fastify sees them (the `clientErrorHandler` server
 * option): a request line or header that is not HTTP (raw non-ASCII in the URL, a control character
 * in a header), headers too large, or a request not received within REQUEST_TIMEOUT_MS. Our JSON body
 * instead of Fastify's, which carries a `statusCode` key; the connection is closed either way.
 */
export function clientErrorHandler (this: FastifyInstance, err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const [status, body] = err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
    ? [408, { error: 'request_timeout', message: 'the whole request did not arrive in time' }]
    : err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, { error: 'headers_too_large', message: 'the request headers are too large' }]
      : [400, { error: 'bad_request', message: 'the request is not valid HTTP: characters outside ASCII in the URL must be percent-encoded, and headers cannot hold control characters' }]
  this.log.debug({ err }, 'client error')
  if (socket.writable) {
    const text = JSON.stringify(body)
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(text)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${text}`)
  }
  socket.destroy(err)
}

/**
 * One error handler for every route: typed HttpErrors become their JSON body; schema failures become
 * 400 validation_failed with details; body problems get their own codes; anything else is a 500
 * whose body says nothing about internals (the log has the stack, keyed by request id).
 */
export default fp(async function errors (app) {
  // Once every 10 s: an outage fails every request that needs the store.
  const outageLines = new LogThrottle(OUTAGE_LOG_EVERY_MS)
  // The same for a refusal of the service's own (the ingest log full or unwritable, reads waiting on
  // ClickHouse): one line per reason every 10 s, saying how many requests it stands for.
  const refusalLines = new KeyedLogThrottle<string>(OUTAGE_LOG_EVERY_MS)
  const refused = (request: FastifyRequest, reason: string, fields: Record<string, unknown> = {}) => {
    const held = refusalLines.pass(reason)
    if (held !== null) request.log.warn({ reason, alsoRefused: held, ...fields }, 'request refused: %s (this line at most every 10 s per reason)', reason)
  }
  // Which part of a request is checked where is decided in src/validation.ts; failures are answered below.
  app.setValidatorCompiler(compileRouteValidator)

  app.setErrorHandler(function handle (err: FastifyError | HttpError, request, reply) {
    if (err instanceof HttpError) {
      if (err.statusCode >= 500) refused(request, err.code, { code: err.code })
      return reply.code(err.statusCode).headers(err.headers).send(err.body())
    }
    if (err instanceof IngestLogRefused) {
      refused(request, err.reason)
      return reply.code(503).headers({ 'retry-after': String(err.retryAfterSeconds) }).send({ error: 'unavailable', reason: err.reason, message: err.message })
    }
    if (err.validation) {
      // A query parameter is named alone, as the search's own checks name it: a repeated one's
      // value is not told apart by its place among the values (`type`, not `type`, 0).
      const details = toDetails(err.validation as never, [], err.validationContext === 'querystring' ? 1 : Infinity)
      return reply.code(400).send({ error: 'validation_failed', message: validationMessage(err.validationContext), details })
    }
    switch (err.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return reply.code(413).send(payloadTooLarge(request.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit ?? 1_048_576).body())
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
    if (INVALID_TEXT_CODES.has((err as { code?: string }).code ?? '')) {
      const text = invalidText()
      return reply.code(text.statusCode).send(text.body())
    }
    if (isStoreOutage(err)) {
      const held = outageLines.pass()
      if (held !== null) request.log.warn({ err, alsoAnswered503: held }, 'a backing store is unreachable; answering 503 (this line at most every 10 s)')
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

/** What a schema failure's message says of where it was: each part named so that the sentence reads. */
function validationMessage (context: string | undefined): string {
  switch (context) {
    case 'headers': return 'the headers are not valid'
    case 'params': return 'the path parameters are not valid'
    case undefined: return 'the request is not valid'
    default: return `the ${context} is not valid`
  }
}
