import { calcPrice, findProvider, type Provider, type Usage } from '@pydantic/genai-prices'
import { LRUCache } from 'lru-cache'

/**
 * Token counts of one model call, as stored: `inputBase` is the uncached input, so the provider's
 * total input is inputBase + cacheCreation + cacheRead. `reasoning` is the part of `output` the model
 * spent reasoning (billed as output by every provider the catalogue lists, unless it names a rate).
 */
export interface TokenCounts {
  inputBase: number
  cacheCreation: number
  cacheRead: number
  output: number
  reasoning?: number
}

/** Whether an event's cost could be computed: priced, a model the catalogue does not know, or no model named. */
export type CostStatus = 'priced' | 'unknown_model' | 'no_model'

export interface Cost {
  /** Cost in USD as an exact decimal string with 9 places (nano-dollars), ready for Decimal(18, 9). */
  usd: string
  nanoUsd: number
  status: CostStatus
}

export interface PriceQuery {
  /** The provider as the instrumentation names it (`gen_ai.provider.name`, `gen_ai.system`), a hint only. */
  provider?: string | undefined
  /** When the call was made (unix ms): the catalogue holds dated price changes. Default: now. */
  at?: number | undefined
}

/** A model name resolved in the catalogue: its provider narrowed to that one model, and the name to match it by. */
interface Resolved { provider: Provider; name: string }

// OpenTelemetry GenAI provider names the catalogue's own provider matching does not recognise.
const PROVIDER_ALIASES: Record<string, string> = { x_ai: 'x-ai', 'gcp.gen_ai': 'google', 'azure.ai.inference': 'azure' }

// A catalogue lookup scans every provider's match rules (~60 µs); the answer for a name never changes
// while the process runs (the bundled data is fixed), so it is kept. Bounded: model names come from clients.
const resolutions = new LRUCache<string, Resolved | false>({ max: 10_000 })

function providerId(hint: string | undefined): string | undefined {
  if (!hint) return undefined
  const key = hint.trim().toLowerCase()
  const id = PROVIDER_ALIASES[key] ?? key
  return findProvider({ providerId: id })?.id
}

function lookUp(name: string, provider: string | undefined): Resolved | null {
  const found = calcPrice({}, name, provider === undefined ? undefined : { providerId: provider })
  if (!found) return null
  // Priced from now on against a provider holding only this model: the match is one rule, not thousands.
  return { provider: { ...found.provider, fallback_model_providers: [], models: [found.model] }, name }
}

/**
 * The catalogue entry of a model name, memoised: with the provider hint, then by the name alone, then
 * for `provider/model` names (LiteLLM, OpenRouter, Vercel AI SDK gateways) by the part after the
 * prefix, with the prefix as provider when the catalogue knows it.
 */
export function resolveModel(model: string, providerHint?: string): Resolved | null {
  const key = `${providerHint ?? ''}\u0000${model}`
  const cached = resolutions.get(key)
  if (cached !== undefined) return cached || null
  const name = model.trim().toLowerCase()
  const hinted = providerId(providerHint)
  let found = (hinted && lookUp(name, hinted)) || lookUp(name, undefined)
  const slash = name.lastIndexOf('/')
  if (!found && slash > 0) {
    const rest = name.slice(slash + 1)
    const prefixed = providerId(name.slice(0, name.indexOf('/')))
    found = (prefixed && lookUp(rest, prefixed)) || (hinted && lookUp(rest, hinted)) || lookUp(rest, undefined)
  }
  resolutions.set(key, found ?? false)
  return found
}

/** The catalogue's provider and model id for a model name (for display and tests), or null when unknown. */
export function catalogueEntry(model: string, providerHint?: string): { provider: string; model: string } | null {
  const r = resolveModel(model, providerHint)
  return r && { provider: r.provider.id, model: r.provider.models[0]!.id }
}

export function nanoToUsd(nano: number): string {
  const whole = Math.floor(nano / 1e9)
  const frac = String(nano - whole * 1e9).padStart(9, '0')
  return `${whole}.${frac}`
}

const NO_COST = '0.000000000'

/**
 * The USD cost of one event's tokens, from the `@pydantic/genai-prices` catalogue bundled with the
 * installed package (never fetched at run time). The catalogue takes the *total* input (uncached +
 * cache writes + cache reads) and prices each part at its own rate, tiered prices by that total; the
 * result is rounded once to whole nano-dollars. Unknown or missing model: cost 0 and a status saying why.
 */
export function costOf(model: string | undefined, tokens: TokenCounts, query: PriceQuery = {}): Cost {
  if (!model) return { usd: NO_COST, nanoUsd: 0, status: 'no_model' }
  const resolved = resolveModel(model, query.provider)
  if (!resolved) return { usd: NO_COST, nanoUsd: 0, status: 'unknown_model' }
  const usage: Usage = {
    input_tokens: tokens.inputBase + tokens.cacheCreation + tokens.cacheRead,
    cache_write_tokens: tokens.cacheCreation,
    cache_read_tokens: tokens.cacheRead,
    output_tokens: tokens.output,
  }
  // Reasoning is a part of output; a client reporting more reasoning than output sent them apart.
  if (tokens.reasoning) usage.output_reasoning_tokens = Math.min(tokens.reasoning, tokens.output)
  const price = calcPrice(usage, resolved.name, { provider: resolved.provider, timestamp: new Date(query.at ?? Date.now()) })
  if (!price) return { usd: NO_COST, nanoUsd: 0, status: 'unknown_model' }
  const nano = Math.round(price.total_price * 1e9)
  return { usd: nanoToUsd(nano), nanoUsd: nano, status: 'priced' }
}
