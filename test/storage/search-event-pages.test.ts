import t from 'tap'
import { migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { SearchRepository, metaPair, type SearchWindow } from '../../src/storage/search-repository.ts'
import { parseSearchFilters, type SearchFilters } from '../../src/domain/search-filters.ts'
import { buildEventRow, type EventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'
import { walkPages } from '../helpers/page-walk.ts'

// A page of filtered events is read two ways at once (the hour below its start, and the whole window
// when the skip indexes leave few rows to read), and by a third when neither answers. Whichever way
// answers, the pages walked must be exactly the matching events, newest first, each once: here with
// the bound that lets the whole-window read answer (the default), and with a bound of one row, so
// that the engine refuses it and the unbounded read answers.
const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
const ch = handle.client
await migrateClickHouse(ch)
const events = new EventsRepository(ch)
const HOUR = 3_600_000

function filters (query: Record<string, string | string[]>): SearchFilters {
  const parsed = parseSearchFilters(query)
  if (!parsed.ok) throw new Error(JSON.stringify(parsed))
  return parsed.filters
}

// Metadata whose (path, value) pairs a plain `path=value` text would confuse: the length of the
// path in front of each pair keeps them apart.
const METAS: Record<string, unknown>[] = [
  { 'a=b': 'c' }, { a: 'b=c' }, { 'a.b': 'x' }, { a: { b: 'x' } }, { '1:a': 'b' }, { 1: ':ab' },
  { customer: 'acme' }, { customer: 'ACME' }, { customer: 'globex', env: '支付' }, { note: 'é' }, {},
]

function row (userId: string, i: number, ts: number, receivedAt: number): EventRow {
  return buildEventRow({
    agentId: `agent-${i % 3}`,
    type: (['tool', 'decision', 'error'] as const)[i % 3]!,
    timestamp: ts,
    reasoning: i % 17 === 0 ? 'a quetzalcoatl sighting' : `routine step ${i % 5}`,
    metadata: METAS[i % METAS.length]!,
  }, { eventId: newEventId(receivedAt), userId, agentId: `agent-${i % 3}`, receivedAt })
}

/** Every event of a walk over pages of `limit`, as the route pages. */
async function walk (search: SearchRepository, r: { userId: string; hidden: string[] }, w: SearchWindow, f: SearchFilters, limit: number) {
  return (await walkPages('events', w.asOf, (start) => search.events(r, w, f, { limit, start }))).map((e) => e.eventId)
}

t.test('pages of filtered events are the same whichever read answers', async (t) => {
  const userId = randomId('pages-')
  const asOf = Date.parse('2026-08-01T12:00:00Z')
  // 240 events over ten hours before asOf, three in the hour below it, and ties in time.
  const stored = Array.from({ length: 240 }, (_, i) => {
    const ts = i < 3 ? asOf - 10 * 60_000 - i : asOf - HOUR - Math.floor(i / 2) * 150_000
    return row(userId, i, ts, asOf - 1000)
  })
  // Another user's events hold the same values: never in the pages.
  await events.insert([...stored, ...Array.from({ length: 30 }, (_, i) => row(randomId('other-'), i, asOf - 2 * HOUR, asOf - 1000))])
  const newestFirst = (a: EventRow, b: EventRow) => Number(b.ts) - Number(a.ts) || (a.event_id < b.event_id ? 1 : -1)
  const metas = new Map(stored.map((e, i) => [e.event_id, METAS[i % METAS.length]!]))
  const metaOf = (e: EventRow) => metas.get(e.event_id) as Record<string, any>
  const cases: [string, Record<string, string | string[]>, (e: EventRow) => boolean][] = [
    ['a rare term', { q: 'quetzalcoatl' }, (e) => e.reasoning.includes('quetzalcoatl')],
    ['a common term', { q: 'routine' }, (e) => e.reasoning.includes('routine')],
    ['meta.a=b=c (the path a, not a=b)', { 'meta.a': 'b=c' }, (e) => metaOf(e).a === 'b=c'],
    ['meta.a=b holds the nested and the dotted path', { 'meta.a.b': 'x' }, (e) => metaOf(e)['a.b'] === 'x' || metaOf(e).a?.b === 'x'],
    ['meta.1:a=b', { 'meta.1:a': 'b' }, (e) => metaOf(e)['1:a'] === 'b'],
    ['meta.1=:ab', { 'meta.1': ':ab' }, (e) => metaOf(e)['1'] === ':ab'],
    ['values are case-sensitive', { 'meta.customer': 'acme' }, (e) => metaOf(e).customer === 'acme'],
    ['two values of a path', { 'meta.customer': ['acme', 'globex'] }, (e) => ['acme', 'globex'].includes(metaOf(e).customer as string)],
    ['two paths', { 'meta.customer': 'globex', 'meta.env': '支付' }, (e) => metaOf(e).customer === 'globex'],
    ['a value held by none', { 'meta.customer': 'initech' }, () => false],
    ['a term and a value', { q: 'quetzalcoatl', 'meta.note': 'é' }, (e) => e.reasoning.includes('quetzalcoatl') && metaOf(e).note === 'é'],
  ]
  const w = { sinceMs: asOf - 20 * HOUR, asOf }
  for (const [guard, label] of [[undefined, 'the whole window read beside the hour'], [1, 'the bound refused']] as const) {
    const search = new SearchRepository(ch, guard)
    for (const [name, query, test] of cases) {
      const want = stored.filter(test).sort(newestFirst).map((e) => e.event_id)
      t.same(await walk(search, { userId, hidden: [] }, w, filters(query), 7), want, `${label}: ${name} (${want.length})`)
    }
    const hidden = stored.filter((e) => e.agent_id !== 'agent-1' && e.reasoning.includes('quetzalcoatl')).sort(newestFirst).map((e) => e.event_id)
    t.same(await walk(search, { userId, hidden: ['agent-1'] }, w, filters({ q: 'quetzalcoatl' }), 4), hidden, `${label}: a hidden agent's events are left out`)
  }
  t.ok(stored.filter((e) => e.reasoning.includes('quetzalcoatl')).length >= 10, 'the rare term is held by several pages of events')
})

t.test('a pair is the length of its path in bytes, the path, then the value', async (t) => {
  t.equal(metaPair('customer', 'acme'), '8:customeracme')
  t.equal(metaPair('支付', 'x'), '6:支付x', 'bytes of UTF-8, as the engine counts a path')
  t.not(metaPair('a=b', 'c'), metaPair('a', 'b=c'))
  t.not(metaPair('1:a', 'b'), metaPair('1', ':ab'))
})

t.test('an event gone between the ids and their events leaves its page one short, and the walk goes on', async (t) => {
  const userId = randomId('pages-gone-')
  const asOf = Date.parse('2026-08-02T12:00:00Z')
  const stored = Array.from({ length: 40 }, (_, i) => row(userId, i * METAS.length + 6, asOf - 3 * HOUR - i * 2 * HOUR, asOf - 1000))
  await events.insert(stored)
  const want = [...stored].sort((a, b) => Number(b.ts) - Number(a.ts)).map((e) => e.event_id)
  const search = new SearchRepository(ch)
  // Two hours apart, so the hour's read never fills a page. As if a merge of the retention deleted
  // each page's last event between the two reads:
  const byId = (search as any).eventsById.bind(search)
  ;(search as any).eventsById = async (r: unknown, ids: { event_id: string }[]) => (await byId(r, ids)).slice(0, -1)
  const got = await walk(search, { userId, hidden: [] }, { sinceMs: asOf - 100 * HOUR, asOf }, filters({ 'meta.customer': 'acme' }), 7)
  const gone = new Set(want.filter((_, i) => i % 7 === 6 || i === want.length - 1))
  t.same(got, want.filter((id) => !gone.has(id)), 'every other event, each once, to the end')
})
