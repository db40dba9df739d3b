/** Model prices a user sets (`/v1/me/model-prices`): the price, and the routes' request and response schemas. */
import { dashboardAuth, errorResponses, instant, noContent } from './common.ts'

/** The most prices one user may set, and the window of `unpricedModels`. */
export const MAX_MODEL_PRICES = 200
export const UNPRICED_WINDOW_DAYS = 30
/** The highest price one may set, in USD per million tokens: far above any listed price (the dearest are a few hundred). */
const MAX_PER_MTOK = 10_000

const perMTok = {
  type: 'number',
  minimum: 0,
  maximum: MAX_PER_MTOK,
  description: `USD per million tokens, 0 to ${MAX_PER_MTOK}; kept to 6 decimal places (a pico-dollar per token)`,
  examples: [0.15],
} as const
const cachePerMTok = {
  type: ['number', 'null'],
  minimum: 0,
  maximum: MAX_PER_MTOK,
  description: `USD per million tokens, 0 to ${MAX_PER_MTOK}; omitted or null: these tokens are billed at the input price`,
} as const

const modelPrice = {
  type: 'object',
  description: 'A price the user set for a model: it prices the user\'s events with exactly this `model`, ingested after it was set.',
  required: ['model', 'inputPerMTok', 'outputPerMTok', 'cacheReadPerMTok', 'cacheWritePerMTok', 'updatedAt'],
  additionalProperties: false,
  properties: {
    model: { type: 'string', description: 'the model name exactly as events send it', examples: ['acme/house-llm-7b'] },
    inputPerMTok: { ...perMTok, description: 'USD per million uncached input tokens' },
    outputPerMTok: { ...perMTok, description: 'USD per million output tokens, reasoning included', examples: [0.6] },
    cacheReadPerMTok: { ...cachePerMTok, description: 'USD per million cache-read tokens; null: billed at the input price' },
    cacheWritePerMTok: { ...cachePerMTok, description: 'USD per million cache-write tokens; null: billed at the input price' },
    updatedAt: { ...instant, description: 'when it was last set: events ingested from then on are priced by it' },
  },
} as const

const me = { tags: ['dashboard'], security: dashboardAuth } as const
const modelParams = {
  type: 'object',
  required: ['model'],
  properties: { model: { type: 'string', minLength: 1, maxLength: 200, description: 'the model name, URL-encoded (`openai%2Fmy-ft`)' } },
} as const

export const listModelPrices = {
  ...me,
  summary: 'The caller\'s model prices, and the models their events used without a price',
  response: {
    200: {
      type: 'object',
      required: ['prices', 'unpricedModels'],
      properties: {
        prices: { type: 'array', items: modelPrice, description: `by model name; at most ${MAX_MODEL_PRICES}` },
        unpricedModels: {
          type: 'array',
          description: `models of the caller's events over the last ${UNPRICED_WINDOW_DAYS} days (UTC) that had no price (neither the catalogue's nor the caller's), ` +
            'with how many events were counted at cost 0; a model priced since stays listed for its earlier events, which keep their cost',
          items: { type: 'object', required: ['model', 'eventCount'], properties: { model: { type: 'string' }, eventCount: { type: 'integer' } } },
        },
      },
    },
    ...errorResponses(401, 429, 503),
  },
} as const

export const putModelPrice = {
  ...me,
  summary: 'Set the caller\'s price for a model (replacing any); it prices their events ingested from now on',
  params: modelParams,
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['inputPerMTok', 'outputPerMTok'],
    properties: { inputPerMTok: perMTok, outputPerMTok: perMTok, cacheReadPerMTok: cachePerMTok, cacheWritePerMTok: cachePerMTok },
    examples: [{ inputPerMTok: 0.15, outputPerMTok: 0.6, cacheReadPerMTok: 0.075 }],
  },
  response: { 200: modelPrice, ...errorResponses(400, 401, 409, 413, 414, 415, 429, 503) },
} as const

export const deleteModelPrice = {
  ...me,
  summary: 'Remove the caller\'s price for a model: their events ingested from now on are priced by the catalogue again',
  params: modelParams,
  response: { 204: noContent, ...errorResponses(400, 401, 404, 414, 429, 503) },
} as const
