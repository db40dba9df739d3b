import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { createGunzip } from 'node:zlib'
import { encodeResponse, encodeStatus, type OtlpEncoding } from '../../domain/otlp-codec.ts'
import { HttpError } from '../../http-error.ts'
import { CHARSET_REFUSED, charsetRefusal } from '../../plugins/json-body.ts'
import { callerOfKey } from '../../ingest/ingestion-service.ts'
import { postTraces } from '../../../schemas/ingest-routes.ts'

const CONTENT_TYPES: Record<OtlpEncoding, string> = { protobuf: 'application/x-protobuf', json: 'application/json' }

// gRPC codes carried in the Status of an error response (OTLP clients only log them).
const GRPC_CODES: Record<number, number> = { 400: 3, 401: 16, 403: 7, 404: 5, 408: 4, 410: 5, 413: 8, 414: 3, 415: 3, 429: 8, 500: 13, 503: 14 }

function encodingOf (request: FastifyRequest): OtlpEncoding {
  return (request.headers['content-type'] ?? '').toLowerCase().startsWith('application/json') ? 'json' : 'protobuf'
}

/**
 * POST /v1/traces, the OTLP/HTTP trace endpoint: protobuf or JSON bodies, optionally gzip-compressed,
 * answered with an ExportTraceServiceResponse in the request's encoding, and every error (from this
 * scope's hooks or the service's one error handler) as a google.rpc.Status in that encoding.
 * This plugin is encapsulated: its body parsers and hooks apply to this route only.
 */
const otlp: FastifyPluginAsync = async (app) => {
  const bodyLimit = app.routeSettings.batchBodyLimit

  app.removeContentTypeParser('application/json')
  // application/protobuf is what some clients send for the same encoding.
  app.addContentTypeParser(['application/x-protobuf', 'application/protobuf'], { parseAs: 'buffer', bodyLimit },
    (_request, body, done) => done(null, body))
  // OTLP's JSON is UTF-8, as all JSON is.
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (request, body, done) => {
    done(charsetRefusal(request.headers['content-type'], (body as Buffer).length), body)
  })

  // Content-Encoding: gzip is inflated here; bodyLimit then applies to the inflated body, so a small
  // compressed body cannot expand past it.
  app.addHook('preParsing', async (request, _reply, payload) => {
    const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase()
    if (encoding === 'identity' || encoding === '') return payload
    if (encoding !== 'gzip') throw new HttpError(415, 'unsupported_media_type', { message: 'Content-Encoding must be gzip or identity' })
    const inflated = Object.assign(createGunzip(), { receivedEncodedLength: 0 })
    // Registered before Fastify's own listener: a body that is not gzip is the client's fault (400), not ours.
    inflated.on('error', (err: Error & { statusCode?: number }) => { err.statusCode = 400 })
    payload.on('data', (chunk: Buffer) => { inflated.receivedEncodedLength += chunk.length })
    payload.on('error', (err) => inflated.destroy(err))
    payload.pipe(inflated)
    return inflated
  })

  // Error bodies come from the one error handler as JSON ({ error, reason, message, details }); OTLP
  // clients expect a Status in the request's encoding.
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode < 400 || typeof payload !== 'string') return payload
    const encoding = encodingOf(request)
    let error: { error?: string; reason?: string; message?: string; details?: { path: unknown[]; message: string }[] } = {}
    try {
      error = JSON.parse(payload)
    } catch { /* not ours: answer with the status alone */ }
    // A wrong Content-Encoding says so itself; a wrong Content-Type is told what to send.
    const message = error.error === 'unsupported_media_type' && !error.message?.startsWith('Content-Encoding') && !error.message?.startsWith(CHARSET_REFUSED)
      ? 'unsupported_media_type: send Content-Type application/x-protobuf or application/json'
      : [error.error ?? 'error', error.reason && `(${error.reason})`, error.message && `: ${error.message}`,
          error.details?.[0] && `: ${error.details[0].path.join('.')} ${error.details[0].message}`].filter(Boolean).join(' ').replace(' :', ':')
    reply.type(CONTENT_TYPES[encoding])
    return encodeStatus(encoding, GRPC_CODES[reply.statusCode] ?? 2, message)
  })

  app.post<{ Body: Buffer | undefined }>('/traces', {
    bodyLimit,
    schema: postTraces,
    onRequest: app.ingestion.pipeline.hook('key', (request: FastifyRequest) => app.authenticateKey(request)),
  }, async (request, reply) => {
    if (!Buffer.isBuffer(request.body)) throw new HttpError(415, 'unsupported_media_type')
    const encoding = encodingOf(request)
    const outcome = await app.otlp.export(callerOfKey(request.apiKey), request.body, encoding)
    return reply.code(200).type(CONTENT_TYPES[encoding]).send(encodeResponse(encoding, outcome.rejectedSpans, outcome.errorMessage))
  })
}

export default otlp
