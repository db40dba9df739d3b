/** Request and response schemas of the `/v1/me` routes (dashboard token). */
import { agentProfile, cluster, dashboardEvent, ownedAgent, ownedAgentWithKpis, sessionDetail, sessionSummary, spendSummary, traceDetail, traceSummary } from './dashboard.ts'
import { alert, alertSettings, alertSettingsBody, alertStatus } from './alert.ts'
import { apiKey, createdApiKey } from './api-key.ts'
import { eventAck } from './event-ack.ts'
import { user } from './user.ts'
import { LENIENT, cuid, cursorParam, dashboardAuth, errorResponses, matching, nextCursor, noContent } from './common.ts'
import { agentIdsParam, eventFacets, eventHistogram, metaParamsDescription, scoreParamsDescription, searchFilterParams } from './search.ts'

const me = { tags: ['dashboard'], security: dashboardAuth } as const
const readErrors = errorResponses(400, 401, 429, 503)
const itemErrors = errorResponses(400, 401, 404, 414, 429, 503)
const writeErrors = errorResponses(400, 401, 404, 409, 413, 415, 429, 503)

const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', maxLength: 64 } } } as const
const groupId = { type: 'string', minLength: 1, maxLength: 200 } as const
const sessionParams = { type: 'object', required: ['id'], properties: { id: groupId } } as const
const traceParams = { type: 'object', required: ['traceId'], properties: { traceId: groupId } } as const
const lenientLimit = (min: number, max: number, fallback: number) =>
  ({ type: 'string', description: `clamped to ${min}..${max}; default ${fallback} (also for a value that is not a number, or one given more than once)`, examples: [String(fallback)], [LENIENT]: true }) as const
const since = (fallback: string) =>
  ({ type: 'string', description: `\`24h\`, \`7d\`, \`30d\` or \`all\`; default \`${fallback}\`; any other value is ignored (the spec's rule), as is one given more than once`, examples: ['24h'], [LENIENT]: true }) as const
export const getMe = {
  ...me, summary: 'The caller', response: { 200: user, ...errorResponses(401, 429, 503) },
} as const

export const patchMe = {
  ...me,
  summary: 'Change the caller\'s handle',
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['handle'],
    properties: {
      handle: {
        type: 'string',
        ...matching('^[A-Za-z0-9_](?:[A-Za-z0-9_-]{1,30})[A-Za-z0-9_]$', 'must be 3 to 32 letters, digits, _ or -, not starting or ending with -'),
        description: '3 to 32 letters, digits, _ or -; not starting or ending with -',
        examples: ['alice_01'],
      },
    },
  },
  response: { 200: user, ...writeErrors },
} as const

export const listKeys = {
  ...me,
  summary: 'The caller\'s live API keys, newest first (never the secret)',
  response: { 200: { type: 'object', required: ['keys'], properties: { keys: { type: 'array', items: apiKey } } }, ...errorResponses(401, 429, 503) },
} as const

export const createKey = {
  ...me,
  summary: 'Create an API key; the secret is in this answer only',
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['label'],
    properties: {
      label: { type: 'string', minLength: 1, maxLength: 100, examples: ['laptop'] },
      agentId: { ...cuid, description: 'binds the key to this agent of the caller' },
      kind: { enum: ['secret', 'publishable'], description: 'default `secret`; `publishable`: a key a web page may hold in the open (docs/api.md#publishable-keys), which needs `allowedOrigins`' },
      allowedOrigins: {
        type: 'array',
        minItems: 1,
        maxItems: 20,
        uniqueItems: true,
        items: {
          type: 'string',
          maxLength: 300,
          ...matching('^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$', 'must be an origin: http:// or https://, a host of letters, digits, dots and hyphens, and an optional :port; no path'),
        },
        description: 'publishable keys only: the origins (`https://app.example.com`, no path) whose pages may use the key; stored as browsers send them (scheme and host in lower case, no default port); a port must be 1-65535 without leading zeros',
      },
    },
  },
  response: { 201: createdApiKey, ...writeErrors },
} as const

export const revokeKey = {
  ...me, summary: 'Revoke an API key (refused at once on every instance)', params: idParams, response: { 204: noContent, ...itemErrors },
} as const

export const listAgents = {
  ...me,
  summary: 'The caller\'s live agents with KPIs',
  querystring: { type: 'object', properties: { limit: lenientLimit(1, 1000, 100), cursor: cursorParam } },
  response: {
    200: { type: 'object', required: ['agents', 'nextCursor'], properties: { agents: { type: 'array', items: ownedAgentWithKpis }, nextCursor } },
    ...readErrors,
  },
} as const

export const getAgent = {
  ...me, summary: 'One agent: profile, KPIs, 30-day calendar, recent sessions and errors', params: idParams, response: { 200: agentProfile, ...itemErrors },
} as const

export const patchAgent = {
  ...me,
  summary: 'Rename an agent, or publish or unpublish it',
  params: idParams,
  body: {
    type: 'object',
    additionalProperties: false,
    minProperties: 1,
    properties: {
      displayName: { type: 'string', minLength: 1, maxLength: 120, ...matching('\\S', 'must hold a character other than whitespace'), description: 'trimmed; unique among the caller\'s agents', examples: ['research-bot'] },
      isPublic: { type: 'boolean', description: 'true lists the agent in the public GET /v1/agents (and its profile); false hides it again' },
    },
  },
  response: { 200: ownedAgent, ...writeErrors },
} as const

export const deleteAgent = {
  ...me, summary: 'Soft-delete an agent; ingestion for it answers 410 from then on', params: idParams, response: { 204: noContent, ...itemErrors },
} as const

export const listEvents = {
  ...me,
  summary: 'The caller\'s events, newest first',
  querystring: {
    type: 'object',
    description: `${metaParamsDescription} ${scoreParamsDescription}`,
    properties: {
      limit: lenientLimit(1, 1000, 50),
      since: since('all'),
      agentId: agentIdsParam,
      cursor: cursorParam,
      ...searchFilterParams,
    },
  },
  response: { 200: { type: 'object', required: ['events', 'nextCursor'], properties: { events: { type: 'array', items: dashboardEvent }, nextCursor } }, ...readErrors },
} as const

export const listSessions = {
  ...me,
  summary: 'Sessions by latest activity',
  querystring: {
    type: 'object',
    description: `A session matches when any of its events matches the filters. ${metaParamsDescription} ${scoreParamsDescription}`,
    properties: { limit: lenientLimit(1, 100, 20), since: since('all'), cursor: cursorParam, agentId: agentIdsParam, ...searchFilterParams },
  },
  response: { 200: { type: 'object', required: ['sessions', 'nextCursor'], properties: { sessions: { type: 'array', items: sessionSummary }, nextCursor } }, ...readErrors },
} as const

export const getSession = {
  ...me, summary: 'One session with all its events', params: sessionParams, response: { 200: sessionDetail, ...itemErrors },
} as const

export const listTraces = {
  ...me,
  summary: 'Traces by latest activity',
  querystring: {
    type: 'object',
    description: `A trace matches when any of its events matches the filters; giving \`from\` lifts the default \`since\` of 7d. ${metaParamsDescription} ${scoreParamsDescription}`,
    properties: { limit: lenientLimit(1, 200, 50), since: since('7d'), cursor: cursorParam, agentId: agentIdsParam, ...searchFilterParams },
  },
  response: { 200: { type: 'object', required: ['traces', 'nextCursor'], properties: { traces: { type: 'array', items: traceSummary }, nextCursor } }, ...readErrors },
} as const

export const listEventFacets = {
  ...me,
  summary: 'Counts of the caller\'s events matching the filters, per type, outcome, model, tool, agent, cost status and metadata path',
  querystring: {
    type: 'object',
    description: `${metaParamsDescription} ${scoreParamsDescription}`,
    properties: { since: since('all'), agentId: agentIdsParam, ...searchFilterParams },
  },
  response: { 200: eventFacets, ...readErrors },
} as const

export const listEventHistogram = {
  ...me,
  summary: 'The caller\'s events matching the filters, counted per interval of event time',
  querystring: {
    type: 'object',
    description: `${metaParamsDescription} ${scoreParamsDescription}`,
    properties: {
      since: since('24h'),
      interval: { type: 'string', description: '`1m`, `5m`, `15m`, `1h` (default) or `1d` (UTC days); the window may hold at most 1,440 of them (400 otherwise)' },
      agentId: agentIdsParam,
      ...searchFilterParams,
    },
  },
  response: { 200: eventHistogram, ...readErrors },
} as const

export const getTrace = {
  ...me, summary: 'One trace, whole: totals, git context and its spans as a tree', params: traceParams, response: { 200: traceDetail, ...itemErrors },
} as const

const fingerprintParams = { type: 'object', required: ['fingerprint'], properties: { fingerprint: cluster.properties.fingerprint } } as const

export const listErrors = {
  ...me,
  summary: 'Error clusters, latest first (up to 500)',
  querystring: { type: 'object', properties: { since: since('7d') } },
  response: { 200: { type: 'object', required: ['clusters'], properties: { clusters: { type: 'array', items: cluster } } }, ...readErrors },
} as const

export const resolveCluster = {
  ...me, summary: 'Mark an error cluster resolved', params: fingerprintParams, response: { 200: cluster, ...itemErrors },
} as const

export const reopenCluster = {
  ...me, summary: 'Re-open an error cluster', params: fingerprintParams, response: { 200: cluster, ...itemErrors },
} as const

export const spend = {
  ...me,
  summary: 'Spend summary',
  querystring: { type: 'object', properties: { days: { type: 'integer', minimum: 1, maximum: 365, default: 30, description: 'today (UTC) and the days - 1 before it' } } },
  response: { 200: spendSummary, ...readErrors },
} as const

export const testEvent = {
  ...me, summary: 'Send a synthetic event to the private placeholder agent `test-agent`', response: { 202: eventAck, ...errorResponses(401, 410, 413, 415, 429, 503) },
} as const

export const listAlerts = {
  ...me,
  summary: 'Alerts, newest first',
  querystring: {
    type: 'object',
    properties: {
      status: { enum: ['active', 'acknowledged', 'snoozed', 'all'], default: 'all' },
      count: { type: 'boolean', default: false, description: 'true adds `counts`' },
      limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
      cursor: cursorParam,
    },
  },
  response: {
    200: {
      type: 'object',
      required: ['alerts', 'nextCursor'],
      properties: {
        alerts: { type: 'array', items: alert },
        nextCursor,
        counts: {
          type: 'object',
          required: ['active', 'acknowledged', 'snoozed', 'total'],
          properties: { active: { type: 'integer' }, acknowledged: { type: 'integer' }, snoozed: { type: 'integer' }, total: { type: 'integer' } },
        },
      },
    },
    ...readErrors,
  },
} as const

export const alertTransition = (summary: string) => ({
  ...me, summary, params: idParams, response: { 200: alert, ...writeErrors },
}) as const

export const snoozeAlert = {
  ...me,
  summary: 'Snooze an active or snoozed alert (re-snoozing extends it)',
  params: idParams,
  querystring: { type: 'object', properties: { hours: { type: 'integer', minimum: 1, maximum: 168, default: 1 } } },
  response: { 200: alert, ...writeErrors },
} as const

export const getAlertSettings = {
  ...me, summary: 'Effective alert thresholds and the caller\'s overrides', response: { 200: alertSettings, ...errorResponses(401, 429, 503) },
} as const

export const putAlertSettings = {
  ...me, summary: 'Replace the caller\'s threshold overrides', body: alertSettingsBody, response: { 200: alertSettings, ...writeErrors },
} as const

export { alertStatus }
