import t from 'tap'
import { compareDecimals, hasFilters, parseSearchFilters, scoreRange } from '../../src/domain/search-filters.ts'
import { likePattern, parseSearchText, termForms } from '../../src/domain/search-text.ts'

t.test('q: terms split on whitespace, quoted phrases whole, NFC, duplicates once', async (t) => {
  const terms = (q: string) => {
    const p = parseSearchText(q)
    if (!p.ok) throw new Error(p.message)
    return p.terms.map((x) => x.text)
  }
  t.same(terms('  timeout   payment '), ['timeout', 'payment'])
  t.same(terms('"payment  failed" retry'), ['payment failed', 'retry'], 'a phrase keeps its words, whitespace collapsed')
  t.same(terms('订单支付失败了'), ['订单支付失败了'], 'CJK is one term: matched as a substring, no word breaks needed')
  t.same(terms('🔥 ✅'), ['🔥', '✅'])
  t.same(terms('"open phrase to the end'), ['open phrase to the end'], 'a quote left open runs to the end')
  t.same(terms('a"b"c'), ['a', 'b', 'c'], 'a quote inside a word starts a phrase')
  t.same(terms('x x "x"'), ['x'], 'the same term once')
  t.same(terms('cafe\u0301'), ['café'], 'NFD input is compared in NFC')
  const forms = (q: string) => {
    const p = parseSearchText(q)
    if (!p.ok) throw new Error(p.message)
    return p.terms.map(termForms)
  }
  t.same(forms('café cafe\u0301 plain 支付'), [['café', 'cafe\u0301'], ['plain'], ['支付']], 'an accented term is looked for composed and decomposed')
  t.same(forms('한국'), [['한국', '\u1112\u1161\u11ab\u1100\u116e\u11a8']], 'Hangul syllables decompose into their jamo')
  t.same(terms('""   '), [], 'nothing to find: no filter')
  t.notOk(parseSearchText('x'.repeat(501)).ok, 'too long')
  t.notOk(parseSearchText(Array.from({ length: 11 }, (_, i) => `w${i}`).join(' ')).ok, 'too many terms')
  t.notOk(parseSearchText('a\u0000b').ok, 'control characters')
  t.notOk(parseSearchText('a\ud800b').ok, 'a lone surrogate')
  t.equal(likePattern('100%_a\\b'), '%100\\%\\_a\\\\b%', 'LIKE wildcards and the escape are escaped')
})

t.test('filters: repeatable values, strict new filters, lenient agentId', async (t) => {
  const ok = (q: Record<string, unknown>) => {
    const p = parseSearchFilters(q)
    if (!p.ok) throw new Error(JSON.stringify(p.problems))
    return p.filters
  }
  const problems = (q: Record<string, unknown>) => {
    const p = parseSearchFilters(q)
    return p.ok ? [] : p.problems.map((x) => x.path[0])
  }
  const f = ok({ type: ['tool', 'error', 'tool'], outcome: 'failed', 'meta.git.branch': ['main', 'dev'], hasMeta: 'env', minCostUsd: '007.50', from: '2026-11-01T00:00:00Z', to: '1795000000000' })
  t.same(f.types, ['tool', 'error'], 'OR within a field, each value once')
  t.same(f.outcomes, ['failed'], 'a single value is a list of one')
  t.same(f.meta, [{ path: 'git.branch', values: ['main', 'dev'] }])
  t.same(f.hasMeta, ['env'])
  t.equal(f.minCostUsd, '7.5', 'a decimal bound in its shortest form')
  t.equal(f.fromMs, Date.UTC(2026, 10, 1))
  t.equal(f.toMs, 1795000000000, 'unix milliseconds too')
  t.same(ok({ agentId: ['nope', 'c' + 'a'.repeat(24)] }).agentIds, ['c' + 'a'.repeat(24)], 'a non-cuid agentId is dropped (the spec\'s rule)')
  t.same(ok({ unknown: 'x', limit: '5', since: 'bogus' }).types, [], 'unknown parameters are ignored')

  t.same(problems({ type: 'nope' }), ['type'])
  t.same(problems({ minCostUsd: '1e-3' }), ['minCostUsd'], 'no exponents')
  t.same(problems({ minCostUsd: '2', maxCostUsd: '1.999999999' }), ['minCostUsd'])
  t.same(problems({ minCostUsd: '1.0', maxCostUsd: '1' }), [], 'equal bounds are fine')
  t.same(problems({ from: '2026-01-02', to: '2026-01-01T00:00:00Z' }), ['from'], 'a date without a time is not an instant')
  const message = (q: Record<string, unknown>) => {
    const p = parseSearchFilters(q)
    return p.ok ? '' : p.problems[0]!.message
  }
  t.match(message({ from: '2026-01-02' }), /a date alone is not an instant \(its midnight in UTC: 2026-01-02T00:00:00Z\)/, 'a date alone: what to send')
  t.match(message({ to: '2026-01-02T09:00:00 01:00' }), /send an offset's \+ as %2B/, 'an offset whose + became a space: how to send it')
  t.notMatch(message({ to: 'soon' }), /%2B|midnight/, 'otherwise the forms alone')
  t.same(problems({ 'meta.a..b': 'x', 'meta.': 'y' }), ['meta.', 'meta.a..b'])
  t.same(problems({ 'meta.k': 'v'.repeat(1001) }), ['meta.k'])
  t.same(problems({ type: Array.from({ length: 51 }, () => 'tool') }), ['type'], 'at most 50 values')
  t.same(problems({ q: ['a', 'b'], from: ['1', '2'] }), ['from', 'q'], 'single-valued parameters given twice')
  t.same(problems({ type: 'nope', outcome: 'bad', fingerprint: 'XYZ' }), ['type', 'outcome', 'fingerprint'], 'every problem, not only the first')

  t.notOk(hasFilters({ limit: '5', since: '7d', cursor: 'x', other: '1' }), 'the plain list parameters are not filters')
  t.ok(hasFilters({ 'meta.env': 'prod' }))
  t.ok(hasFilters({ q: '' }), 'an empty q still goes through the filters (and filters nothing)')
  t.notOk(hasFilters({ q: undefined }))
  t.equal(compareDecimals('0.1', '0.10'), 0)
  t.equal(compareDecimals('0.000000001', '0'), 1)
})

t.test('score filters: a range, a number or a label; OR within a name, AND across names', async (t) => {
  const parsed = parseSearchFilters({ 'score.accuracy': ['0.8..1', '..0.1'], 'score.thumbs': 'true', 'score.a.b': ['5', '1e-3..', 'x..y'], limit: '5' })
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems))
  t.same(parsed.filters.scores, [
    { name: 'a.b', labels: ['5', '1e-3..', 'x..y'], ranges: [{ min: 5, max: 5 }, { min: 0.001, max: undefined }] },
    { name: 'accuracy', labels: ['0.8..1', '..0.1'], ranges: [{ min: 0.8, max: 1 }, { min: undefined, max: 0.1 }] },
    { name: 'thumbs', labels: ['true'], ranges: [] },
  ], 'every value is a label; those that read as numbers are ranges too')
  t.same(scoreRange('-1.5..-0.5'), { min: -1.5, max: -0.5 })
  t.same(scoreRange('0.8..0.8'), { min: 0.8, max: 0.8 })
  t.equal(scoreRange('..'), null, 'two open ends: a label')
  t.equal(scoreRange('1..x'), null)
  t.equal(scoreRange('0x10'), null, 'decimals only')
  t.equal(scoreRange('1e999'), null, 'finite only')
  const problems = (q: Record<string, unknown>) => {
    const p = parseSearchFilters(q)
    return p.ok ? [] : p.problems.map((x) => x.path[0])
  }
  t.same(problems({ 'score.x': '2..1' }), ['score.x'], 'low end above high end')
  t.same(problems({ 'score.x': '' }), ['score.x'])
  t.same(problems({ 'score.': '1' }), ['score.'])
  t.same(problems({ 'score.x': 'a\u0000' }), ['score.x'])
  t.same(problems(Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`score.n${i}`, '1']))), ['score.n10'], 'at most 10 names')
  t.ok(hasFilters({ 'score.x': '1' }), 'a score filter is a filter')
})

t.test('too many score or metadata filters: named by the first past the limit in the order given, not sorted', async (t) => {
  const problems = (q: Record<string, unknown>) => {
    const p = parseSearchFilters(q)
    return p.ok ? [] : p.problems
  }
  // Given z0..z9 then a10: sorted, a10 comes first and z9 would be named.
  const scores = Object.fromEntries([...Array.from({ length: 10 }, (_, i) => [`score.z${i}`, '1']), ['score.a10', '1']])
  t.same(problems(scores), [{ path: ['score.a10'], message: 'at most 10 score filters' }])
  const meta = Object.fromEntries([...Array.from({ length: 20 }, (_, i) => [`meta.z${i}`, 'v']), ['meta.a20', 'v'], ['meta.a21', 'v']])
  t.same(problems(meta), [{ path: ['meta.a20'], message: 'at most 20 metadata filters (meta.* and hasMeta together)' }])
})

t.test('more than 50 agentId cuids is a 400 naming agentId; values that are not cuids are still dropped and do not count', async (t) => {
  const cuid = (i: number) => 'c' + String(i).padStart(24, '0')
  const p = parseSearchFilters({ agentId: Array.from({ length: 51 }, (_, i) => cuid(i)) })
  t.same(p.ok ? [] : p.problems, [{ path: ['agentId'], message: 'at most 50 values' }])
  const q = parseSearchFilters({ agentId: [...Array.from({ length: 50 }, (_, i) => cuid(i)), ...Array.from({ length: 30 }, () => 'not-a-cuid')] })
  t.ok(q.ok && q.filters.agentIds.length === 50, '50 cuids and 30 dropped values')
})

t.test('a cost bound past the largest one says the limit', async (t) => {
  const p = parseSearchFilters({ minCostUsd: '1000000000' })
  t.match(p.ok ? '' : p.problems[0]!.message, /999999999\.999999999/)
  const q = parseSearchFilters({ minCostUsd: '999999999.999999999', maxCostUsd: '0000000999999999.999999999' })
  t.ok(q.ok && q.filters.maxCostUsd === '999999999.999999999', 'the largest is taken, with leading zeros too')
})

t.test('an instant outside [1970, 2106) says the range, not the format', async (t) => {
  const RANGE = 'must be an instant from 1970-01-01T00:00:00Z up to (not including) 2106-01-01T00:00:00Z'
  for (const from of ['1969-12-31T00:00:00Z', '2106-01-01T00:00:00Z', '1970-01-01T00:00:00+05:00', '99999999999999']) {
    t.same(parseSearchFilters({ from }), { ok: false, problems: [{ path: ['from'], message: RANGE }] }, from)
  }
  t.match(parseSearchFilters({ to: 'yesterday' }), { ok: false, problems: [{ path: ['to'], message: /ISO 8601/ }] }, 'not an instant: the forms')
  t.match(parseSearchFilters({ from: '2026-02-30T00:00:00Z' }), { ok: false, problems: [{ path: ['from'], message: /ISO 8601/ }] }, 'no such day: the forms')
  t.ok(parseSearchFilters({ from: '0', to: '2105-12-31T23:59:59Z' }).ok, 'the ends of the range')
})

t.test('duration bounds take what ingestion takes: up to 2^53-1', async (t) => {
  const max = String(Number.MAX_SAFE_INTEGER)
  t.match(parseSearchFilters({ minDurationMs: max, maxDurationMs: max }), { ok: true, filters: { minDurationMs: Number.MAX_SAFE_INTEGER, maxDurationMs: Number.MAX_SAFE_INTEGER } })
  t.same(parseSearchFilters({ minDurationMs: '9007199254740992' }), {
    ok: false, problems: [{ path: ['minDurationMs'], message: 'must be an integer of milliseconds from 0 to 9007199254740991' }],
  }, 'past it: the bound said')
  t.match(parseSearchFilters({ minDurationMs: '00000000000000001', maxDurationMs: `000${max}` }), { ok: true, filters: { minDurationMs: 1, maxDurationMs: Number.MAX_SAFE_INTEGER } }, 'leading zeros, as a cost bound takes them')
  t.notOk(parseSearchFilters({ maxDurationMs: '0009007199254740992' }).ok, 'leading zeros do not lift the bound')
})

t.test('text limits count characters (code points), as the schemas do: an emoji is one', async (t) => {
  t.ok(parseSearchText('😀'.repeat(500)).ok, 'q: 500 emoji')
  t.notOk(parseSearchText('😀'.repeat(501)).ok, 'q: 501 emoji')
  t.ok(parseSearchFilters({ model: '😀'.repeat(200), 'meta.k': '😀'.repeat(1000), [`score.${'😀'.repeat(200)}`]: '😀'.repeat(200) }).ok, 'model, meta value, score name and value')
  t.notOk(parseSearchFilters({ model: '😀'.repeat(201) }).ok)
})

t.test('a score filter\'s name is checked by the score name rule: one no score can have is refused', async (t) => {
  const RULE = 'the score name must be 1 to 200 characters in composed Unicode form (NFC), without control or invisible characters (zero-width, bidi, fillers, variation selectors) and without whitespace at the start or end'
  for (const param of ['score. acc', 'score.acc\u200b', 'score.acc ', 'score.\u202eacc']) {
    t.same(parseSearchFilters({ [param]: '1' }), { ok: false, problems: [{ path: [param], message: RULE }] }, JSON.stringify(param))
  }
  t.ok(parseSearchFilters({ 'score.a b': '1' }).ok, 'a space inside is a name')
})
