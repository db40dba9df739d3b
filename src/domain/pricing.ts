import table from './model-prices.json' with { type: 'json' }

export interface TokenCounts {
  inputBase: number
  cacheCreation: number
  cacheRead: number
  output: number
}

/** Whether an event's cost could be computed: priced, a model the table does not know, or no model named. */
export type CostStatus = 'priced' | 'unknown_model' | 'no_model'

export interface Cost {
  /** Cost in USD as an exact decimal string with 9 places (nano-dollars), ready for Decimal(18, 9). */
  usd: string
  nanoUsd: number
  status: CostStatus
}

interface NanoPrices { input: number; cacheWrite: number; cacheRead: number; output: number }

// Prices per token in nano-dollars ($/Mtok * 1000) are integers for every listed price, so costs
// are exact sums of integers and agree with any rollup to the cent.
const families: [string, NanoPrices][] = Object.entries(table.models)
  .map(([name, p]): [string, NanoPrices] => [name, {
    input: Math.round(p.input * 1000),
    cacheWrite: Math.round(p.cacheWrite * 1000),
    cacheRead: Math.round(p.cacheRead * 1000),
    output: Math.round(p.output * 1000),
  }])
  .sort((a, b) => b[0].length - a[0].length)

/** The price family a model name belongs to (longest matching family name), or undefined. */
export function priceFamily(model: string): string | undefined {
  const name = model.slice(model.lastIndexOf('/') + 1).toLowerCase()
  for (const [family] of families) {
    if (name.startsWith(family)) {
      const next = name.charAt(family.length)
      if (next === '' || next === '-' || next === '@' || next === ':') return family
    }
  }
  return undefined
}

const byFamily = new Map(families)

export function nanoToUsd(nano: number): string {
  const whole = Math.floor(nano / 1e9)
  const frac = String(nano - whole * 1e9).padStart(9, '0')
  return `${whole}.${frac}`
}

/** The USD cost of one event's tokens for a model. Unknown or missing model: cost 0 and a status saying why. */
export function costOf(model: string | undefined, tokens: TokenCounts): Cost {
  if (!model) return { usd: '0.000000000', nanoUsd: 0, status: 'no_model' }
  const family = priceFamily(model)
  const p = family === undefined ? undefined : byFamily.get(family)
  if (!p) return { usd: '0.000000000', nanoUsd: 0, status: 'unknown_model' }
  const nano = tokens.inputBase * p.input + tokens.cacheCreation * p.cacheWrite +
    tokens.cacheRead * p.cacheRead + tokens.output * p.output
  return { usd: nanoToUsd(nano), nanoUsd: nano, status: 'priced' }
}
