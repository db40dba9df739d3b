/** Notification channels and their deliveries: records and the `/v1/me/channels` routes. */
import { CHANNEL_KINDS, EVENT_TYPES, TEST_EVENT } from '../src/domain/notifications.ts'
import { cursorParam, dashboardAuth, errorResponses, instant, matching, nextCursor, noContent, nullableInstant, nullableString } from './common.ts'

const me = { tags: ['dashboard'], security: dashboardAuth } as const
const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', maxLength: 64 } } } as const

const eventTypes = {
  type: 'array',
  items: { enum: EVENT_TYPES },
  minItems: 1,
  uniqueItems: true,
  description: 'the events delivered to the channel; all of them by default',
  examples: [['alert.triggered', 'alert.resolved']],
} as const
const url = { type: 'string', maxLength: 2048, ...matching('^https?://[^\\s]+$', 'must be an http:// or https:// URL without whitespace'), description: 'where to POST (webhook and slack channels)', examples: ['https://hooks.slack.com/services/T000/B000/XXXX'] } as const
const routingKey = { type: 'string', minLength: 1, maxLength: 128, ...matching('^\\S+$', 'must have no whitespace'), description: 'the PagerDuty integration (routing) key (pagerduty channels)' } as const
const label = { type: 'string', maxLength: 100, examples: ['on-call'] } as const

export const channel = {
  type: 'object',
  description: 'A notification channel. Slack URLs and PagerDuty routing keys grant posting, so they are shown masked.',
  required: ['id', 'kind', 'label', 'url', 'routingKey', 'events', 'enabled', 'disabledReason', 'disabledAt', 'lastSuccessAt', 'createdAt', 'updatedAt', 'previousSecretUntil'],
  additionalProperties: false,
  properties: {
    id: { type: 'string' },
    kind: { enum: CHANNEL_KINDS },
    label: { type: 'string' },
    url: { ...nullableString, description: 'webhook: as given; slack: masked; pagerduty: null (it posts to PAGERDUTY_EVENTS_URL); null too when the service cannot decrypt it' },
    routingKey: { ...nullableString, description: 'pagerduty: masked (the last four characters only when at least 16 more stay hidden); otherwise null; null too when the service cannot decrypt it' },
    events: { type: 'array', items: { enum: EVENT_TYPES } },
    enabled: { type: 'boolean' },
    disabledReason: { ...nullableString, description: 'why the service disabled the channel (a run of failed deliveries); null when enabled or disabled by its owner' },
    disabledAt: nullableInstant,
    lastSuccessAt: nullableInstant,
    createdAt: instant,
    updatedAt: instant,
    previousSecretUntil: { ...nullableInstant, description: 'webhook channels after a rotation: until when the secret it replaced still signs beside the new one (two signatures in `webhook-signature`); null otherwise' },
  },
} as const

export const createdChannel = {
  ...channel,
  description: 'The channel just created; a webhook channel also carries its signing secret, shown this once.',
  properties: {
    ...channel.properties,
    secret: { type: 'string', pattern: '^whsec_', description: 'webhook channels: the Standard Webhooks signing secret (`whsec_` + base64); only in this answer' },
  },
} as const

export const delivery = {
  type: 'object',
  description: 'One event sent (or being sent) to one channel, and how its attempts went.',
  required: ['id', 'event', 'status', 'attempts', 'maxAttempts', 'lastStatusCode', 'lastError', 'lastResponse', 'createdAt', 'firstAttemptAt', 'lastAttemptAt', 'nextAttemptAt', 'finishedAt'],
  additionalProperties: false,
  properties: {
    id: { type: 'string', description: '`msg_…`: the `webhook-id` header, the same on every attempt' },
    event: { enum: [...EVENT_TYPES, TEST_EVENT] },
    status: { enum: ['pending', 'retrying', 'delivered', 'failed', 'skipped'] },
    attempts: { type: 'integer' },
    maxAttempts: { type: 'integer' },
    lastStatusCode: { type: ['integer', 'null'], description: 'HTTP status of the last answer; null when none came' },
    lastError: { ...nullableString, description: 'why the last attempt failed (`HTTP 500`, `timed out after 5 s`, `refused: …`), or why it was skipped' },
    lastResponse: { ...nullableString, description: 'the first 1 KB of the last answer\'s body' },
    createdAt: instant,
    firstAttemptAt: nullableInstant,
    lastAttemptAt: nullableInstant,
    nextAttemptAt: { ...nullableInstant, description: 'when the next attempt is due (status retrying)' },
    finishedAt: nullableInstant,
  },
} as const

const readErrors = errorResponses(400, 401, 429, 503)
const itemErrors = errorResponses(400, 401, 404, 414, 429, 503)
const writeErrors = errorResponses(400, 401, 404, 409, 413, 415, 429, 503)

export const createChannel = {
  ...me,
  summary: 'Add a notification channel (webhook, Slack or PagerDuty)',
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['kind'],
    properties: { kind: { enum: CHANNEL_KINDS }, url, routingKey, label, events: eventTypes },
    examples: [{ kind: 'slack', url: 'https://hooks.slack.com/services/T000/B000/XXXX', label: 'alerts channel' }],
  },
  response: { 201: createdChannel, ...writeErrors },
} as const

export const listChannels = {
  ...me,
  summary: 'The caller\'s notification channels, newest first',
  response: { 200: { type: 'object', required: ['channels'], properties: { channels: { type: 'array', items: channel } } }, ...readErrors },
} as const

export const patchChannel = {
  ...me,
  summary: 'Change a channel: destination, label, events, or enable / disable it',
  params: idParams,
  body: {
    type: 'object',
    additionalProperties: false,
    minProperties: 1,
    properties: { url, routingKey, label, events: eventTypes, enabled: { type: 'boolean', description: 'true re-enables a disabled channel (and clears `disabledReason`)' } },
  },
  response: { 200: channel, ...writeErrors },
} as const

export const deleteChannel = {
  ...me, summary: 'Delete a channel and its delivery log', params: idParams, response: { 204: noContent, ...itemErrors },
} as const

export const testChannel = {
  ...me,
  summary: 'Send a test notification (one attempt; see its delivery in the log)',
  params: idParams,
  response: { 202: delivery, ...writeErrors },
} as const

export const rotateChannelSecret = {
  ...me,
  summary: 'Give a webhook channel a new signing secret (shown once); the old one signs beside it for a while',
  params: idParams,
  body: {
    type: ['object', 'null'],
    additionalProperties: false,
    properties: {
      previousValidHours: { type: 'integer', minimum: 0, maximum: 168, default: 24, description: 'how long the replaced secret keeps signing beside the new one, in hours; 0: it stops at once' },
    },
  },
  response: { 200: { ...createdChannel, description: 'The channel with its new signing secret, shown this once.' }, ...writeErrors },
} as const

export const listDeliveries = {
  ...me,
  summary: 'A channel\'s deliveries, newest first',
  params: idParams,
  querystring: { type: 'object', properties: { limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 }, cursor: cursorParam } },
  response: {
    200: { type: 'object', required: ['deliveries', 'nextCursor'], properties: { deliveries: { type: 'array', items: delivery }, nextCursor } },
    ...itemErrors,
  },
} as const
