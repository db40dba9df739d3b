import t from 'tap'
import {
  inputProblems, LONE_SURROGATE, MAX_DEPTH, mayBreakInputRules, mergeProblems, NOT_FINITE, numberLiteralProblems,
  TOO_DEEP, UNDERFLOW, UNSAFE_INTEGER,
} from '../../src/domain/input-rules.ts'
import { parseIsoDateTime } from '../../src/domain/date-time.ts'

/** `levels` objects, one inside the other: the innermost is `levels - 1` levels below the root. */
function nested (levels: number, inner = '1'): string {
  let text = inner
  for (let i = 0; i < levels; i++) text = `{"m":${text}}`
  return text
}

t.test('an ordinary event has no problems and does not pass the cheap gate', async (t) => {
  const text = JSON.stringify({
    agentId: 'agent-1', timestamp: 1767225600000, type: 'tool', input: { prompt: 'hi', context: { a: [1, 2.5, -3] } },
    toolsConsidered: ['search', 'ünïcödé 😀'], amount: { token: 'USDC', value: 12.5 }, durationMs: 1234,
    metadata: { tokensBreakdown: { inputBase: 100, output: 20 }, sessionId: 's', nested: { deeper: { list: [[1], [2]] } } },
  })
  t.equal(mayBreakInputRules(text), false)
  t.same(inputProblems(JSON.parse(text)), [])
  t.same(numberLiteralProblems(text), [])
})

t.test('lone surrogate in a value, an array item and a key is reported at its path; pairs are fine', async (t) => {
  const body = JSON.parse('{"reasoning":"x\\ud800","toolsConsidered":["ok","\\udfff"],"metadata":{"k\\ud800y":1,"ok":"\\ud83d\\ude00"}}')
  t.same(inputProblems(body), [
    { path: ['reasoning'], message: LONE_SURROGATE },
    { path: ['toolsConsidered', 1], message: LONE_SURROGATE },
    { path: ['metadata', 'k\ud800y'], message: LONE_SURROGATE },
  ])
  t.same(inputProblems('\ud800'), [{ path: [], message: LONE_SURROGATE }], 'a bare string')
  t.same(inputProblems({ 'k\ud800': 'v\udc00' }), [{ path: ['k\ud800'], message: LONE_SURROGATE }], 'a bad key and value share one detail')
  t.same(inputProblems({ nul: 'a\u0000b' }), [], 'NUL characters are allowed')
  t.equal(mayBreakInputRules('{"a":"\\ud800"}'), true)
})

t.test(`depth: ${MAX_DEPTH} levels below the root pass, one more is refused at the container that crosses`, async (t) => {
  t.same(inputProblems(JSON.parse(nested(MAX_DEPTH + 1))), [])
  const over = inputProblems(JSON.parse(nested(MAX_DEPTH + 2)))
  t.same(over, [{ path: Array(MAX_DEPTH + 1).fill('m'), message: TOO_DEEP }])
  t.same(inputProblems([[[1]]], 1), [{ path: [0, 0], message: 'nests objects or arrays more than 1 levels deep' }])
})

t.test('depth 100,000 is walked without recursion (regression: stack overflow while hashing)', async (t) => {
  const text = nested(100_000)
  t.equal(mayBreakInputRules(text), true)
  const problems = inputProblems(JSON.parse(text))
  t.equal(problems.length, 1)
  t.equal(problems[0]!.path.length, MAX_DEPTH + 1)
  let arrays = '0'
  for (let i = 0; i < 100_000; i++) arrays = `[${arrays}]`
  t.same(inputProblems(JSON.parse(arrays))[0]!.path, Array(MAX_DEPTH + 1).fill(0))
})

t.test('numbers: overflow, underflow and unsafe integers are found in the raw text with their paths', async (t) => {
  const text = '{"amount":{"token":"T","value":1e309},"a":[-1e309, 1e-400, -0.0e-999, 0, 1e-300, 5e-324],' +
    '"metadata":{"big":9007199254740993,"safe":9007199254740991,"neg":-9007199254740992,"frac":12345678901234567890.5,' +
    '"expo":1e20,"zeros":0.00000000000000000000000000001,"under":0.' + '0'.repeat(400) + '1}}'
  t.same(numberLiteralProblems(text), [
    { path: ['amount', 'value'], message: NOT_FINITE },
    { path: ['a', 0], message: NOT_FINITE },
    { path: ['a', 1], message: UNDERFLOW },
    { path: ['metadata', 'big'], message: UNSAFE_INTEGER },
    { path: ['metadata', 'neg'], message: UNSAFE_INTEGER },
    { path: ['metadata', 'under'], message: UNDERFLOW },
  ])
  t.same(inputProblems(JSON.parse(text)).map((p) => p.path), [['amount', 'value'], ['a', 0]], 'the walk sees the overflows too')
})

t.test('numbers: strings that look like numbers, escapes and keys do not confuse the tokenizer', async (t) => {
  const text = '{"s":"1e999 \\" 99999999999999999999 \\\\","k\\"1e999":[{"x":"\\\\"},{"y":9999999999999999999}],"1e999":2}'
  t.same(numberLiteralProblems(text), [{ path: ['k"1e999', 1, 'y'], message: UNSAFE_INTEGER }])
  t.same(numberLiteralProblems('99999999999999999999'), [{ path: [], message: UNSAFE_INTEGER }], 'a bare number')
  t.same(numberLiteralProblems('[1,2,[3,{"a":[]}],1e400]'), [{ path: [3], message: NOT_FINITE }], 'indices count across nested containers')
  t.same(numberLiteralProblems('{"id":"1234567890123456789"}'), [], 'digits in a string pass the gate but are not numbers')
})

t.test('mergeProblems keeps the first detail for a path', async (t) => {
  t.same(mergeProblems([{ path: ['a'], message: 'x' }], [{ path: ['a'], message: 'y' }, { path: ['b'], message: 'z' }]), [
    { path: ['a'], message: 'x' }, { path: ['b'], message: 'z' },
  ])
})

t.test('timestamps: the instant after the offset must be in [1970-01-01Z, 2106-01-01Z)', async (t) => {
  t.ok(Number.isNaN(parseIsoDateTime('1970-01-01T00:00:00+05:00')), 'regression: 1970 local time east of UTC is 1969')
  t.equal(parseIsoDateTime('1969-12-31T23:00:00-01:00'), 0, '1969 local time west of UTC can be 1970')
  t.equal(parseIsoDateTime('1970-01-01T00:00:00Z'), 0)
  t.equal(parseIsoDateTime('2105-12-31T23:59:59.999Z'), Date.UTC(2106, 0, 1) - 1)
  t.ok(Number.isNaN(parseIsoDateTime('2106-01-01T00:00:00Z')))
  t.ok(Number.isNaN(parseIsoDateTime('2105-12-31T23:30:00-01:00')), 'the last day of 2105 west of UTC is in 2106')
})
