/** Request and response schemas of ingestion (API key). */
import { event } from './event.ts'
import { eventAck } from './event-ack.ts'
import { eventBatch } from './event-batch.ts'
import { apiKeyAuth, errorBody, errorResponses, printableAscii } from './common.ts'

const ingest = { tags: ['ingestion'], security: apiKeyAuth } as const
const { $id: _e, title: _t, ...eventBody } = event
const { $id: _a, title: _at, ...ack } = eventAck
const { $id: _ig, ...errorShape } = errorBody
const { title: _et, description: _ed, ...errorFields } = errorShape

/** The Idempotency-Key request header of both event routes (IETF httpapi draft, as Stripe uses it). */
const idempotencyHeaders = {
  type: 'object',
  properties: {
    'idempotency-key': {
      type: 'string',
      minLength: 1,
      maxLength: 255,
      ...printableAscii,
      description: 'Optional: a key of your choice (1-255 printable ASCII characters, e.g. a UUID), new for each request and the same on its retries. ' +
        'Within `IDEMPOTENCY_WINDOW_HOURS` (24 h) of a 2xx answer, a request of the same user with the same key gets that answer again ' +
        '(same status and body, same event ids, header `Idempotent-Replayed: true`) and stores nothing. ' +
        'An answer other than a 2xx stored nothing and is not kept: its retry runs again.',
      examples: ['8e03978e-40d5-43e8-bc93-6894a57f9324'],
    },
  },
} as const

/** Response headers of an answer that may be a replay (events and scores). */
export const replayHeaders = {
  'idempotent-replayed': { type: 'string', enum: ['true'], description: 'present when this is the answer of an earlier request with the same Idempotency-Key, replayed' },
} as const

/** 409 and 422 of a request with an Idempotency-Key (events and scores). */
export const idempotencyErrors = {
  409: { ...errorFields, description: 'A request with the same Idempotency-Key is still under way (`conflict`, reason `idempotency_key_in_flight`); retry once it is answered' },
  422: { ...errorFields, description: 'The Idempotency-Key was used for a request with another body or path within the window (`idempotency_key_reused`)' },
} as const

export const postEvent = {
  ...ingest,
  summary: 'Send one event',
  description: 'The body is checked by the ingestion pipeline (after the API key, before the burst limit), against this schema and the input rules.',
  // Documented here, validated by the pipeline's own schema step (x-validated-by): the route compiles no validator for it.
  body: { ...eventBody, 'x-validated-by': 'ingestion-pipeline' },
  headers: idempotencyHeaders,
  response: { 202: { ...ack, headers: replayHeaders }, ...errorResponses(400, 401, 403, 410, 413, 415, 429, 503), ...idempotencyErrors },
} as const

const { $id: _b, title: _bt, ...batchBody } = eventBatch

export const postBatch = {
  ...ingest,
  summary: 'Send 1 to 500 events; one result per event',
  description: 'Each event is checked on its own against the POST /v1/events body schema and the input rules; a bad event gets its own 400 result.',
  body: batchBody,
  headers: idempotencyHeaders,
  response: {
    207: {
      type: 'object',
      headers: replayHeaders,
      required: ['results'],
      properties: {
        results: {
          type: 'array',
          description: 'in the order sent: `{ status: 202, ...acknowledgement }` or `{ status, ...error body }` exactly as the event alone would have got',
          items: {
            type: 'object',
            required: ['status'],
            properties: {
              status: { type: 'integer', examples: [202] },
              ...ack.properties,
              ...errorShape.properties,
              retryAfter: { type: 'integer', minimum: 1, description: 'a 429 result: seconds until this event would fit (the Retry-After it would have got alone)', examples: [20] },
            },
          },
        },
      },
    },
    ...errorResponses(400, 401, 403, 413, 415, 503),
    ...idempotencyErrors,
  },
} as const

// OTLP/HTTP answers errors with a google.rpc.Status in the request's encoding (the OTLP/HTTP
// specification), not with the error body of the other routes. additionalProperties lets the service's
// one error handler hand its whole error body to the route, which re-encodes it as a Status.
const otlpStatus = (description: string) => ({
  type: 'object',
  description: `${description}. The body is a google.rpc.Status (protobuf, or JSON for a JSON request): \`code\` the gRPC equivalent, \`message\` our error code, reason and message.`,
  // No `required`: the serializer of this schema receives the error handler's body, which the route then re-encodes.
  additionalProperties: true,
  properties: {
    code: { type: 'integer', description: 'gRPC status code (informative only, as the specification says)', examples: [8] },
    message: { type: 'string', examples: ['rate_limited (retry after 3 s)'] },
  },
}) as const

export const postTraces = {
  ...ingest,
  summary: 'Export OpenTelemetry spans (OTLP/HTTP)',
  description: 'The standard OTLP/HTTP trace path: an ExportTraceServiceRequest (opentelemetry-proto v1.11.0) as `application/x-protobuf` or OTLP JSON, optionally gzip-compressed, each span becoming one event through the ingestion pipeline. Answers in the request\'s encoding.',
  consumes: ['application/x-protobuf', 'application/json'],
  // Documented here; decoded and checked by the route itself (protobuf or OTLP JSON), so no validator is compiled.
  body: {
    type: 'object',
    'x-validated-by': 'otlp-decoder',
    description: 'ExportTraceServiceRequest: `resourceSpans[].scopeSpans[].spans[]` (OTLP JSON: lowerCamelCase, hex ids, enums as integers or by name)',
    properties: { resourceSpans: { type: 'array', items: { type: 'object' } } },
  },
  response: {
    200: {
      type: 'object',
      description: 'ExportTraceServiceResponse (protobuf for a protobuf request): empty when every span was accepted, else `partialSuccess` with the number of refused spans and why',
      properties: {
        partialSuccess: {
          type: 'object',
          properties: {
            rejectedSpans: { type: 'string', description: 'int64 as a JSON string', examples: ['2'] },
            errorMessage: { type: 'string', examples: ['2 of 512 spans refused: 2 rate_limited (retry after 3 s)'] },
          },
        },
      },
    },
    400: otlpStatus('The body cannot be decoded, or no span of it is valid'),
    401: otlpStatus('Missing, invalid or revoked API key'),
    403: otlpStatus('No span is for an agent the key may send for'),
    410: otlpStatus('Every span is for a deleted agent'),
    413: otlpStatus('The body, once inflated, is over BATCH_BODY_LIMIT'),
    415: otlpStatus('Not application/x-protobuf or application/json, or a Content-Encoding other than gzip'),
    429: otlpStatus('No span fits the burst limit; Retry-After says when to retry'),
    500: otlpStatus('Unexpected error'),
    503: otlpStatus('The ingest log is full, or Postgres or Redis is unreachable; Retry-After says when to retry'),
  },
} as const
