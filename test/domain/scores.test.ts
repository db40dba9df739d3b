import t from 'tap'
import { buildScoreRow, dataTypeOf, scoreLine, scoreVersion, scoreNameProblem, scoreShapeProblems, SCORE_INSERT_COLUMNS, SCORE_LINE_START } from '../../src/domain/score-row.ts'
import { configMismatch, configProblems, type ScoreConfig } from '../../src/domain/score-config.ts'
import { spanEvaluations } from '../../src/domain/otlp-scores.ts'
import { figuresOf, summarise, type FigureRow } from '../../src/domain/score-summary.ts'
import type { OtlpSpan } from '../../src/domain/otlp-codec.ts'
import { bodyAjv } from '../../src/validation.ts'
import { scoreName } from '../../schemas/score.ts'

t.test('a score row: its line starts with its row id and holds every column in order', async (t) => {
  const row = buildScoreRow({ traceId: 't', spanId: 's', name: 'thumbs', boolean: false, comment: 'no', metadata: { a: 1 } }, { rowId: 'scr_X', userId: 'u', agentId: null, receivedAt: 1000 })
  t.match(row, { score_id: 'scr_X', data_type: 'boolean', value: 0, label: 'false', source: 'api', agent_id: '', author_id: '' })
  const line = scoreLine(row)
  t.ok(line.startsWith(SCORE_LINE_START))
  const values = JSON.parse(line) as unknown[]
  t.equal(values.length, SCORE_INSERT_COLUMNS.length)
  t.same(Object.fromEntries(SCORE_INSERT_COLUMNS.map((c, i) => [c, values[i]])), row, 'values in SCORE_INSERT_COLUMNS order')
  const later = buildScoreRow({ scoreId: 'mine', traceId: 't', name: 'q', value: 2 }, { rowId: 'scr_Y', userId: 'u', agentId: 'a', receivedAt: 1000 })
  t.equal(later.score_id, 'mine')
  t.ok(later.version > row.version, 'a later write of the same millisecond has a higher version')
  t.equal(buildScoreRow({ traceId: 't', name: 'v', label: 'good' }, { rowId: 'scr_Z', userId: 'u', agentId: null, receivedAt: 1 }).value, null)
})

t.test('shape rules: one target, one value, spanId with a trace, finite values', async (t) => {
  t.same(scoreShapeProblems({ traceId: 't', name: 'x', value: 1 }), [])
  t.same(scoreShapeProblems({ eventId: 'e', name: 'x', label: 'l' }), [])
  t.match(scoreShapeProblems({ name: 'x', value: 1 }), [{ path: ['traceId'] }])
  t.match(scoreShapeProblems({ traceId: 't', eventId: 'e', name: 'x', value: 1 }), [{ path: ['eventId'] }])
  t.match(scoreShapeProblems({ sessionId: 's', spanId: 'p', name: 'x', value: 1 }), [{ path: ['spanId'] }])
  t.match(scoreShapeProblems({ traceId: 't', name: 'x', value: 1, boolean: true }), [{ path: ['boolean'] }])
  t.match(scoreShapeProblems({ traceId: 't', name: 'x', value: Infinity }), [{ path: ['value'] }])
  t.equal(dataTypeOf({ boolean: true }), 'boolean')
})

t.test('configs: their own rules, and a score against them', async (t) => {
  t.same(configProblems({ dataType: 'numeric', min: 0, max: 1 }), [])
  t.match(configProblems({ dataType: 'categorical' }), [{ path: ['labels'] }])
  t.match(configProblems({ dataType: 'numeric', min: 1, max: 0 }), [{ path: ['min'] }])
  t.match(configProblems({ dataType: 'boolean', max: 1 }), [{ path: ['max'] }])
  t.match(configProblems({ dataType: 'categorical', labels: ['a'], alert: { below: 1 } }), [{ path: ['alert'] }])
  const base = { description: null, alert: null, updatedAt: '' }
  const numeric: ScoreConfig = { name: 'n', dataType: 'numeric', min: 0, max: 1, labels: null, ...base }
  t.equal(configMismatch({ value: 0 }, numeric), null, 'bounds are inclusive')
  t.equal(configMismatch({ value: 1 }, numeric), null)
  t.match(configMismatch({ value: -0.01 }, numeric), { path: ['value'], message: /at least 0/ })
  t.match(configMismatch({ label: 'x' }, numeric), { path: ['value'], message: /is numeric/ })
  const open: ScoreConfig = { ...numeric, min: null, max: null }
  t.equal(configMismatch({ value: -1e9 }, open), null, 'no bound')
  const categorical: ScoreConfig = { name: 'c', dataType: 'categorical', min: null, max: null, labels: ['a', 'b'], ...base }
  t.equal(configMismatch({ label: 'b' }, categorical), null)
  t.match(configMismatch({ label: 'B' }, categorical), { path: ['label'] }, 'labels are exact')
  const boolean: ScoreConfig = { name: 'b', dataType: 'boolean', min: null, max: null, labels: null, ...base }
  t.match(configMismatch({ value: 1 }, boolean), { path: ['boolean'] })
})

const span = (events: OtlpSpan['events']): OtlpSpan => ({
  traceId: 'aa', spanId: 'bb', parentSpanId: '', name: 'chat', kind: 3, startMs: 1, endMs: 2, attributes: {}, events,
  status: { code: 0, message: '' }, resource: {}, scope: { name: 's', version: '' },
})

t.test('OTLP evaluation results: mapped by the GenAI conventions, ids by their place in the span, names as sent', async (t) => {
  const scores = spanEvaluations(span([
    { name: 'exception', timeMs: 1, attributes: {} },
    { name: 'gen_ai.evaluation.result', timeMs: 1, attributes: { 'gen_ai.evaluation.name': 'rel\nevance', 'gen_ai.evaluation.score.value': '0.5', 'gen_ai.evaluation.explanation': 'line 1\nline 2', 'gen_ai.response.id': 'r1' } },
    { name: 'gen_ai.evaluation.result', timeMs: 1, attributes: { 'gen_ai.evaluation.name': 'tone', 'gen_ai.evaluation.score.label': 'polite', 'gen_ai.evaluation.score.value': 'high' } },
    { name: 'gen_ai.evaluation.result', timeMs: 1, attributes: { 'gen_ai.evaluation.name': 'empty' } },
    { name: 'gen_ai.evaluation.result', timeMs: 1, attributes: { 'gen_ai.evaluation.score.value': 1 } },
  ]), 'agent-x')
  t.same(scores, [
    { scoreId: 'otel:aa:bb:0', traceId: 'aa', spanId: 'bb', name: 'rel\nevance', source: 'api', agentId: 'agent-x', value: 0.5, comment: 'line 1\nline 2', metadata: { responseId: 'r1' } },
    { scoreId: 'otel:aa:bb:1', traceId: 'aa', spanId: 'bb', name: 'tone', source: 'api', agentId: 'agent-x', label: 'polite' },
  ])
})

t.test('OTLP evaluation results of a span at minimal keep no explanation, which may quote the content', async (t) => {
  const scores = spanEvaluations(span([
    { name: 'gen_ai.evaluation.result', timeMs: 1, attributes: { 'gen_ai.evaluation.name': 'relevance', 'gen_ai.evaluation.score.value': 0.5, 'gen_ai.evaluation.explanation': 'the answer quotes "my SSN"' } },
  ]), 'agent-x', false)
  t.same(scores, [{ scoreId: 'otel:aa:bb:0', traceId: 'aa', spanId: 'bb', name: 'relevance', source: 'api', agentId: 'agent-x', value: 0.5 }])
})

t.test('OTLP evaluation values: a string is a value only when it is a decimal number', async (t) => {
  const values = ['0x10', '0b1', '0o7', 'Infinity', '-Infinity', 'NaN', '', ' ', '1_000', '12abc', '0.5', ' -3 ', '1e-3', '.5', '5.', '+2']
  const scores = spanEvaluations(span(values.map((v) => ({ name: 'gen_ai.evaluation.result', timeMs: 1, attributes: { 'gen_ai.evaluation.name': 'n', 'gen_ai.evaluation.score.value': v, 'gen_ai.evaluation.score.label': 'text' } }))), undefined)
  t.same(scores.map((s) => s.value ?? s.label), ['text', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 0.5, -3, 0.001, 0.5, 5, 2])
})

t.test('summary: figures only where there are values or labels; a name only in the previous period', async (t) => {
  const row = (name: string, key: string, extra: Partial<FigureRow> = {}): FigureRow =>
    ({ name, key, dataType: 'numeric', count: 2, numericCount: 2, mean: 1, p50: 1, p90: 1, labels: {}, ...extra })
  t.same(figuresOf(row('a', 'current', { numericCount: 0, labels: { x: 2 }, dataType: 'categorical' })), { count: 2, numeric: null, labels: { x: 2 } })
  const [gone] = summarise([row('gone', 'previous', { mean: 0.5 })], [], [])
  t.match(gone, { name: 'gone', count: 0, numeric: null, previous: { count: 2, numeric: { mean: 0.5 } }, change: { count: -2, mean: null }, byDay: [], byAgent: [] })
  const [both] = summarise([row('q', 'current', { mean: 0.75 }), row('q', 'previous', { mean: 0.5 })], [row('q', '2026-01-01')], [row('q', '')])
  t.match(both, { change: { count: 0, mean: 0.25 }, byDay: [{ day: '2026-01-01' }], byAgent: [{ agentId: null }] })
})

t.test('a score name\'s problem says the rule in words, and agrees with the schema on every name', async (t) => {
  const validate = bodyAjv.compile(scoreName)
  const names = ['helpfulness', 'a', 'a b', 'é'.repeat(200), '😀'.repeat(200), '😀'.repeat(201), 'x'.repeat(201), '', ' ', ' acc', 'acc ', 'acc\u200b', 'a\u0001b', 'a\u0085', '\u202eacc',
    'acc\u034f', 'acc\ufe0f', 'acc\u115f', 'acc\u2800', 'a\u3164b', 'cafe\u0301', 'caf\u00e9', '\u2800', '支付失败']
  for (const name of names) {
    const problem = scoreNameProblem(name)
    t.equal(problem === null, validate(name), JSON.stringify(name.slice(0, 10)))
    if (problem !== null) t.notMatch(problem, /pattern|\\p\{/, 'no regex in the message')
  }
  for (const invisible of ['acc\u034f', 'acc\ufe0f', 'acc\u115f', 'acc\u2800', 'cafe\u0301']) t.not(scoreNameProblem(invisible), null, JSON.stringify(invisible))
  t.equal(scoreNameProblem('caf\u00e9'), null, 'composed accents are fine')
  t.equal(scoreNameProblem('a\u0001b'), 'must be 1 to 200 characters in composed Unicode form (NFC), without control or invisible characters (zero-width, bidi, fillers, variation selectors) and without whitespace at the start or end')
})

t.test('the versions of one millisecond keep growing, however many writes it holds', async (t) => {
  const versions = Array.from({ length: 2500 }, () => scoreVersion(1_764_000_000_000))
  t.ok(versions.every((v, i) => i === 0 || v > versions[i - 1]!), 'each write after the one before it (a counter wrapped at 1,000)')
  t.ok(scoreVersion(1_764_000_000_001) > versions.at(-1)!, 'and the next millisecond\'s after them all')
  t.ok(scoreVersion(1_764_000_100_000) === 1_764_000_100_000 * 1000, 'a later millisecond starts at its own time')
})
