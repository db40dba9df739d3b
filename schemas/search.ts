/**
 * The search filters of GET /v1/me/events, /sessions and /traces and the facets of
 * GET /v1/me/events/facets (docs/api.md#search). A repeatable parameter is an array: `type=tool&type=error`
 * (a single value is a list of one). Metadata filters are `meta.<dotted.path>=<value>` parameters,
 * which a schema cannot list by name; they are described here and checked by src/domain/search-filters.ts.
 */

/** A parameter that may be repeated: its values (a single value is a list of one). */
export const repeatable = (items: Record<string, unknown>, description: string) =>
  ({ type: 'array', items, description: `${description}; repeat for any of several (OR)` }) as const
const text = { type: 'string' } as const

/** The filters, as querystring properties. */
export const searchFilterParams = {
  type: repeatable({ enum: ['reasoning', 'tool', 'tx', 'decision', 'action', 'error'] }, 'event type'),
  outcome: repeatable({ enum: ['pending', 'success', 'failed'] }, 'outcome'),
  model: repeatable(text, 'model, exactly as sent (1 to 200 characters)'),
  tool: repeatable(text, '`toolExecuted`, exactly as sent (1 to 200 characters)'),
  sessionId: repeatable(text, '`metadata.sessionId` (1 to 200 characters)'),
  traceId: repeatable(text, '`metadata.traceId` (1 to 200 characters)'),
  fingerprint: repeatable(text, 'error-cluster fingerprint (16 lower-case hex characters)'),
  privacyLevel: repeatable({ enum: ['minimal', 'standard', 'full'] }, '`metadata.privacyLevel`'),
  costStatus: repeatable({ enum: ['priced', 'user_price', 'unknown_model', 'no_model'] }, 'how the cost was priced'),
  minCostUsd: { type: 'string', description: 'cost at least this many USD (inclusive; a decimal with at most 9 decimals)', examples: ['0.01'] },
  maxCostUsd: { type: 'string', description: 'cost at most this many USD (inclusive; a decimal with at most 9 decimals)', examples: ['1.5'] },
  minDurationMs: { type: 'string', description: '`durationMs` at least this (inclusive, integer); events without a duration never match', examples: ['1000'] },
  maxDurationMs: { type: 'string', description: '`durationMs` at most this (inclusive, integer); events without a duration never match', examples: ['60000'] },
  from: { type: 'string', description: 'event time at or after this instant (ISO 8601 date-time or unix milliseconds)', examples: ['2026-11-01T00:00:00Z'] },
  to: { type: 'string', description: 'event time before this instant (exclusive; ISO 8601 date-time or unix milliseconds)', examples: ['2026-11-27T00:00:00Z'] },
  hasMeta: repeatable(text, 'metadata has a value (string, number or boolean) at this dotted path or under it; repeated, every path must be present (AND)'),
  q: {
    type: 'string',
    description: 'full-text search: every term must occur (AND), `"quoted phrases"` as written, case-insensitive, as a substring of input, reasoning, errorMessage, toolExecuted, model or metadata values (docs/api.md#full-text-search-q)',
    examples: ['timeout "payment failed"'],
  },
} as const

/** agentId on the lists: repeatable; a value that is not a cuid is ignored (the spec's rule). */
export const agentIdsParam = repeatable(text, 'only this agent\'s events; a value that is not a cuid is ignored (the spec\'s rule)')

export const metaParamsDescription = 'Also `meta.<path>=<value>`: metadata has this value at this dotted path (`meta.git.branch=main`; strings as sent, numbers and booleans as JSON text; repeat for any of several values, several paths must all match).'

/** The score filters, which the lists and facets take and the live tail refuses. */
export const scoreParamsDescription = 'And `score.<name>=<value>`: the event, its span, its trace or its session has a score of this name (its latest write) whose label is the value (`score.tone=polite`, `score.thumbs=true`) or whose value lies in it (`score.accuracy=0.8..1`, `0.8..`, `..0.2`, or a number; booleans as 1 and 0); repeat for any of several values, several names must all match (docs/api.md#scores-in-the-search).'

const facetValue = {
  type: 'object',
  required: ['value', 'count'],
  properties: {
    value: { type: ['string', 'null'], description: 'null counts the events without a value (no outcome, model or tool sent)' },
    count: { type: 'integer', minimum: 0 },
  },
} as const

const facetList = (description: string) => ({ type: 'array', items: facetValue, description }) as const

/** GET /v1/me/events/facets. */
export const eventFacets = {
  type: 'object',
  description: 'Counts of the events matching the filters.',
  required: ['total', 'facets', 'metadata'],
  properties: {
    total: { type: 'integer', minimum: 0, description: 'events matching the filters' },
    facets: {
      type: 'object',
      required: ['type', 'outcome', 'model', 'tool', 'agentId', 'costStatus'],
      description: 'per field, its values by count (most frequent first, then by value; up to 20)',
      properties: {
        type: facetList('by event type'),
        outcome: facetList('by outcome'),
        model: facetList('by model'),
        tool: facetList('by `toolExecuted`'),
        agentId: {
          type: 'array',
          description: 'by agent, with its name',
          items: { ...facetValue, properties: { ...facetValue.properties, displayName: { type: ['string', 'null'] } } },
        },
        costStatus: facetList('by cost status'),
      },
    },
    metadata: {
      type: 'array',
      description: 'the 10 metadata paths most events have (ids and token counts the service keeps in columns left out), each with its 5 most frequent values',
      items: {
        type: 'object',
        required: ['key', 'count', 'values'],
        properties: {
          key: { type: 'string', description: 'dotted path, as `meta.<path>` filters take it' },
          count: { type: 'integer', minimum: 0, description: 'events with a value at this path' },
          values: facetList('its most frequent values'),
        },
      },
    },
  },
} as const

export const eventHistogram = {
  type: 'object',
  description: 'The events matching the filters per interval of event time: the non-empty intervals, oldest first.',
  required: ['interval', 'from', 'to', 'total', 'buckets'],
  properties: {
    interval: { type: 'string', description: 'as asked' },
    from: { type: 'string', format: 'date-time', description: 'the start of the window (since, or from)' },
    to: { type: 'string', format: 'date-time', description: 'its end (to, else the read\'s instant)' },
    total: { type: 'integer', minimum: 0, description: 'events counted' },
    buckets: {
      type: 'array',
      items: {
        type: 'object',
        required: ['start', 'events'],
        properties: {
          start: { type: 'string', format: 'date-time', description: 'the interval\'s start (intervals start on multiples of their length from the Unix epoch, UTC)' },
          events: { type: 'integer', minimum: 1 },
        },
      },
    },
  },
} as const
