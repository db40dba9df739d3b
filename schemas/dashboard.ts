import { storedScore } from './score.ts'
import { agentRef, anyJson, cuid, day, instant, matching, nullableInstant, nullableString, tokens } from './common.ts'

const privacyChip = { enum: ['MIN', 'STD', 'FULL', null], description: 'the chip of `metadata.privacyLevel` (minimal, standard, full); null when not sent' } as const

/** An event as the dashboard shows it (GET /v1/me/events, session and trace details). */
export const dashboardEvent = {
  type: 'object',
  description: 'An event as stored: every field of the ingestion shape (null when not sent), the agent, receive time, tokens, cost and privacy chip.',
  required: ['eventId', 'agentId', 'agent', 'timestamp', 'receivedAt', 'type', 'tokens', 'costUsd', 'costStatus', 'contentHash'],
  properties: {
    eventId: { type: 'string', pattern: '^evt_', examples: ['evt_01JTZ8Q2X4V7K9M3N5P8R2T6W0'] },
    agentId: { type: 'string', description: 'cuid of the agent (kept for compatibility; also in `agent`)' },
    agent: agentRef,
    timestamp: { ...instant, description: 'the event time: the payload `timestamp`, else the receive time' },
    receivedAt: instant,
    type: { enum: ['reasoning', 'tool', 'tx', 'decision', 'action', 'error'] },
    outcome: { enum: ['pending', 'success', 'failed', null] },
    model: nullableString,
    toolExecuted: nullableString,
    toolsConsidered: { type: 'array', items: { type: 'string' } },
    durationMs: { type: ['integer', 'null'] },
    input: anyJson,
    reasoning: nullableString,
    transaction: nullableString,
    amount: {
      type: ['object', 'null'],
      required: ['token', 'value'],
      properties: { token: { type: 'string' }, value: { type: 'number' } },
    },
    errorMessage: nullableString,
    metadata: anyJson,
    sessionId: nullableString,
    traceId: nullableString,
    spanId: { ...nullableString, description: 'the event\'s span in its trace: the OTLP span id (16 hex characters) or `metadata.spanId`' },
    parentSpanId: { ...nullableString, description: 'the span this event\'s span is a child of (OTLP parentSpanId or `metadata.parentSpanId`), null for a root' },
    privacyLevel: { enum: ['minimal', 'standard', 'full', null] },
    privacyChip,
    tokens,
    costUsd: { type: 'number', description: 'list-price cost in USD from the model and tokens' },
    costStatus: { enum: ['priced', 'user_price', 'unknown_model', 'no_model'], description: '`priced` by the catalogue, `user_price` by the caller\'s own price for the model; `unknown_model` (no price) and `no_model` cost 0' },
    errorFingerprint: { ...nullableString, description: '16 hex characters for error events, else null' },
    contentHash: { type: 'string', description: 'SHA-256 of the canonical JSON of the payload as sent' },
  },
} as const

const groupTotals = {
  start: { ...instant, description: 'the first event\'s timestamp' },
  end: { ...instant, description: 'when the last span finished: the latest timestamp + durationMs of its events (not the last one to start)' },
  durationMs: { type: 'integer', description: 'from start to end' },
  eventCount: { type: 'integer', description: 'number of events' },
  agents: { type: 'array', items: agentRef, description: 'the agents that sent its events' },
  errors: { type: 'integer', description: 'number of error events' },
  tokens,
  costUsd: { type: 'number' },
} as const
const groupRequired = ['start', 'end', 'durationMs', 'eventCount', 'agents', 'errors', 'tokens', 'costUsd'] as const

export const sessionSummary = {
  type: 'object',
  description: 'Events grouped by `metadata.sessionId`.',
  required: ['sessionId', ...groupRequired],
  properties: { sessionId: { type: 'string' }, ...groupTotals },
} as const

export const traceSummary = {
  type: 'object',
  description: 'Events grouped by `metadata.traceId`.',
  required: ['traceId', ...groupRequired],
  properties: { traceId: { type: 'string' }, ...groupTotals },
} as const

export const sessionDetail = {
  type: 'object',
  description: 'A session with all its events in time order (up to 10,000).',
  required: ['sessionId', ...groupRequired, 'events', 'scores'],
  properties: {
    sessionId: { type: 'string' },
    ...groupTotals,
    events: { type: 'array', items: dashboardEvent },
    scores: { type: 'array', items: storedScore, description: 'the session\'s scores (docs/api.md#scores-post-v1scores-v1mescores-v1mescore-configs), oldest first' },
  },
} as const

/** The most spans a trace detail holds: a longer run reads back its first ones (`truncated`). */
export const TRACE_SPANS_MAX = 10_000
const spansMax = TRACE_SPANS_MAX.toLocaleString('en-US')

const position = { type: 'integer', minimum: 0, description: 'a position in `spans`' } as const

/**
 * One span of a trace detail: its event, once, linked to the others by positions in `spans`. Members
 * without a value are left out (where an event in `/v1/me/events` shows null or an empty list).
 */
export const traceSpan = {
  type: 'object',
  description: 'An event of the trace as a span. Members without a value (null, an empty list, no tokens) are left out.',
  required: ['eventId', 'agentId', 'offsetMs', 'type', 'parent', 'depth', 'costUsd', 'costStatus'],
  properties: {
    eventId: dashboardEvent.properties.eventId,
    agentId: { type: 'string', description: 'cuid of the agent; its name is in the trace\'s `agents`' },
    offsetMs: { type: 'integer', description: 'the event time, in milliseconds from the trace `start`' },
    type: dashboardEvent.properties.type,
    parent: { type: ['integer', 'null'], minimum: 0, description: 'the position of the parent span in `spans`; null for a root' },
    children: { type: 'array', items: position, description: 'positions of the child spans, in time order; left out when none' },
    depth: { type: 'integer', description: '0 for a root' },
    durationMs: { type: 'integer' },
    outcome: { enum: ['pending', 'success', 'failed'] },
    model: { type: 'string' },
    toolExecuted: { type: 'string' },
    toolsConsidered: { type: 'array', items: { type: 'string' } },
    input: anyJson,
    reasoning: { type: 'string' },
    transaction: { type: 'string' },
    amount: { type: 'object', required: ['token', 'value'], properties: { token: { type: 'string' }, value: { type: 'number' } } },
    errorMessage: { type: 'string' },
    errorFingerprint: { type: 'string', description: '16 hex characters, for error events' },
    sessionId: { type: 'string' },
    spanId: { type: 'string', description: 'the OTLP span id (16 hex characters) or `metadata.spanId`' },
    parentSpanId: {
      type: 'string',
      description: 'only when the span names a parent that is not linked (not received yet, or a cycle cut there): a linked parent\'s span id is its own `spanId`',
    },
    privacyChip: { enum: ['MIN', 'STD', 'FULL'], description: 'the chip of `metadata.privacyLevel` (minimal, standard, full)' },
    tokens: { ...tokens, description: 'token counts from `metadata.tokensBreakdown` (`total` is their sum); left out when all are 0' },
    costUsd: dashboardEvent.properties.costUsd,
    costStatus: dashboardEvent.properties.costStatus,
    metadata: {
      type: 'object',
      additionalProperties: true,
      description: 'the metadata as sent without the keys shown above (traceId, spanId, parentSpanId, sessionId, privacyLevel, and the counts `tokens` carries); `denial`, `wakeup`, `otel` and any other key are here',
    },
  },
} as const

export const traceDetail = {
  type: 'object',
  description: 'A trace, whole: its totals, git context and working directory (the first event\'s that carries them), and every event once, as a span of its tree.',
  required: ['traceId', ...groupRequired, 'git', 'cwd', 'truncated', 'roots', 'spans', 'scores'],
  properties: {
    traceId: { type: 'string' },
    ...groupTotals,
    git: { description: '`metadata.git` of the first event that has it (object or string), else null' },
    cwd: nullableString,
    truncated: { type: 'boolean', description: `true when the trace has more than ${spansMax} events: \`spans\` and the totals are its first ${spansMax}` },
    roots: { type: 'array', items: position, description: 'positions of the root spans; every span when the trace has no span links (a flat timeline)' },
    spans: { type: 'array', items: traceSpan, description: 'every event of the trace once, in time order' },
    scores: { type: 'array', items: storedScore, description: 'the trace\'s scores, oldest first: of the whole trace (`spanId` null) and of its spans (`spanId` of one of `spans`)' },
  },
} as const

export const cluster = {
  type: 'object',
  description: 'Error events grouped by fingerprint. `status` is resolved only while no event of the cluster is later than `resolvedAt`.',
  required: ['fingerprint', 'count', 'firstSeen', 'lastSeen', 'sampleMessage', 'agents', 'tools', 'status', 'resolvedAt'],
  properties: {
    fingerprint: { type: 'string', ...matching('^[0-9a-f]{16}$', 'must be 16 lowercase hexadecimal digits (0-9, a-f)') },
    count: { type: 'integer', description: 'number of events' },
    firstSeen: instant,
    lastSeen: instant,
    sampleMessage: { ...nullableString, description: 'the latest message' },
    agents: { type: 'array', items: agentRef },
    tools: { type: 'array', items: { type: 'string' } },
    status: { enum: ['open', 'resolved'] },
    resolvedAt: nullableInstant,
  },
} as const

const spendFigures = {
  costUsd: { type: 'number' },
  eventCount: { type: 'integer' },
  errors: { type: 'integer', description: 'number of error events' },
  tokens,
  unpricedEvents: { type: 'integer', description: 'events whose model had no price, neither the catalogue\'s nor the caller\'s (their cost counts as 0)' },
} as const
const spendRequired = ['costUsd', 'eventCount', 'errors', 'tokens', 'unpricedEvents'] as const

export const spendSummary = {
  type: 'object',
  description: 'Spend from the daily rollup over `days` UTC days ending today.',
  required: ['days', 'from', 'total', 'by_agent', 'by_model', 'by_day', 'unpriced_models'],
  properties: {
    days: { type: 'integer' },
    from: { ...day, description: 'the first day of the window' },
    total: { type: 'object', required: spendRequired, properties: spendFigures, description: '`total` is the spec\'s name: the whole window' },
    by_agent: {
      type: 'array',
      description: '`by_agent` is the spec\'s name (snake case kept): one row per agent, highest cost first',
      items: { type: 'object', required: ['agentId', 'agent', 'displayName', ...spendRequired], properties: { agentId: { type: 'string' }, agent: agentRef, displayName: nullableString, ...spendFigures } },
    },
    by_model: {
      type: 'array',
      description: '`by_model` is the spec\'s name (snake case kept): one row per model (null: none sent), highest cost first',
      items: { type: 'object', required: ['model', ...spendRequired], properties: { model: nullableString, ...spendFigures } },
    },
    by_day: {
      type: 'array',
      description: '`by_day` is the spec\'s name (snake case kept): one row per day with events, oldest first',
      items: { type: 'object', required: ['day', ...spendRequired], properties: { day, ...spendFigures } },
    },
    unpriced_models: {
      type: 'array',
      description: 'models with no price (neither the catalogue\'s nor the caller\'s, see /v1/me/model-prices), with their events in the window (counted at cost 0 above); snake case like its siblings',
      items: { type: 'object', required: ['model', 'eventCount'], properties: { model: { type: 'string' }, eventCount: { type: 'integer' } } },
    },
  },
} as const

const kpis = {
  type: 'object',
  required: ['events24h', 'cost24h', 'events30d', 'cost30d', 'errors30d', 'errorRate30d'],
  properties: {
    events24h: { type: 'integer' },
    cost24h: { type: 'number' },
    events30d: { type: 'integer' },
    cost30d: { type: 'number' },
    errors30d: { type: 'integer' },
    errorRate30d: { type: 'number', description: 'errors30d / events30d (0 without events)' },
  },
} as const

const ownedAgentProperties = {
  id: cuid,
  displayName: { type: 'string' },
  snsName: nullableString,
  registryId: nullableString,
  framework: nullableString,
  isPublic: { type: 'boolean', description: 'listed in GET /v1/agents' },
  source: { type: 'string' },
  lastSeenAt: nullableInstant,
  createdAt: instant,
} as const
const ownedAgentRequired = ['id', 'displayName', 'snsName', 'registryId', 'framework', 'isPublic', 'source', 'lastSeenAt', 'createdAt'] as const

/** An agent as its owner sees it (PATCH answers this). */
export const ownedAgent = {
  type: 'object',
  required: ownedAgentRequired,
  properties: ownedAgentProperties,
} as const

export const ownedAgentWithKpis = {
  type: 'object',
  required: [...ownedAgentRequired, 'kpis'],
  properties: { ...ownedAgentProperties, kpis },
} as const

export const calendarDay = {
  type: 'object',
  required: ['day', 'eventCount', 'errors', 'costUsd', 'tokens'],
  properties: { day, eventCount: { type: 'integer' }, errors: { type: 'integer' }, costUsd: { type: 'number' }, tokens },
} as const

export const agentProfile = {
  type: 'object',
  required: [...ownedAgentRequired, 'kpis', 'calendar', 'recentSessions', 'recentErrors'],
  properties: {
    ...ownedAgentProperties,
    kpis,
    calendar: { type: 'array', items: calendarDay, description: '30 UTC days, oldest first, zero-filled' },
    recentSessions: { type: 'array', items: sessionSummary, description: 'the 5 latest sessions' },
    recentErrors: {
      type: 'array',
      description: 'the 5 latest error clusters',
      items: {
        type: 'object',
        required: ['fingerprint', 'count', 'lastSeen', 'sampleMessage', 'status'],
        properties: { fingerprint: { type: 'string' }, count: { type: 'integer' }, lastSeen: instant, sampleMessage: nullableString, status: { enum: ['open', 'resolved'] } },
      },
    },
  },
} as const
