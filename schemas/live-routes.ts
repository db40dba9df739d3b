import { dashboardAuth, errorResponses } from './common.ts'
import { agentIdsParam, metaParamsDescription, searchFilterParams } from './search.ts'

/**
 * GET /v1/me/events/stream: the caller's events as they are acknowledged, as Server-Sent Events
 * (docs/api.md#live-tail). The filters are those of GET /v1/me/events.
 */
export const streamEvents = {
  tags: ['dashboard'],
  security: dashboardAuth,
  summary: 'The caller\'s events as they are acknowledged (Server-Sent Events)',
  description: 'Each `data:` is one event as `GET /v1/me/events` shows it, with an `id:` to resume from ' +
    '(`Last-Event-ID`, within `LIVE_REPLAY_SECONDS` and `LIVE_REPLAY_BATCHES`); `event: gap` says how many ' +
    'events a slow reader missed; `: heartbeat` comments keep an idle stream open. Authenticated by the ' +
    '`Authorization` header like every `/v1/me` read: read it with `fetch` (a browser `EventSource` cannot send it).',
  headers: {
    type: 'object',
    properties: { 'last-event-id': { type: 'string', maxLength: 64, description: 'the `id:` of the last event received: the stream starts after it' } },
  },
  querystring: {
    type: 'object',
    description: `The filters of GET /v1/me/events (since, limit and cursor do not apply). ${metaParamsDescription} \`score.<name>\` filters are refused (400): a score arrives after its event.`,
    properties: { agentId: agentIdsParam, ...searchFilterParams },
  },
  response: {
    200: {
      description: 'An endless `text/event-stream`',
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    },
    ...errorResponses(400, 401, 429, 503),
  },
} as const
