/**
 * Building blocks shared by the API's schemas. Every schema in this folder is a TypeScript module
 * exporting plain JSON Schema objects `as const`: the one source for request validation (Ajv),
 * response serialization (fast-json-stringify), the handlers' TypeScript types (json-schema-to-ts
 * through Fastify's type provider) and the OpenAPI document (GET /openapi.json).
 */

const ERROR_DESCRIPTIONS = {
  400: 'The request is malformed or a value is out of range (`validation_failed` with `details`, `invalid_json`, `bad_request`, `invalid_text`)',
  401: 'Missing, invalid or revoked credentials (`unauthorized` with `reason`)',
  403: 'The credentials may not do this (`forbidden` with `reason`)',
  404: 'Not found, or not the caller\'s (`not_found`)',
  409: 'The change conflicts with the current state (`conflict` with `reason`)',
  410: 'The agent was deleted (`agent_deleted`)',
  413: 'The body is larger than allowed (`payload_too_large`)',
  414: 'A path parameter is too long (`uri_too_long`)',
  415: 'The body is not `application/json` (`unsupported_media_type`)',
  429: 'Rate limited (`rate_limited`); retry after the `Retry-After` header\'s seconds',
  500: 'An internal error (`internal_error`); the body carries the `requestId` of the log lines',
  502: 'No upstream answered (`upstream_unavailable`)',
  503: 'A backing store or the ingest log is unavailable (`unavailable`, `auth_unavailable`); retry after `Retry-After`',
} as const

export type ErrorStatus = keyof typeof ERROR_DESCRIPTIONS

/** The one error body of every route, Fastify's own 400/404/413/415 and the auth hooks' 401/403 included. */
export const errorBody = {
  $id: 'error.json',
  title: 'Error',
  description: 'Every error response: a machine-readable `error` code and, where useful, a `reason`, `details`, a `message`, or the `requestId` its log lines are keyed by (5xx).',
  type: 'object',
  required: ['error'],
  additionalProperties: false,
  properties: {
    error: { type: 'string', description: 'machine-readable code', examples: ['validation_failed'] },
    reason: { type: 'string', description: 'a finer code for the same error', examples: ['missing_bearer'] },
    message: { type: 'string', description: 'for people; never internals' },
    requestId: { type: 'string', description: 'the id of the request in the service log' },
    details: {
      type: 'array',
      description: 'what was wrong, one entry per problem',
      items: {
        type: 'object',
        required: ['path', 'message'],
        additionalProperties: false,
        properties: {
          path: { type: 'array', items: { type: ['string', 'integer'] }, description: 'keys and indices down to the offending value' },
          message: { type: 'string' },
        },
      },
    },
  },
  examples: [{ error: 'validation_failed', details: [{ path: ['metadata', 'tokensBreakdown', 'output'], message: 'must be integer' }] }],
} as const

type ErrorResponse<S extends ErrorStatus> = Omit<typeof errorBody, '$id' | 'title' | 'description'> & { description: (typeof ERROR_DESCRIPTIONS)[S] }

/** Error responses for the given statuses, each the one error body with its description; 500 always included. */
export function errorResponses<const S extends readonly ErrorStatus[]> (...statuses: S): { [K in S[number] | 500]: ErrorResponse<K> } {
  const out: Record<number, unknown> = {}
  const { $id: _id, title: _title, description: _d, ...body } = errorBody
  for (const s of [...statuses, 500 as const]) out[s] = { ...body, description: ERROR_DESCRIPTIONS[s] }
  return out as { [K in S[number] | 500]: ErrorResponse<K> }
}

export const nullableString = { type: ['string', 'null'] } as const
export const nullableNumber = { type: ['number', 'null'] } as const
export const instant = { type: 'string', format: 'date-time', description: 'ISO 8601 UTC instant', examples: ['2026-05-01T10:00:00.000Z'] } as const
export const nullableInstant = { type: ['string', 'null'], format: 'date-time', description: 'ISO 8601 UTC instant, or null' } as const
export const day = { type: 'string', format: 'date', description: 'a UTC day', examples: ['2026-05-01'] } as const
/**
 * The keyword that says a `pattern`'s rule in words. A value that fails the pattern is answered with
 * these words (src/validation.ts), as a user can act on them and not on a regex; the OpenAPI document
 * carries them too. Every pattern a request is checked against has them (test/validation.test.ts).
 */
export const PATTERN_MESSAGE = 'x-pattern-message'

/**
 * The keyword that marks a lenient query parameter: a value it cannot read is its default, not a 400
 * (the spec's rule for `limit` and `since`), and so is a value given more than once. Any other
 * single-valued query parameter given more than once is a 400 naming it (src/routes/v1/me/autohooks.ts).
 */
export const LENIENT = 'x-lenient'

/** A `pattern` and its rule in words (`must …`, as the other messages of a 400's details read). */
export function matching<P extends string, M extends `must ${string}`> (pattern: P, message: M) {
  return { pattern, [PATTERN_MESSAGE]: message } as const
}

/** Text of printable ASCII characters (a header's value, say). */
export const printableAscii = matching('^[\\x20-\\x7E]+$', 'must be printable ASCII characters: letters, digits, punctuation and spaces')
export const cuid = { type: 'string', ...matching('^c[a-z0-9]{24}$', 'must be a cuid: c and 24 lowercase letters or digits'), description: 'a cuid', examples: ['cm9x2k3l40000abcdefghijkl'] } as const
export const anyJson = { description: 'any JSON value as sent' } as const
export const freeObject = { type: 'object', additionalProperties: true } as const

/** Token counts: the same object wherever tokens are reported. */
export const tokens = {
  type: 'object',
  description: 'token counts from `metadata.tokensBreakdown`; `total` is their sum',
  required: ['inputBase', 'cacheCreation', 'cacheRead', 'output', 'total'],
  additionalProperties: false,
  properties: {
    inputBase: { type: 'integer' },
    cacheCreation: { type: 'integer' },
    cacheRead: { type: 'integer' },
    output: { type: 'integer' },
    total: { type: 'integer' },
  },
  examples: [{ inputBase: 900, cacheCreation: 0, cacheRead: 0, output: 120, total: 1020 }],
} as const

/** An agent wherever a record refers to one. */
export const agentRef = {
  type: 'object',
  description: 'the agent a record refers to',
  required: ['id', 'displayName'],
  additionalProperties: false,
  properties: { id: { type: 'string', description: 'cuid' }, displayName: nullableString },
  examples: [{ id: 'cm9x2k3l40000abcdefghijkl', displayName: 'my-agent' }],
} as const

/** The opaque cursor of a paged list (from the previous page's nextCursor). */
export const cursorParam = { type: 'string', maxLength: 512, description: 'opaque: the `nextCursor` of the previous page; omit for the first page; at most once' } as const
export const nextCursor = { type: ['string', 'null'], description: 'pass as `cursor` for the next page; null on the last page' } as const

/** The security requirement of the dashboard routes and of ingestion. */
export const dashboardAuth = [{ dashboardToken: [] }] as const
export const apiKeyAuth = [{ apiKey: [] }] as const

/** An empty 204 answer. */
export const noContent = { type: 'null', description: 'done; no body' } as const
