import t from 'tap'
import { canonicalJson, contentHash, keptShapes } from '../../src/domain/canonical-json.ts'
import { catalogueEntry, catalogueUsage, costOf, nanoToUsd, type TokenCounts } from '../../src/domain/pricing.ts'
import { calcPrice, findProvider } from '@pydantic/genai-prices'
import { errorFingerprint, normaliseErrorMessage } from '../../src/domain/fingerprint.ts'
import { isCuid, newCuid, newEventId } from '../../src/domain/ids.ts'
import { parseIsoDateTime } from '../../src/domain/date-time.ts'
import { clampInt, sinceBound } from '../../src/domain/query-params.ts'

t.test('canonical JSON sorts keys at every depth and drops whitespace', async (t) => {
  t.equal(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' } }), '{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}')
  t.equal(contentHash({ a: 1, b: 2 }), contentHash({ b: 2, a: 1 }), 'key order does not change the hash')
  t.not(contentHash({ a: 1 }), contentHash({ a: 2 }))
  t.match(contentHash({}), /^[0-9a-f]{64}$/)
  t.equal(contentHash({}), '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', 'SHA-256 of "{}"')
})

/** Canonical JSON as plainly as it can be written: sort the keys of every object afresh, drop undefined values. */
function model (v: unknown): string {
  if (Array.isArray(v)) return '[' + v.map((x) => (x === undefined ? 'null' : model(x))).join(',') + ']'
  if (v === null || typeof v !== 'object') return JSON.stringify(v)
  const o = v as Record<string, unknown>
  return '{' + Object.keys(o).sort().filter((k) => o[k] !== undefined).map((k) => JSON.stringify(k) + ':' + model(o[k])).join(',') + '}'
}

t.test('canonical JSON is the same for objects whose shapes it has seen, whatever their number and order', async (t) => {
  // Many shapes under the same first key (past the 8 kept per first key), keys in every order,
  // integer-like keys (which Object.keys lists first), undefined values, nesting; each object twice.
  let seed = 7
  const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n
  const names = ['first', 'b', 'a', 'zeta', '10', '2', 'é', 'A', 'aa', '']
  const objects: Record<string, unknown>[] = []
  for (let i = 0; i < 300; i++) {
    const obj: Record<string, unknown> = { first: i }
    for (let k = 0, n = rand(6); k < n; k++) obj[names[rand(names.length)]!] = rand(4) === 0 ? undefined : rand(3) === 0 ? { [names[rand(names.length)]!]: i, first: [k] } : `v${k}`
    objects.push(obj)
  }
  let mismatches = 0
  for (const obj of [...objects, ...objects]) {
    if (canonicalJson(obj) !== model(obj)) mismatches++
  }
  t.equal(mismatches, 0, '600 objects, each written as sorting its keys afresh writes it')
  t.equal(canonicalJson({ first: 1, x: 2 }), '{"first":1,"x":2}')
  t.equal(canonicalJson({ first: 1, y: 2 }), '{"first":1,"y":2}', 'same first key and size, another key')
  t.equal(canonicalJson({ y: 2, first: 1 }), '{"first":1,"y":2}', 'same keys, another order')
  t.equal(canonicalJson({ first: 1, 10: 'a', 2: 'b' }), '{"10":"a","2":"b","first":1}', 'integer-like keys sorted as text')
  t.equal(canonicalJson({ first: 1, 10: 'a', 2: 'b', 1: 'c' }), '{"1":"c","10":"a","2":"b","first":1}')
  t.equal(canonicalJson(JSON.parse('{"solo":1,"toString":"x"}')), '{"solo":1,"toString":"x"}')
  t.equal(canonicalJson({ solo: 1 }), '{"solo":1}', 'a shape with fewer keys: none read from the prototype')
})

t.test('the shapes canonical JSON keeps stay bounded whatever the objects it is given', async (t) => {
  // Every object a new shape: distinct first keys, many keys each, long keys.
  for (let i = 0; i < 3000; i++) {
    const keys = Array.from({ length: 1 + (i % 64) }, (_, k) => `${'k'.repeat(i % 200)}-${i}-${k}`)
    canonicalJson(Object.fromEntries(keys.map((k) => [k, 1])))
    const kept = keptShapes()
    if (kept.chars > 2_000_000) return t.fail(`after ${i + 1} objects, ${kept.chars} characters kept`)
  }
  t.pass('never more than 2 million characters of keys kept')
  const before = keptShapes().shapes
  const wide = Object.fromEntries(Array.from({ length: 65 }, (_, k) => [`wide-${k}`, k]))
  t.equal(canonicalJson(wide), model(wide))
  t.equal(keptShapes().shapes, before, 'a shape of more than 64 keys is not kept')
  for (let i = 0; i < 20; i++) canonicalJson({ same: i, [`other-${i}`]: i })
  t.ok(keptShapes().shapes <= before + 8, 'at most 8 shapes kept per first key')
  t.equal(canonicalJson({ same: 1, 'other-19': 2 }), '{"other-19":2,"same":1}', 'a shape not kept is still written right')
})

t.test('canonical JSON writes every scalar exactly as JSON.stringify does', async (t) => {
  const scalars: unknown[] = [
    '', 'plain', 'say "hi"', 'back\\slash', 'tab\there', 'nul\u0000', 'unit\u001f', 'del\u007f', 'line\u2028sep',
    'emoji 😀', 'lone \ud800 high', 'lone \udfff low', 'é ü 日本',
    0, -0, 1.5, -2e-7, 1e21, 123456789012345680000, Number.MAX_SAFE_INTEGER, true, false, null,
  ]
  scalars.forEach((value, i) => {
    // Named by index: some of the values would break the test output's lines.
    t.equal(canonicalJson(value), JSON.stringify(value), `scalar ${i}`)
    t.equal(canonicalJson({ k: value }), `{"k":${JSON.stringify(value)}}`, `scalar ${i} in an object`)
  })
})

// Expected costs are computed here from the providers' published list prices (USD per million tokens;
// $1/Mtok is 1,000 nano-dollars per token), not read back from the catalogue the code uses.
const NANO_PER_MTOK = 1000
const tokens = (t: Partial<TokenCounts>): TokenCounts => ({ inputBase: 0, cacheCreation: 0, cacheRead: 0, output: 0, ...t })

t.test('pricing: an Anthropic call with cache writes and cache reads prices each part once at its own rate', async (t) => {
  // anthropic.com/pricing, Claude Sonnet 4.5 (prompts <= 200K): input $3, 5-minute cache write $3.75,
  // cache hit $0.30, output $15 per Mtok.
  const expected = 1_000 * 3 * NANO_PER_MTOK + 2_000 * 3.75 * NANO_PER_MTOK + 10_000 * 0.3 * NANO_PER_MTOK + 500 * 15 * NANO_PER_MTOK
  t.equal(expected, 21_000_000)
  const cost = costOf('claude-sonnet-4-5-20250929', tokens({ inputBase: 1_000, cacheCreation: 2_000, cacheRead: 10_000, output: 500 }))
  t.same(cost, { usd: '0.021000000', nanoUsd: expected, status: 'priced' })
  t.same(catalogueEntry('claude-sonnet-4-5-20250929'), { provider: 'anthropic', model: 'claude-sonnet-4-5' })
})

t.test('pricing: OpenAI reasoning tokens are billed as output, once', async (t) => {
  // openai.com/api/pricing, o4-mini: input $1.10, cached input $0.275, output $4.40 per Mtok; reasoning
  // tokens are output tokens (usage.output_tokens includes output_tokens_details.reasoning_tokens).
  const expected = 800 * 1.1 * NANO_PER_MTOK + 200 * 0.275 * NANO_PER_MTOK + 500 * 4.4 * NANO_PER_MTOK
  t.equal(Math.round(expected), 3_135_000)
  const withReasoning = costOf('o4-mini', tokens({ inputBase: 800, cacheRead: 200, output: 500, reasoning: 300 }), { provider: 'openai' })
  t.same(withReasoning, { usd: '0.003135000', nanoUsd: 3_135_000, status: 'priced' })
  t.equal(costOf('o4-mini', tokens({ inputBase: 800, cacheRead: 200, output: 500 })).nanoUsd, 3_135_000, 'not counted a second time')
  t.equal(costOf('o4-mini', tokens({ output: 10, reasoning: 50 })).nanoUsd, 10 * 4.4 * NANO_PER_MTOK, 'reasoning beyond output is not billed twice')
})

t.test('pricing: a request over 200k input tokens is billed at the long-context rates', async (t) => {
  // anthropic.com/pricing, Claude Sonnet 4.5, prompts > 200K tokens (cache reads and writes count):
  // input $6, cache hit $0.60, output $22.50 per Mtok, for the whole request.
  const long = 150_000 * 6 * NANO_PER_MTOK + 60_000 * 0.6 * NANO_PER_MTOK + 1_000 * 22.5 * NANO_PER_MTOK
  t.equal(long, 958_500_000)
  t.same(costOf('claude-sonnet-4-5', tokens({ inputBase: 150_000, cacheRead: 60_000, output: 1_000 })),
    { usd: '0.958500000', nanoUsd: long, status: 'priced' })
  // Exactly 200K is not over it: $3 input, $15 output.
  t.equal(costOf('claude-sonnet-4-5', tokens({ inputBase: 200_000, output: 1_000 })).nanoUsd, 200_000 * 3 * NANO_PER_MTOK + 1_000 * 15 * NANO_PER_MTOK)
})

t.test('pricing: provider-prefixed and provider-hinted names find the provider\'s model', async (t) => {
  // openai.com/api/pricing, gpt-4o: input $2.50, cached input $1.25, output $10 per Mtok.
  const expected = 1_000 * 2.5 * NANO_PER_MTOK + 4_000 * 1.25 * NANO_PER_MTOK + 100 * 10 * NANO_PER_MTOK
  const usage = tokens({ inputBase: 1_000, cacheRead: 4_000, output: 100 })
  t.equal(costOf('openai/gpt-4o', usage).nanoUsd, expected)
  t.equal(costOf('gpt-4o', usage, { provider: 'openai' }).nanoUsd, expected)
  t.equal(costOf('GPT-4o', usage, { provider: 'no-such-provider' }).nanoUsd, expected, 'an unknown hint is ignored')
  t.same(catalogueEntry('anthropic/claude-sonnet-4-5'), { provider: 'anthropic', model: 'claude-sonnet-4-5' })
  t.equal(costOf('anthropic/claude-sonnet-4-5', tokens({ inputBase: 1_000 })).nanoUsd, 1_000 * 3 * NANO_PER_MTOK)
})

t.test('pricing: dated price changes apply by the event time', async (t) => {
  // openai.com: o3 went from $10 / $40 to $2 / $8 per Mtok on 2025-06-10.
  const usage = tokens({ inputBase: 1_000, output: 1_000 })
  t.equal(costOf('o3', usage, { at: Date.parse('2025-05-01T00:00:00Z') }).nanoUsd, 1_000 * 10 * NANO_PER_MTOK + 1_000 * 40 * NANO_PER_MTOK)
  t.equal(costOf('o3', usage, { at: Date.parse('2025-07-01T00:00:00Z') }).nanoUsd, 1_000 * 2 * NANO_PER_MTOK + 1_000 * 8 * NANO_PER_MTOK)
})

t.test('pricing: an unknown model costs 0 and says so; no model says so too', async (t) => {
  const usage = tokens({ inputBase: 1_000_000, output: 1_000_000 })
  t.same(costOf('acme-internal-llm-7', usage), { usd: '0.000000000', nanoUsd: 0, status: 'unknown_model' })
  t.same(costOf('acme-internal-llm-7', usage, { provider: 'openai' }).status, 'unknown_model')
  t.equal(catalogueEntry('acme-internal-llm-7'), null)
  t.same(costOf(undefined, usage).status, 'no_model')
  t.equal(nanoToUsd(1), '0.000000001')
  t.equal(nanoToUsd(123_456_789_012), '123.456789012')
})

t.test('pricing: the integer path agrees with the catalogue\'s own calculation for every model of the main providers', async (t) => {
  const usages = [
    tokens({ inputBase: 1_234, output: 567 }),
    tokens({ inputBase: 10_000, cacheCreation: 3_000, cacheRead: 50_000, output: 2_000, reasoning: 1_500 }),
    tokens({ inputBase: 250_000, cacheCreation: 10_000, cacheRead: 40_000, output: 9_999, reasoning: 10 }),
    tokens({ inputBase: 0, output: 0 }),
  ]
  const times = [Date.parse('2025-01-01T00:00:00Z'), Date.parse('2025-09-01T12:00:00Z'), Date.now()]
  let compared = 0
  for (const providerId of ['anthropic', 'openai', 'google', 'mistral', 'deepseek', 'x-ai', 'aws', 'groq', 'openrouter']) {
    for (const model of findProvider({ providerId })?.models ?? []) {
      for (const usage of usages) {
        for (const at of times) {
          const reference = calcPrice(catalogueUsage(usage), model.id, { providerId, timestamp: new Date(at) })
          const cost = costOf(model.id, usage, { provider: providerId, at })
          if (!reference) continue
          compared++
          const expected = Math.round(reference.total_price * 1e9)
          // The catalogue sums floats: a figure ending in exactly half a nano-dollar may land either side.
          if (Math.abs(cost.nanoUsd - expected) > 1) t.fail(`${providerId}/${model.id} ${JSON.stringify(usage)} at ${new Date(at).toISOString()}: ${cost.nanoUsd} != ${expected}`)
        }
      }
    }
  }
  t.ok(compared > 1_000, `${compared} prices compared`)
})

t.test('fingerprints: volatile parts are normalised; non-errors have none', async (t) => {
  t.equal(normaliseErrorMessage('Timeout after 3000ms calling "api.x" id 9f1c2d3e-1111-2222-3333-444455556666'), 'timeout after <n>ms calling <str> id <uuid>')
  t.equal(normaliseErrorMessage('ENOENT /home/a/b.txt'), 'enoent <path>')
  const base = { type: 'error', outcome: undefined, agentId: 'a', tool: 't' }
  t.equal(errorFingerprint({ ...base, errorMessage: 'rate limit 429 at 12:01' }), errorFingerprint({ ...base, errorMessage: 'Rate limit 429 at 13:55' }))
  t.not(errorFingerprint({ ...base, errorMessage: 'x' }), errorFingerprint({ ...base, agentId: 'b', errorMessage: 'x' }))
  t.equal(errorFingerprint({ ...base, type: 'tool', outcome: 'success', errorMessage: 'x' }), '')
  t.match(errorFingerprint({ ...base, type: 'tool', outcome: 'failed', errorMessage: undefined }), /^[0-9a-f]{16}$/)
})

t.test('fingerprints: generated ids (cuids, ULIDs, prefixed ids) group together; names with a few digits do not', async (t) => {
  const same = (a: string, b: string, why: string) => t.equal(normaliseErrorMessage(a), normaliseErrorMessage(b), why)
  same('agent cbw5snx08vws77e7hi4egttf4 missing', 'agent chrtwmsjipnp2zjj4fat2s53t missing', 'cuids')
  same(`event ${newEventId(1_000_000)} rejected`, `event ${newEventId(9_000_000_000)} rejected`, 'the service\'s own event ids (ULIDs)')
  same('request req_8f3KdQ2xLm9P failed', 'request req_Zq1w9e8R7t6Y failed', 'prefixed ids')
  t.equal(normaliseErrorMessage('agent cbw5snx08vws77e7hi4egttf4 missing'), 'agent <id> missing')
  t.equal(normaliseErrorMessage('invalid base64url in x86_64 header'), 'invalid base<n>url in x<n>_<n> header', 'few digits: a name, not an id')
  t.equal(normaliseErrorMessage('model claude-3-5-sonnet-20241022 overloaded'), 'model claude-<n>-<n>-sonnet-<n> overloaded')
  t.not(normaliseErrorMessage('quota of project abcdefghij exceeded'), normaliseErrorMessage('quota of project klmnopqrst exceeded'), 'letters alone are words')
  t.equal(normaliseErrorMessage('timeout after 120000ms'), normaliseErrorMessage('timeout after 30000ms'), 'a number with its unit is a number, whatever its size')
  t.not(normaliseErrorMessage('model claude_3_5_sonnet_20241022 not found'), normaliseErrorMessage('model gpt_4_0613 not found'), 'words joined by underscores are no id')
  t.equal(normaliseErrorMessage('status_code_500_error in db01_shard_003'), 'status_code_<n>_error in db<n>_shard_<n>')
})

t.test('ids: cuids match the spec pattern; event ids sort by time', async (t) => {
  for (let i = 0; i < 200; i++) t.ok(isCuid(newCuid()))
  t.notOk(isCuid('C' + 'a'.repeat(24)))
  const a = newEventId(1_000_000)
  const b = newEventId(2_000_000)
  t.match(a, /^evt_[0-9A-HJKMNP-TV-Z]{26}$/)
  t.ok(a < b)
  const same = Array.from({ length: 100 }, () => newEventId(5_000_000))
  t.same([...same].sort(), same, 'monotonic within one millisecond')
})

t.test('timestamps: ISO 8601 with or without zone, real dates only, years 1970-2105', async (t) => {
  t.equal(parseIsoDateTime('2026-01-01T00:00:00Z'), Date.UTC(2026, 0, 1))
  t.equal(parseIsoDateTime('2026-01-01T01:00:00+01:00'), Date.UTC(2026, 0, 1))
  t.equal(parseIsoDateTime('2026-01-01T00:00:00'), Date.UTC(2026, 0, 1), 'no zone means UTC')
  t.equal(parseIsoDateTime('2026-01-01T00:00:00.123456Z'), Date.UTC(2026, 0, 1) + 123)
  for (const bad of ['2026-02-30T00:00:00Z', '2026-13-01T00:00:00Z', '1969-12-31T23:59:59Z', '2106-01-01T00:00:00Z', '2026-01-01', 'soon']) {
    t.ok(Number.isNaN(parseIsoDateTime(bad)), bad)
  }
})

t.test('regression: since=__proto__ (or any Object.prototype name) falls back like any unknown value, not NaN', async (t) => {
  const now = Date.UTC(2026, 0, 10)
  for (const since of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
    t.equal(sinceBound(since, now), 0, `${since}: the default, all`)
    t.equal(sinceBound(since, now, '7d'), now - 7 * 86_400_000, `${since}: the route's default`)
  }
  t.equal(sinceBound('24h', now), now - 86_400_000)
  t.equal(sinceBound(['24h'], now), 0, 'a repeated parameter is not a window')
  t.equal(clampInt('1e309', 1, 1000, 50), 50)
  t.equal(clampInt('-0', 1, 1000, 50), 1)
  t.equal(clampInt('9007199254740993', 1, 1000, 50), 1000)
})
