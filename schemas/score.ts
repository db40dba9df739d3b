/**
 * Scores: what a judge, a person, an evaluator or code said of a trace, a span, a session or an event
 * (POST /v1/scores, /v1/scores/batch, OTLP `gen_ai.evaluation.result` span events, the dashboard),
 * score configs (`/v1/me/score-configs/:name`) and the reads of scores (`/v1/me/scores`, its summary).
 */
import { idempotencyErrors, replayHeaders } from './ingest-routes.ts'
import { repeatable } from './search.ts'
import { LENIENT, agentRef, apiKeyAuth, cursorParam, dashboardAuth, day, errorBody, errorResponses, instant, matching, nextCursor, noContent, nullableString, printableAscii } from './common.ts'

/** The most scores one batch may carry, and the most score configs one user may set. */
export const SCORE_BATCH_MAX = 500
export const MAX_SCORE_CONFIGS = 200
/** Lengths of a score's texts. */
export const SCORE_NAME_MAX = 200
export const SCORE_LABEL_MAX = 200
export const SCORE_COMMENT_MAX = 4000

const ref = { type: 'string', minLength: 1, maxLength: 200 } as const
/**
 * Text that cannot pass for other text beside it, up to `max` characters: no control (Cc), format
 * (Cf: zero-width, bidi) nor other invisible (Default_Ignorable: fillers, variation selectors, the
 * grapheme joiner; and the blank Braille pattern) characters, no whitespace at either end, and
 * composed (NFC, the `nfc` format). A name or label that looked like another (`acc `, `acc\u200b`,
 * `cafe\u0301` beside `café`) would otherwise slip past the config of the other. The rule in words
 * covers the lengths too: the reads' `name` filter says it for any bad name.
 */
const distinctText = <N extends number>(max: N) => ({
  type: 'string',
  minLength: 1,
  maxLength: max,
  format: 'nfc',
  ...matching(
    '^[^\\p{Cc}\\p{Cf}\\p{DI}\\u2800\\s](?:[^\\p{Cc}\\p{Cf}\\p{DI}\\u2800]*[^\\p{Cc}\\p{Cf}\\p{DI}\\u2800\\s])?$',
    `must be 1 to ${max} characters in composed Unicode form (NFC), without control or invisible characters (zero-width, bidi, fillers, variation selectors) and without whitespace at the start or end`,
  ),
}) as const

export const scoreName = {
  ...distinctText(SCORE_NAME_MAX),
  description: `what is scored (\`helpfulness\`, \`thumbs\`, \`faithfulness\`): 1-${SCORE_NAME_MAX} characters in composed Unicode form (NFC), no control nor invisible characters (zero-width, bidi, fillers, variation selectors), no whitespace at the start or end; a score config of this name validates it`,
  examples: ['helpfulness'],
} as const

// A config's label, by the rule of names, so that no label passes for another beside it (`polite`
// and `polite `); the labels scores send are then matched exactly.
const configLabel = distinctText(SCORE_LABEL_MAX)

export const SCORE_SOURCES = ['api', 'human', 'llm', 'code'] as const

/** The body of POST /v1/scores, and each item of a batch. */
export const incomingScore = {
  $id: 'score.json',
  title: 'Score',
  description: 'One score, on exactly one of a trace (optionally one of its spans), a session or an event; with exactly one of `value` (a number), `label` (a category) or `boolean`. ' +
    'A `scoreId` sent again replaces the score of that id (the last write wins; it is never counted twice).',
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    scoreId: { type: 'string', minLength: 1, maxLength: 200, ...matching('^[\\x21-\\x7E]+$', 'must be printable ASCII characters without spaces'), description: 'your id of the score (printable ASCII, no spaces): sending it again updates the score; omitted: a new score each time', examples: ['run-42/helpfulness'] },
    traceId: ref,
    spanId: { ...ref, description: 'a span of `traceId`: the score is of that span' },
    sessionId: ref,
    eventId: { ...ref, description: 'an event id (`evt_…`) as acknowledged' },
    agentId: { type: 'string', minLength: 1, maxLength: 120, description: 'the agent scored (a cuid, name-service domain or display name, as events name it); a key bound to an agent scores that agent' },
    name: scoreName,
    value: { type: 'number', description: 'a numeric score' },
    // The control characters the lists' `score.<name>` filter refuses are refused here too: a label
    // holding one could never be filtered on.
    label: {
      type: 'string', minLength: 1, maxLength: SCORE_LABEL_MAX, description: 'a categorical score',
      ...matching('^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$', 'must not contain control characters (other than tabs and line breaks)'),
    },
    boolean: { type: 'boolean', description: 'a yes/no score (thumbs up or down)' },
    comment: { type: 'string', maxLength: SCORE_COMMENT_MAX, description: 'why: the judge\'s explanation, a reviewer\'s note' },
    source: { enum: SCORE_SOURCES, default: 'api', description: 'who scored: `api` (default), `human`, `llm` (a judge model), `code` (a check)' },
    metadata: { type: 'object', description: 'anything else, kept as sent' },
  },
  examples: [{ traceId: 'trace-1', name: 'helpfulness', value: 0.8, source: 'llm', comment: 'answers the question' }],
} as const

export const scoreBatch = {
  type: 'object',
  additionalProperties: false,
  required: ['scores'],
  properties: { scores: { type: 'array', minItems: 1, maxItems: SCORE_BATCH_MAX, items: { type: 'object' }, description: `1 to ${SCORE_BATCH_MAX} scores, each checked on its own` } },
} as const

const scoreAckProps = {
  id: { type: 'string', pattern: '^scr_', description: 'the id of this write of the score (`scr_` + ULID)' },
  accepted: { type: 'boolean' },
  scoreId: { type: 'string', description: 'the score\'s id as stored: the one sent (from a publishable key `pk:<key id>:<scoreId>`, from a key bound to an agent `ag:<agent id>:<scoreId>`), else the write\'s `id`' },
} as const
export const scoreAck = { type: 'object', required: ['id', 'accepted', 'scoreId'], additionalProperties: false, properties: scoreAckProps } as const

const { $id: _ig, title: _t, description: _d, ...errorShape } = errorBody
const ingest = { tags: ['ingestion'], security: apiKeyAuth } as const
const { $id: _s, title: _st, ...scoreBody } = incomingScore

const idempotencyHeaders = {
  type: 'object',
  properties: {
    'idempotency-key': {
      type: 'string', minLength: 1, maxLength: 255, ...printableAscii,
      description: 'Optional, as on POST /v1/events: a retry with the key of an answered request gets that answer again and stores nothing.',
    },
  },
} as const

export const postScore = {
  ...ingest,
  summary: 'Send one score',
  description: 'The body is checked by the ingestion pipeline (after the API key, before the burst limit) against this schema and the input rules, then against the caller\'s score config of its `name`, if any (400 `score_config_mismatch` saying why).',
  body: { ...scoreBody, 'x-validated-by': 'ingestion-pipeline' },
  headers: idempotencyHeaders,
  response: { 202: { ...scoreAck, headers: replayHeaders }, ...errorResponses(400, 401, 403, 410, 413, 415, 429, 503), ...idempotencyErrors },
} as const

export const postScoreBatch = {
  ...ingest,
  summary: `Send 1 to ${SCORE_BATCH_MAX} scores; one result per score`,
  description: 'Each score is checked on its own, as POST /v1/scores checks one; a bad score gets its own 400 result.',
  body: scoreBatch,
  headers: idempotencyHeaders,
  response: {
    207: {
      type: 'object',
      headers: replayHeaders,
      required: ['results'],
      properties: {
        results: {
          type: 'array',
          description: 'in the order sent: `{ status: 202, ...acknowledgement }` or `{ status, ...error body }` exactly as the score alone would have got',
          items: {
            type: 'object',
            required: ['status'],
            properties: {
              status: { type: 'integer', examples: [202] },
              ...scoreAckProps,
              ...errorShape.properties,
              retryAfter: { type: 'integer', minimum: 1, description: 'a 429 result: seconds until this score would fit (the Retry-After it would have got alone)', examples: [20] },
            },
          },
        },
      },
    },
    ...errorResponses(400, 401, 403, 413, 415, 429, 503),
    ...idempotencyErrors,
  },
} as const

// ---- score configs

export const SCORE_DATA_TYPES = ['numeric', 'categorical', 'boolean'] as const

const scoreConfigBody = {
  type: 'object',
  additionalProperties: false,
  required: ['dataType'],
  properties: {
    dataType: { enum: SCORE_DATA_TYPES, description: '`numeric` (a `value`, within `min`/`max` when set), `categorical` (a `label`, one of `labels`), `boolean`' },
    min: { type: ['number', 'null'], description: 'numeric only: the lowest value allowed (inclusive); null or omitted: no bound' },
    max: { type: ['number', 'null'], description: 'numeric only: the highest value allowed (inclusive); null or omitted: no bound' },
    labels: { type: 'array', minItems: 1, maxItems: 100, uniqueItems: true, items: configLabel, description: 'categorical only (and required there): the labels allowed' },
    description: { type: 'string', maxLength: 1000 },
    alert: {
      type: ['object', 'null'],
      additionalProperties: false,
      description: 'numeric and boolean only: raise a `score.dropped` alert for an agent whose mean score of this name over the last `windowMinutes` is below `below`, or has fallen by `dropShare` or more against its mean over the `baselineDays` before; null or omitted: no alert',
      properties: {
        windowMinutes: { type: 'integer', minimum: 5, maximum: 1440, description: 'default 60' },
        baselineDays: { type: 'integer', minimum: 1, maximum: 30, description: 'default 7' },
        minScores: { type: 'integer', minimum: 1, maximum: 10000, description: 'scores the window (and the baseline, for a drop) needs before the rule judges; default 5' },
        below: { type: ['number', 'null'], description: 'fire when the window\'s mean is below this' },
        dropShare: { type: ['number', 'null'], exclusiveMinimum: 0, maximum: 1, description: 'fire when the mean fell by this share of the baseline\'s or more (0.2 = 20 %); twice as much is critical' },
      },
    },
  },
  examples: [{ dataType: 'numeric', min: 0, max: 1, description: 'how helpful the answer was', alert: { below: 0.5, dropShare: 0.2 } }, { dataType: 'categorical', labels: ['correct', 'partial', 'wrong'] }],
} as const

const alertRule = {
  type: ['object', 'null'],
  required: ['windowMinutes', 'baselineDays', 'minScores', 'below', 'dropShare'],
  additionalProperties: false,
  properties: {
    windowMinutes: { type: 'integer' },
    baselineDays: { type: 'integer' },
    minScores: { type: 'integer' },
    below: { type: ['number', 'null'] },
    dropShare: { type: ['number', 'null'] },
  },
} as const

export const scoreConfig = {
  type: 'object',
  description: 'How scores of a name must look: scores that do not fit are refused (400 `score_config_mismatch`). Scores stored before the config was set or changed are kept.',
  required: ['name', 'dataType', 'min', 'max', 'labels', 'description', 'alert', 'updatedAt'],
  additionalProperties: false,
  properties: {
    name: scoreName,
    dataType: { enum: SCORE_DATA_TYPES },
    min: { type: ['number', 'null'] },
    max: { type: ['number', 'null'] },
    labels: { type: ['array', 'null'], items: { type: 'string' } },
    description: nullableString,
    alert: { ...alertRule, description: 'the `score.dropped` alert rule, defaults filled in; null: none' },
    updatedAt: instant,
  },
} as const

const me = { tags: ['dashboard'], security: dashboardAuth } as const
const nameParams = { type: 'object', required: ['name'], properties: { name: scoreName } } as const

export const listScoreConfigs = {
  ...me,
  summary: 'The caller\'s score configs',
  response: { 200: { type: 'object', required: ['configs'], properties: { configs: { type: 'array', items: scoreConfig, description: `by name; at most ${MAX_SCORE_CONFIGS}` } } }, ...errorResponses(401, 429, 503) },
} as const

export const getScoreConfig = {
  ...me,
  summary: 'One score config of the caller',
  params: nameParams,
  response: { 200: scoreConfig, ...errorResponses(400, 401, 404, 414, 429, 503) },
} as const

export const putScoreConfig = {
  ...me,
  summary: 'Set the caller\'s config of a score name (replacing any): scores of that name ingested from now on must fit it',
  params: nameParams,
  body: scoreConfigBody,
  response: { 200: scoreConfig, ...errorResponses(400, 401, 409, 413, 414, 415, 429, 503) },
} as const

export const deleteScoreConfig = {
  ...me,
  summary: 'Remove the caller\'s config of a score name: scores of that name are no longer checked',
  params: nameParams,
  response: { 204: noContent, ...errorResponses(400, 401, 404, 414, 429, 503) },
} as const

// ---- reads

/** A score as the reads answer it. */
export const storedScore = {
  type: 'object',
  required: ['scoreId', 'name', 'dataType', 'value', 'label', 'boolean', 'comment', 'source', 'authorId', 'traceId', 'spanId', 'sessionId', 'eventId', 'agent', 'metadata', 'createdAt'],
  additionalProperties: false,
  properties: {
    scoreId: { type: 'string' },
    name: { type: 'string' },
    dataType: { enum: SCORE_DATA_TYPES },
    value: { type: ['number', 'null'], description: 'numeric: the value; boolean: 1 or 0; categorical: null' },
    label: { ...nullableString, description: 'categorical: the label; otherwise null' },
    boolean: { type: ['boolean', 'null'], description: 'boolean: the answer; otherwise null' },
    comment: nullableString,
    source: { enum: SCORE_SOURCES },
    authorId: { ...nullableString, description: 'the user who scored from the dashboard; null for scores sent with an API key or by OTLP' },
    traceId: nullableString,
    spanId: nullableString,
    sessionId: nullableString,
    eventId: nullableString,
    agent: { oneOf: [agentRef, { type: 'null' }], description: 'the agent scored, when the score names one (or its key is bound to one)' },
    metadata: { type: 'object', additionalProperties: true },
    createdAt: { ...instant, description: 'when the service received this write of the score (the last, for an updated score)' },
  },
} as const

/**
 * The filters of the reads. They are read as the search reads its own (docs/api.md#search): unknown
 * parameters are ignored, a single-valued filter given twice or a filter that is not UTF-8 is a 400
 * naming it, as is a `name` no score can have (src/routes/v1/me/scores.ts); `agentId`, `traceId`,
 * `sessionId`, `from` and `to` are read by the search's parser (src/services/score-service.ts).
 */
const scoreFilters = {
  name: { ...scoreName, description: 'only scores of this name' },
  source: { enum: SCORE_SOURCES, description: 'only scores from this source' },
  agentId: repeatable({ type: 'string' }, 'only scores of this agent (cuid); a value that is not a cuid is ignored (the spec\'s rule)'),
  from: { type: 'string', description: 'only scores received at or after this instant (ISO 8601 date-time or unix milliseconds)', examples: ['2026-11-01T00:00:00Z'] },
  to: { type: 'string', description: 'only scores received before this instant (exclusive; ISO 8601 date-time or unix milliseconds); later than `from`', examples: ['2026-11-27T00:00:00Z'] },
} as const

/** The names of the filters, for the check of the query string before its schema. */
export const SCORE_LIST_FILTERS = [...Object.keys(scoreFilters), 'traceId', 'sessionId'] as const
export const SCORE_SUMMARY_FILTERS = Object.keys(scoreFilters)
/** The filters that take one value; the others repeat (OR), as on the search lists. */
export const SCORE_SINGLE_FILTERS = ['name', 'source', 'from', 'to'] as const

/** The list's `limit`: clamped as the search lists' is, never refused. */
export const SCORE_LIST_LIMIT = { min: 1, max: 500, fallback: 50 } as const

export const listScores = {
  ...me,
  summary: 'The caller\'s scores, newest first',
  querystring: {
    type: 'object',
    description: 'Unknown parameters are ignored.',
    properties: {
      ...scoreFilters,
      traceId: repeatable({ type: 'string' }, 'only scores of this trace (1 to 200 characters)'),
      sessionId: repeatable({ type: 'string' }, 'only scores of this session (1 to 200 characters)'),
      limit: {
        type: 'string',
        description: `clamped to ${SCORE_LIST_LIMIT.min}..${SCORE_LIST_LIMIT.max}; default ${SCORE_LIST_LIMIT.fallback} (also for a value that is not a number, or one given more than once)`,
        examples: [String(SCORE_LIST_LIMIT.fallback)],
        [LENIENT]: true,
      },
      cursor: cursorParam,
    },
  },
  response: {
    200: { type: 'object', required: ['scores', 'nextCursor'], properties: { scores: { type: 'array', items: storedScore }, nextCursor } },
    ...errorResponses(400, 401, 429, 503),
  },
} as const

const numericFigures = {
  type: ['object', 'null'],
  description: 'numeric and boolean scores: mean, median and 90th percentile of `value` (null for a categorical name)',
  required: ['mean', 'p50', 'p90'],
  properties: { mean: { type: 'number' }, p50: { type: 'number' }, p90: { type: 'number' } },
} as const
const distribution = {
  type: ['object', 'null'],
  description: 'categorical and boolean scores: how many of each label (`true`/`false` for booleans)',
  additionalProperties: { type: 'integer' },
} as const
const figures = {
  type: 'object',
  required: ['count', 'numeric', 'labels'],
  properties: { count: { type: 'integer' }, numeric: numericFigures, labels: distribution },
} as const

export const scoresSummary = {
  ...me,
  summary: 'Per score name: how many, mean and percentiles or the labels\' distribution, per day and per agent, against the previous period',
  querystring: {
    type: 'object',
    description: 'Unknown parameters are ignored.',
    properties: {
      ...scoreFilters,
      from: { ...scoreFilters.from, description: 'start of the period (default: 7 days before `to`; ISO 8601 date-time or unix milliseconds)' },
      to: { ...scoreFilters.to, description: 'end of the period (default: now; ISO 8601 date-time or unix milliseconds); later than `from`' },
    },
  },
  response: {
    200: {
      type: 'object',
      required: ['from', 'to', 'previousFrom', 'names'],
      properties: {
        from: instant,
        to: instant,
        previousFrom: { ...instant, description: 'the previous period is [previousFrom, from): as long as this one' },
        names: {
          type: 'array',
          items: {
            type: 'object',
            required: ['name', 'dataType', 'count', 'numeric', 'labels', 'previous', 'change', 'byDay', 'byAgent'],
            properties: {
              name: { type: 'string' },
              dataType: { enum: SCORE_DATA_TYPES, description: 'of the latest score of the name in the period' },
              ...figures.properties,
              previous: figures,
              change: {
                type: 'object',
                required: ['count', 'mean'],
                properties: {
                  count: { type: 'integer', description: 'count minus the previous period\'s' },
                  mean: { type: ['number', 'null'], description: 'mean minus the previous period\'s mean; null when either has none' },
                },
              },
              byDay: { type: 'array', items: { type: 'object', required: ['day', ...figures.required], properties: { day, ...figures.properties } } },
              byAgent: { type: 'array', items: { type: 'object', required: ['agent', ...figures.required], properties: { agent: { oneOf: [agentRef, { type: 'null' }] }, ...figures.properties } } },
            },
          },
        },
      },
    },
    ...errorResponses(400, 401, 429, 503),
  },
} as const

/** A score a signed-in user gives from the dashboard: the target is the path's. */
const annotation = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    scoreId: incomingScore.properties.scoreId,
    spanId: { ...ref, description: 'traces only: a span of the trace' },
    name: scoreName,
    value: incomingScore.properties.value,
    label: incomingScore.properties.label,
    boolean: incomingScore.properties.boolean,
    comment: incomingScore.properties.comment,
  },
  examples: [{ name: 'thumbs', boolean: true, comment: 'good answer' }],
} as const

const { spanId: _spanId, ...sessionAnnotationProperties } = annotation.properties

const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 200 } } } as const

export const annotateTrace = {
  ...me,
  summary: 'Score a trace (or one of its spans) as the signed-in user (`source: human`, `authorId`)',
  params: idParams,
  body: annotation,
  response: { 202: scoreAck, ...errorResponses(400, 401, 404, 413, 414, 415, 429, 503) },
} as const

export const annotateSession = {
  ...me,
  summary: 'Score a session as the signed-in user (`source: human`, `authorId`)',
  params: idParams,
  body: { ...annotation, properties: sessionAnnotationProperties },
  response: { 202: scoreAck, ...errorResponses(400, 401, 404, 413, 414, 415, 429, 503) },
} as const

const scoresOf = (what: string) => ({
  ...me,
  summary: `Every score of a ${what}${what === 'trace' ? ' (the whole trace, and per span: `spanId`)' : ''}, oldest first`,
  params: idParams,
  response: {
    200: { type: 'object', required: ['scores'], properties: { scores: { type: 'array', items: storedScore } } },
    ...errorResponses(400, 401, 414, 429, 503),
  },
}) as const

export const traceScores = scoresOf('trace')
export const sessionScores = scoresOf('session')
