import { calcPrice, findProvider, type ModelInfo, type ModelPrice, type Provider, type Usage } from '@pydantic/genai-prices'
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

/**
 * How an event's cost was computed: from the catalogue (`priced`), from the price its user set for
 * the model (`user_price`); or why it is 0: a model neither knows (`unknown_model`), no model named.
 */
export type CostStatus = 'priced' | 'user_price' | 'unknown_model' | 'no_model'

export interface Cost {
  /** Cost in USD as an exact decimal string with 9 places (nano-dollars), ready for Decimal(18, 9). */
  usd: string
  /** The same in nano-dollars, as a number: exact up to 2^53 (about 9 million dollars); `usd` always is. */
  nanoUsd: number
  status: CostStatus
}

export interface PriceQuery {
  /** The provider as the instrumentation names it (`gen_ai.provider.name`, `gen_ai.system`), a hint only. */
  provider?: string | undefined
  /** When the call was made (unix ms): the catalogue holds dated price changes. Default: now. */
  at?: number | undefined
  /** The prices the event's user set, which win over the catalogue (see userPriceTable). */
  userPrices?: UserPriceTable | undefined
}

/**
 * A price a user set for one model, in USD per million tokens. Cache reads and cache writes without
 * a price of their own are billed as input, and reasoning as output, as the catalogue does.
 */
export interface UserPrice {
  inputPerMTok: number
  outputPerMTok: number
  cacheReadPerMTok: number | null
  cacheWritePerMTok: number | null
}

/**
 * A user's prices compiled for pricing, by model name exactly as events send it. Plain data (maps,
 * arrays, bigints), so that it is handed to the row thread with a job as it is.
 */
export type UserPriceTable = ReadonlyMap<string, CompiledPrices>

/**
 * A model name resolved in the catalogue: its provider narrowed to that one model, the name to match
 * it by, and its prices compiled to integers (null when they use something the integer path does not
 * handle, such as time-of-day prices: those are priced by the catalogue's own calculation).
 */
interface Resolved { provider: Provider; name: string; schedule: Schedule | null }

/** A per-token price in pico-dollars ($1/Mtok = 1,000,000), flat or tiered by the request's total input. */
interface PicoPrice { base: bigint; tiers: { start: number; price: bigint }[] }

interface CompiledPrices {
  input?: PicoPrice
  cacheRead?: PicoPrice
  cacheWrite?: PicoPrice
  output?: PicoPrice
  reasoning?: PicoPrice
  /** Per-request price in pico-dollars. */
  request: bigint
}

/** Prices by start time (unix ms), latest first; the last entry applies from the beginning of time. */
type Schedule = { from: number; prices: CompiledPrices }[]

// OpenTelemetry GenAI provider names the catalogue's own provider matching does not recognise.
const PROVIDER_ALIASES: Record<string, string> = { x_ai: 'x-ai', 'gcp.gen_ai': 'google', 'azure.ai.inference': 'azure' }

// A catalogue lookup scans every provider's match rules (~60 µs); the answer for a name never changes
// while the process runs (the bundled data is fixed), so it is kept. Bounded: model names come from clients.
const resolutions = new LRUCache<string, Resolved | false>({ max: 10_000 })

function providerId (hint: string | undefined): string | undefined {
  if (!hint) return undefined
  const key = hint.trim().toLowerCase()
  const id = PROVIDER_ALIASES[key] ?? key
  return findProvider({ providerId: id })?.id
}

function lookUp (name: string, provider: string | undefined): Resolved | null {
  const found = calcPrice({}, name, provider === undefined ? undefined : { providerId: provider })
  if (!found) return null
  // Priced from now on against a provider holding only this model: the match is one rule, not thousands.
  return { provider: { ...found.provider, fallback_model_providers: [], models: [found.model] }, name, schedule: compile(found.model) }
}

// Price keys of the units our usage reports (prices/units.yml of the catalogue); every other unit is
// never reported by us and prices nothing, except `requests_kcount`, a price per 1,000 requests.
const TOKEN_KEYS = { input_mtok: 'input', cache_read_mtok: 'cacheRead', cache_write_mtok: 'cacheWrite', output_mtok: 'output', output_reasoning_mtok: 'reasoning' } as const

function pico (dollarsPerUnit: number, unitsPerPrice: number): bigint | null {
  const p = dollarsPerUnit * (1e12 / unitsPerPrice)
  const rounded = Math.round(p)
  return Number.isFinite(p) && Math.abs(p - rounded) < 1e-6 ? BigInt(rounded) : null
}

function compilePrices (prices: ModelPrice): CompiledPrices | null {
  const out: CompiledPrices = { request: 0n }
  for (const [key, value] of Object.entries(prices)) {
    if (value === undefined) continue
    if (key === 'requests_kcount') {
      const p = typeof value === 'number' ? pico(value, 1e3) : null
      if (p === null) return null
      out.request = p
      continue
    }
    const field = TOKEN_KEYS[key as keyof typeof TOKEN_KEYS]
    if (field === undefined) continue
    const base = pico(typeof value === 'number' ? value : value.base, 1e6)
    const tiers = typeof value === 'number' ? [] : value.tiers.map((t) => ({ start: t.start, price: pico(t.price, 1e6) }))
    if (base === null || tiers.some((t) => t.price === null)) return null
    out[field] = { base, tiers: (tiers as { start: number; price: bigint }[]).sort((a, b) => a.start - b.start) }
  }
  return out
}

/**
 * A user's price per million tokens as it is kept: to 6 decimal places, a pico-dollar per token, the
 * precision the exact calculation works in.
 */
export function keptPerMTok (perMTok: number): number {
  return Number(perMTok.toFixed(6))
}

/** $1/Mtok is 1,000,000 pico-dollars per token: the digits of the kept price, read as an integer (exactly). */
function userPico (perMTok: number): PicoPrice {
  return { base: BigInt(perMTok.toFixed(6).replace('.', '')), tiers: [] }
}

/** A user's prices (non-negative, as the route's schema admits them), compiled once for every event they price. */
export function userPriceTable (prices: Iterable<readonly [model: string, price: UserPrice]>): UserPriceTable {
  const table = new Map<string, CompiledPrices>()
  for (const [model, p] of prices) {
    const compiled: CompiledPrices = { input: userPico(p.inputPerMTok), output: userPico(p.outputPerMTok), request: 0n }
    if (p.cacheReadPerMTok !== null) compiled.cacheRead = userPico(p.cacheReadPerMTok)
    if (p.cacheWritePerMTok !== null) compiled.cacheWrite = userPico(p.cacheWritePerMTok)
    table.set(model, compiled)
  }
  return table
}

/** The part of a table that prices the models `events` name; undefined when it prices none of them. */
export function pricesNamedBy (table: UserPriceTable, events: readonly { model?: string | undefined }[]): UserPriceTable | undefined {
  let used: Map<string, CompiledPrices> | undefined
  for (const { model } of events) {
    if (model === undefined) continue
    const price = table.get(model)
    if (price) (used ??= new Map()).set(model, price)
  }
  return used
}

function compile (model: ModelInfo): Schedule | null {
  if (!Array.isArray(model.prices)) {
    const prices = compilePrices(model.prices)
    return prices && [{ from: -Infinity, prices }]
  }
  const schedule: Schedule = []
  for (const entry of model.prices) {
    const constraint = entry.constraint
    if (constraint !== undefined && constraint.type !== 'start_date') return null
    const prices = compilePrices(entry.prices)
    if (!prices) return null
    schedule.push({ from: constraint === undefined ? -Infinity : Date.parse(`${constraint.start_date}T00:00:00Z`), prices })
  }
  // The catalogue takes entries from the last: the first that has no start or whose start has passed, else the first entry.
  schedule.reverse()
  return schedule
}

/** The per-token price for a request whose whole input is `inputTotal` tokens (a tier applies above its start). */
function rate (price: PicoPrice, inputTotal: number): bigint {
  let p = price.base
  for (const tier of price.tiers) if (inputTotal > tier.start) p = tier.price
  return p
}

/**
 * The cost in pico-dollars, exactly, as the catalogue defines it for our usage: the input total is
 * split into the parts that have their own price (cache reads, cache writes), the rest is input; the
 * reasoning part of the output likewise; tiers are chosen by the whole input.
 */
function picoCost (prices: CompiledPrices, t: TokenCounts, inputTotal: number): bigint {
  const cacheRead = prices.cacheRead ? t.cacheRead : 0
  const cacheWrite = prices.cacheWrite ? t.cacheCreation : 0
  const reasoning = prices.reasoning ? Math.min(t.reasoning ?? 0, t.output) : 0
  return prices.request +
    partCost(prices.input, inputTotal - cacheRead - cacheWrite, inputTotal) +
    partCost(prices.cacheRead, cacheRead, inputTotal) +
    partCost(prices.cacheWrite, cacheWrite, inputTotal) +
    partCost(prices.output, t.output - reasoning, inputTotal) +
    partCost(prices.reasoning, reasoning, inputTotal)
}

// A function of its own, not a closure made on every call: this runs for every ingested event.
function partCost (price: PicoPrice | undefined, tokens: number, inputTotal: number): bigint {
  return price && tokens > 0 ? BigInt(tokens) * rate(price, inputTotal) : 0n
}

/**
 * The catalogue entry of a model name, memoised: with the provider hint, then by the name alone, then
 * for `provider/model` names (LiteLLM, OpenRouter, Vercel AI SDK gateways) by the part after the
 * prefix, with the prefix as provider when the catalogue knows it.
 */
function resolveModel (model: string, providerHint?: string): Resolved | null {
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
export function catalogueEntry (model: string, providerHint?: string): { provider: string; model: string } | null {
  const r = resolveModel(model, providerHint)
  return r && { provider: r.provider.id, model: r.provider.models[0]!.id }
}

/** Nano-dollars as a decimal string with 9 places; exact for any integer (a bigint past 2^53). */
export function nanoToUsd (nano: number | bigint): string {
  const digits = BigInt(nano).toString().padStart(10, '0')
  return `${digits.slice(0, -9)}.${digits.slice(-9)}`
}

const NO_COST = '0.000000000'

/** The prices in force at `at`: the first entry (in the order the catalogue tries them) that started by then, else the last. */
function scheduledPrices (schedule: NonNullable<Resolved['schedule']>, at: number): CompiledPrices {
  for (const entry of schedule) if (at >= entry.from) return entry.prices
  return schedule[schedule.length - 1]!.prices
}

/** Our token counts in the catalogue's usage terms: input_tokens is the *total* input. */
export function catalogueUsage (tokens: TokenCounts): Usage {
  const usage: Usage = {
    input_tokens: tokens.inputBase + tokens.cacheCreation + tokens.cacheRead,
    cache_write_tokens: tokens.cacheCreation,
    cache_read_tokens: tokens.cacheRead,
    output_tokens: tokens.output,
  }
  // Reasoning is a part of output; a client reporting more reasoning than output sent them apart.
  if (tokens.reasoning) usage.output_reasoning_tokens = Math.min(tokens.reasoning, tokens.output)
  return usage
}

/**
 * The USD cost of one event's tokens, from the `@pydantic/genai-prices` catalogue bundled with the
 * installed package (never fetched at run time). The catalogue takes the *total* input (uncached +
 * cache writes + cache reads) and prices each part at its own rate, tiered prices by that total. The
 * model's prices are compiled once to integer pico-dollars per token, so the cost is exact and is
 * rounded once to whole nano-dollars (the catalogue's own calculation, in floating point and about
 * 50 µs a call, is used only for prices the integer path does not handle). A price the user set for
 * the model (`query.userPrices`, by the exact name) wins over the catalogue and is computed the same
 * exact way. Unknown or missing model: cost 0 and a status saying why.
 */
export function costOf (model: string | undefined, tokens: TokenCounts, query: PriceQuery = {}): Cost {
  if (!model) return { usd: NO_COST, nanoUsd: 0, status: 'no_model' }
  // The user's own price first, by the exact name: it wins over the catalogue.
  const own = query.userPrices?.get(model)
  if (own) return exactCost(own, tokens, 'user_price')
  const resolved = resolveModel(model, query.provider)
  if (!resolved) return { usd: NO_COST, nanoUsd: 0, status: 'unknown_model' }
  const at = query.at ?? Date.now()
  if (resolved.schedule) return exactCost(scheduledPrices(resolved.schedule, at), tokens, 'priced')
  const price = calcPrice(catalogueUsage(tokens), resolved.name, { provider: resolved.provider, timestamp: new Date(at) })
  if (!price) return { usd: NO_COST, nanoUsd: 0, status: 'unknown_model' }
  const nano = Math.round(price.total_price * 1e9)
  return { usd: nanoToUsd(nano), nanoUsd: nano, status: 'priced' }
}

/** The cost at compiled prices, computed in pico-dollars and rounded once to nano-dollars (half up). */
function exactCost (prices: CompiledPrices, tokens: TokenCounts, status: CostStatus): Cost {
  const inputTotal = tokens.inputBase + tokens.cacheCreation + tokens.cacheRead
  const nano = (picoCost(prices, tokens, inputTotal) + 500n) / 1000n
  return { usd: nanoToUsd(nano), nanoUsd: Number(nano), status }
}
