import t from 'tap'
import { eventMatches, eventOfLine, flatLeaves, parseLiveId, formatLiveId, compareEntries } from '../../src/domain/live-events.ts'
import { parseSearchFilters, type SearchFilters } from '../../src/domain/search-filters.ts'
import { eventLine } from '../../src/domain/event-line.ts'
import { buildEventRow, type IncomingEvent } from '../../src/domain/event-row.ts'

const eventOf = (e: IncomingEvent) => eventOfLine(eventLine(buildEventRow(e, { eventId: 'evt_1', userId: 'u', agentId: 'c123', receivedAt: 1_764_000_000_000 })))
const filters = (q: Record<string, unknown>): SearchFilters => {
  const parsed = parseSearchFilters(q)
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems))
  return parsed.filters
}

t.test('a log line reads back as the API\'s event', async (t) => {
  const e = eventOf({ type: 'tool', toolExecuted: 'grep', model: 'gpt-4o', durationMs: 7, outcome: 'failed', input: { prompt: 'p' }, metadata: { sessionId: 's', traceId: 'tr', privacyLevel: 'minimal', tokensBreakdown: { inputBase: 3, output: 4 } } })
  t.match(e, {
    eventId: 'evt_1', agentId: 'c123', type: 'tool', toolExecuted: 'grep', model: 'gpt-4o', durationMs: 7, outcome: 'failed',
    input: { prompt: 'p' }, sessionId: 's', traceId: 'tr', privacyLevel: 'minimal', privacyChip: 'MIN',
    tokens: { inputBase: 3, cacheCreation: 0, cacheRead: 0, output: 4, total: 7 }, timestamp: '2025-11-24T16:00:00.000Z',
  })
  const bare = eventOf({})
  t.match(bare, { type: 'decision', outcome: null, model: null, input: null, metadata: null, amount: null, durationMs: null, transaction: null })
})

t.test('filters evaluated in memory as the search evaluates them', async (t) => {
  const e = eventOf({
    type: 'error', errorMessage: 'Upstream TIMEOUT after 30 s', model: 'gpt-4o', durationMs: 120, outcome: 'failed',
    input: { prompt: 'fetch the page', context: { url: 'https://example.test/a' } },
    metadata: { sessionId: 's-1', git: { branch: 'main' }, retries: 3, flag: true },
  })
  const yes = (q: Record<string, unknown>) => t.ok(eventMatches(e, filters(q)), JSON.stringify(q))
  const no = (q: Record<string, unknown>) => t.notOk(eventMatches(e, filters(q)), `not ${JSON.stringify(q)}`)
  yes({})
  yes({ type: ['tool', 'error'] })
  no({ type: 'tool' })
  yes({ outcome: 'failed', model: 'gpt-4o', sessionId: 's-1' })
  no({ traceId: 't-1' })
  no({ tool: 'grep' })
  yes({ minDurationMs: '120', maxDurationMs: '120' })
  no({ minDurationMs: '121' })
  yes({ q: 'timeout' })
  yes({ q: 'example.test "fetch the"' })
  no({ q: 'timeout nowhere' })
  yes({ q: 'main' }) // metadata values are searched
  yes({ 'meta.git.branch': 'main', 'meta.retries': '3', 'meta.flag': 'true' })
  no({ 'meta.git.branch': 'dev' })
  yes({ hasMeta: 'git' })
  no({ hasMeta: 'gitx' })
  yes({ minCostUsd: '0', maxCostUsd: '0' })
  no({ minCostUsd: '0.000000001' })
})

t.test('q finds accented text stored composed or decomposed, however the query spells it', async (t) => {
  const composed = eventOf({ type: 'reasoning', reasoning: 'Caf\u00e9 cr\u00e8me' })
  const decomposed = eventOf({ type: 'reasoning', reasoning: 'Cafe\u0301 noir' })
  for (const q of ['café', 'cafe\u0301', 'CAFÉ']) {
    t.ok(eventMatches(composed, filters({ q })), `${JSON.stringify(q)} finds the composed text`)
    t.ok(eventMatches(decomposed, filters({ q })), `${JSON.stringify(q)} finds the decomposed text`)
  }
  t.notOk(eventMatches(composed, filters({ q: 'cafe' })), 'the letters without the accent do not find the composed text')
  t.ok(eventMatches(decomposed, filters({ q: 'cafe' })), 'they do find the decomposed text, whose accent is a character of its own')
})

t.test('metadata leaves as metadata_flat holds them', async (t) => {
  t.same(flatLeaves({ a: { b: { c: 1, d: { e: 2 } } }, s: 'x', n: null, l: [1] }), [['a.b.c', '1'], ['s', 'x']])
  // An empty key is a path of its own, as the engine joins keys (concat(a, '.', b)).
  t.same(flatLeaves({ '': 'e', a: { '': 'f', b: { '': 'g' } } }), [['', 'e'], ['a.', 'f'], ['a.b.', 'g']])
})

t.test('stream ids', async (t) => {
  t.same(parseLiveId(formatLiveId({ entry: '1764000000000-3', index: 7 })), { entry: '1764000000000-3', index: 7 })
  t.equal(parseLiveId('nonsense'), null)
  for (const padded of ['01764000000000-3:7', '1764000000000-03:7', '1764000000000-3:07']) {
    t.equal(parseLiveId(padded), null, `${padded}: leading zeros are not an id the stream gives (its batch would be sent again)`)
  }
  t.same(parseLiveId('1764000000000-0:0'), { entry: '1764000000000-0', index: 0 }, 'a zero is one digit')
  t.equal(parseLiveId(undefined), null)
  t.ok(compareEntries('10-0', '9-5') > 0)
  t.ok(compareEntries('10-1', '10-2') < 0)
})

t.test('numbers in metadata as the engine writes them back (clickhouse/018_search.sql)', async (t) => {
  const leaves = flatLeaves({ n: { a: 1e21, b: 1.7976931348623157e308, c: 5e-324, d: 0.1 + 0.2, e: -1.5, f: 2 ** 53 - 1, g: 1e5, h: 2e-7 } })
  t.same(leaves, [['n.a', '1e21'], ['n.b', '1.7976931348623157e308'], ['n.c', '5e-324'], ['n.d', '0.30000000000000004'], ['n.e', '-1.5'], ['n.f', '9007199254740991'], ['n.g', '100000'], ['n.h', '2e-7']])
  // 1e20 is written as 21 digits, which fit no 64-bit integer: the engine reads none of that object.
  t.same(flatLeaves({ s: 'x', n: { a: 1e20 } }), [])
  t.same(flatLeaves({ s: 'x', deep: [{ a: -1e19 }] }), [])
  t.same(flatLeaves({ s: 'x', n: -(2 ** 63) }), [], '-2^63 is written -9223372036854776000, below the 64-bit integers')
  t.same(flatLeaves({ s: 'x', n: 2 ** 64 - 2048 }), [['s', 'x'], ['n', '18446744073709550000']])
})
