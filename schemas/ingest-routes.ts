/** Request and response schemas of ingestion (API key). */
import { event } from './event.ts'
import { eventAck } from './event-ack.ts'
import { eventBatch } from './event-batch.ts'
import { apiKeyAuth, errorBody, errorResponses } from './common.ts'

const ingest = { tags: ['ingestion'], security: apiKeyAuth } as const
const { $id: _e, title: _t, ...eventBody } = event
const { $id: _a, title: _at, ...ack } = eventAck

export const postEvent = {
  ...ingest,
  summary: 'Send one event',
  description: 'The body is checked by the ingestion pipeline (after the API key, before the burst limit), against this schema and the input rules.',
  // Documented here, validated by the pipeline's own schema step (x-validated-by): the route compiles no validator for it.
  body: { ...eventBody, 'x-validated-by': 'ingestion-pipeline' },
  response: { 202: ack, ...errorResponses(400, 401, 403, 410, 413, 415, 429, 503) },
} as const

const { $id: _ig, ...errorShape } = errorBody
const { $id: _b, title: _bt, ...batchBody } = eventBatch

export const postBatch = {
  ...ingest,
  summary: 'Send 1 to 500 events; one result per event',
  description: 'Each event is checked on its own against the POST /v1/events body schema and the input rules; a bad event gets its own 400 result.',
  body: batchBody,
  response: {
    207: {
      type: 'object',
      required: ['results'],
      properties: {
        results: {
          type: 'array',
          description: 'in the order sent: `{ status: 202, ...acknowledgement }` or `{ status, ...error body }` exactly as the event alone would have got',
          items: {
            type: 'object',
            required: ['status'],
            properties: { status: { type: 'integer', examples: [202] }, ...ack.properties, ...errorShape.properties },
          },
        },
      },
    },
    ...errorResponses(400, 401, 413, 415, 503),
  },
} as const
