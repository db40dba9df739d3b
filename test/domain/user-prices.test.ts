import t from 'tap'
import { costOf, keptPerMTok, pricesNamedBy, userPriceTable, type TokenCounts, type UserPrice } from '../../src/domain/pricing.ts'

const tokens = (t: Partial<TokenCounts>): TokenCounts => ({ inputBase: 0, cacheCreation: 0, cacheRead: 0, output: 0, ...t })
const price = (p: Partial<UserPrice>): UserPrice => ({ inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: null, cacheWritePerMTok: null, ...p })

/** The cost by the formula, in exact decimal arithmetic: Σ tokens × $/MTok ÷ 10^6, rounded half up to nano-dollars. */
function formula (parts: [tokens: number, perMTok: string][]): string {
  // $/MTok with its 6 decimals read as an integer is pico-dollars per token.
  const picoPerToken = (p: string) => {
    const [whole, fraction = ''] = p.split('.')
    return BigInt(whole! + fraction.padEnd(6, '0'))
  }
  const pico = parts.reduce((sum, [n, p]) => sum + BigInt(n) * picoPerToken(p), 0n)
  const nano = ((pico + 500n) / 1000n).toString().padStart(10, '0')
  return `${nano.slice(0, -9)}.${nano.slice(-9)}`
}

t.test('a user price prices every part of the tokens at its own rate, exactly', async (t) => {
  const table = userPriceTable([['house-llm', price({ inputPerMTok: 0.15, outputPerMTok: 0.6, cacheReadPerMTok: 0.075, cacheWritePerMTok: 0.1875 })]])
  const used = tokens({ inputBase: 1_234_567, cacheCreation: 89_012, cacheRead: 3_456_789, output: 123_457, reasoning: 1_000 })
  const cost = costOf('house-llm', used, { userPrices: table })
  const expected = formula([[1_234_567, '0.150000'], [89_012, '0.187500'], [3_456_789, '0.075000'], [123_457, '0.600000']])
  t.equal(cost.usd, expected)
  t.equal(cost.status, 'user_price')
  t.equal(cost.nanoUsd, Number(expected.replace('.', '')))
})

t.test('a cost past 2^53 nano-dollars (about 9 million dollars) is still exact to the nano-dollar', async (t) => {
  const table = userPriceTable([['big', price({ inputPerMTok: 10_000, outputPerMTok: 0.000001 })]])
  const cost = costOf('big', tokens({ inputBase: 1_234_567_812, output: 3_456_789 }), { userPrices: table })
  // 12345678.120003456789 rounded half up; through a double it came out as …456.
  t.equal(cost.usd, '12345678.120003457')
  t.equal(cost.usd, formula([[1_234_567_812, '10000.000000'], [3_456_789, '0.000001']]))
})

t.test('cache tokens without a price of their own are billed as input, reasoning as output', async (t) => {
  const table = userPriceTable([['house-llm', price({ inputPerMTok: 2, outputPerMTok: 8 })]])
  const cost = costOf('house-llm', tokens({ inputBase: 100, cacheCreation: 20, cacheRead: 30, output: 50, reasoning: 40 }), { userPrices: table })
  t.equal(cost.usd, formula([[150, '2.000000'], [50, '8.000000']]))
})

t.test('a user price wins over the catalogue, by the exact model name only', async (t) => {
  const used = tokens({ inputBase: 1_000, output: 1_000 })
  const catalogue = costOf('gpt-4o', used)
  t.equal(catalogue.status, 'priced')
  const table = userPriceTable([['gpt-4o', price({ inputPerMTok: 1, outputPerMTok: 1 })]])
  t.same(costOf('gpt-4o', used, { userPrices: table }), { usd: '0.002000000', nanoUsd: 2_000_000, status: 'user_price' })
  t.same(costOf('GPT-4o', used, { userPrices: table }), catalogue, 'another spelling is the catalogue\'s')
  t.same(costOf('openai/gpt-4o', used, { userPrices: table }), catalogue)
  t.same(costOf('unknown-9', used, { userPrices: table }).status, 'unknown_model')
  t.same(costOf(undefined, used, { userPrices: table }).status, 'no_model')
  t.same(costOf('constructor', used, { userPrices: table }).status, 'unknown_model', 'names of Object\'s properties are not prices')
})

t.test('a price of 0 prices the model at 0, which is not unpriced', async (t) => {
  const table = userPriceTable([['self-hosted', price({})]])
  t.same(costOf('self-hosted', tokens({ inputBase: 10, output: 10 }), { userPrices: table }), { usd: '0.000000000', nanoUsd: 0, status: 'user_price' })
})

t.test('prices are kept to 6 decimal places; half a nano-dollar rounds up', async (t) => {
  t.equal(keptPerMTok(0.1 + 0.2), 0.3)
  t.equal(keptPerMTok(0.0000004), 0)
  t.equal(keptPerMTok(0.0000006), 0.000001)
  t.equal(keptPerMTok(9999.9999994), 9999.999999)
  // One token at $0.0005/MTok is 500 pico-dollars, half a nano-dollar: rounded up; at $0.000499/MTok, down.
  const table = userPriceTable([['m', price({ inputPerMTok: 0.0005, outputPerMTok: 0.000499 })]])
  t.equal(costOf('m', tokens({ inputBase: 1 }), { userPrices: table }).nanoUsd, 1)
  t.equal(costOf('m', tokens({ output: 1 }), { userPrices: table }).nanoUsd, 0)
  const dear = userPriceTable([['m', price({ inputPerMTok: 499.999999 })]])
  t.equal(costOf('m', tokens({ inputBase: 10_000_000_000 }), { userPrices: dear }).usd, '4999999.990000000', 'the largest token count, exactly')
})

t.test('the part of a table a job needs: the prices of the models its events name', async (t) => {
  const table = userPriceTable(['a', 'b', 'c'].map((m, i) => [m, price({ inputPerMTok: i + 1 })] as const))
  const part = pricesNamedBy(table, [{ model: 'b' }, {}, { model: 'b' }, { model: 'gpt-4o' }, { model: 'c' }])
  t.same([...part!.keys()], ['b', 'c'])
  t.equal(part!.get('b'), table.get('b'), 'the same compiled prices')
  t.equal(pricesNamedBy(table, [{ model: 'gpt-4o' }, {}]), undefined, 'none: nothing to send')
  const sent = structuredClone(part!)
  const used = tokens({ inputBase: 1_000 })
  t.same(costOf('c', used, { userPrices: sent }), costOf('c', used, { userPrices: table }), 'a copy prices as the original')
})
