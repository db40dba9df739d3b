import t from 'tap'
import { migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { SearchRepository, type SearchWindow } from '../../src/storage/search-repository.ts'
import { parseSearchFilters, type SearchFilters } from '../../src/domain/search-filters.ts'
import { buildEventRow, type EventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { pageStart, type PageStart } from '../../src/domain/cursor.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'
import { walkPages } from '../helpers/page-walk.ts'
import { countingClient } from '../helpers/counted-client.ts'

// A page of sessions or traces under a filter is read from the newest hour below its start when
// that hour holds it, and from the whole window otherwise. Whichever way answers, the walk must give
// exactly the groups with a matching event, by their last event (then id), each once, with the
// figures of all their events: here with groups that reach across the first window's edge (matching
// only by an event below it), across a page's start, and with ties in time, walked with a window of
// ten minutes, of an hour, and with none (the whole window at once).
const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
const ch = handle.client
await migrateClickHouse(ch)
const events = new EventsRepository(ch)
const MINUTE = 60_000
const HOUR = 60 * MINUTE

function filters (query: Record<string, string | string[]>): SearchFilters {
  const parsed = parseSearchFilters(query)
  if (!parsed.ok) throw new Error(JSON.stringify(parsed))
  return parsed.filters
}

type Sent = { row: EventRow; trace: string; session: string; text: string; customer: string; type: string }

/** The events: traces of 1-6 events up to 40 minutes long, sessions of three traces, over 12 hours. */
function load (userId: string, asOf: number): Sent[] {
  let seed = 7
  const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 }
  const out: Sent[] = []
  for (let g = 0; g < 90; g++) {
    const trace = `tr-${String(g).padStart(3, '0')}`
    const session = `se-${String(Math.floor(g / 3)).padStart(3, '0')}`
    const end = asOf - 5 * MINUTE - Math.floor(rand() * 12 * HOUR)
    const n = 1 + Math.floor(rand() * 6)
    for (let i = 0; i < n; i++) {
      // Some events share their time with another group's (ties broken by id).
      const ts = i === 0 && g % 10 === 0 ? asOf - 30 * MINUTE : end - Math.floor(rand() * 40) * MINUTE
      const text = rand() < 0.5 ? 'routine step' : rand() < 0.1 ? 'a quetzalcoatl sighting' : 'quiet'
      const type = rand() < 0.2 ? 'error' : 'tool'
      const customer = rand() < 0.15 ? 'acme' : 'globex'
      const agentId = `agent-${g % 4}`
      const row = buildEventRow({ agentId, type: type as 'tool', timestamp: ts, reasoning: text, metadata: { traceId: trace, sessionId: session, customer } },
        { eventId: newEventId(asOf - 1000), userId, agentId, receivedAt: asOf - 1000 })
      out.push({ row, trace, session, text, customer, type })
    }
  }
  return out
}

/** Every group of a walk over pages of `limit`, as id, event count, start and end. */
async function walk (search: SearchRepository, kind: 'traces' | 'sessions', r: { userId: string; hidden: string[] }, w: SearchWindow, f: SearchFilters, limit: number) {
  const groups = await walkPages<Record<string, any>>(kind, w.asOf, (start) => kind === 'traces' ? search.traces(r, w, f, { limit, start }) : search.sessions(r, w, f, { limit, start }))
  return groups.map((x) => `${x.traceId ?? x.sessionId}:${x.events}:${x.start}:${x.end}`)
}

t.test('pages of filtered traces and sessions are the same whichever way they are read', async (t) => {
  const userId = randomId('groups-')
  const asOf = Date.parse('2026-08-03T12:00:00Z')
  const sent = load(userId, asOf)
  await events.insert([...sent.map((x) => x.row), ...load(randomId('other-'), asOf).map((x) => x.row)])
  const w = { sinceMs: asOf - 24 * HOUR, asOf }
  const expected = (by: 'trace' | 'session', test: (x: Sent) => boolean, hidden: string[] = []) => {
    const seen = sent.filter((x) => !hidden.includes(x.row.agent_id))
    const hits = new Set(seen.filter(test).map((x) => x[by]))
    const groups = new Map<string, number[]>()
    for (const x of seen) if (hits.has(x[by])) groups.set(x[by], [...groups.get(x[by]) ?? [], Number(x.row.ts)])
    return [...groups].map(([id, ts]) => ({ id, n: ts.length, first: Math.min(...ts), last: Math.max(...ts) }))
      .sort((a, b) => b.last - a.last || (a.id < b.id ? -1 : 1))
      .map((g) => `${g.id}:${g.n}:${new Date(g.first).toISOString()}:${new Date(g.last).toISOString()}`)
  }
  const cases: [string, Record<string, string | string[]>, (x: Sent) => boolean][] = [
    ['no filter', {}, () => true],
    ['a common term', { q: 'routine' }, (x) => x.text.includes('routine')],
    ['a rare term', { q: 'quetzalcoatl' }, (x) => x.text.includes('quetzalcoatl')],
    ['a metadata value', { 'meta.customer': 'acme' }, (x) => x.customer === 'acme'],
    ['a type and a term', { type: 'error', q: 'step' }, (x) => x.type === 'error' && x.text.includes('step')],
  ]
  for (const [windowMs, label] of [[10 * MINUTE, 'ten minutes first'], [HOUR, 'an hour first'], [0, 'the whole window']] as const) {
    const search = new SearchRepository(ch, undefined, windowMs)
    for (const [name, query, test] of cases) {
      for (const [kind, by, limit] of [['traces', 'trace', 4], ['sessions', 'session', 3]] as const) {
        const want = expected(by, test)
        t.same(await walk(search, kind, { userId, hidden: [] }, w, filters(query), limit), want, `${label}: ${kind}, ${name} (${want.length})`)
      }
    }
    const want = expected('trace', (x) => x.text.includes('routine'), ['agent-1'])
    t.same(await walk(search, 'traces', { userId, hidden: ['agent-1'] }, w, filters({ q: 'routine' }), 4), want, `${label}: a hidden agent's events are left out`)
  }
  // What the walks above must have met for the test to mean anything.
  const spans = new Map<string, number[]>()
  for (const x of sent) spans.set(x.trace, [...spans.get(x.trace) ?? [], Number(x.row.ts)])
  t.ok([...spans.values()].filter((ts) => Math.max(...ts) - Math.min(...ts) > 10 * MINUTE).length >= 10, 'traces longer than the first window')
  t.ok(sent.filter((x) => Number(x.row.ts) === asOf - 30 * MINUTE).length >= 5, 'ties in time')
})

t.test('a first look stays within its bounds (groups ranked, ids read, rounds), and events timed ahead do not lead it astray', async (t) => {
  const userId = randomId('groups-many-')
  const asOf = Date.parse('2026-08-04T12:00:00Z')
  const rows: EventRow[] = []
  const add = (group: { trace?: string; session?: string }, ts: number, reasoning: string) => rows.push(buildEventRow(
    { agentId: 'agent-0', type: 'tool', timestamp: ts, reasoning, metadata: { ...(group.trace ? { traceId: group.trace } : {}), ...(group.session ? { sessionId: group.session } : {}) } },
    { eventId: newEventId(asOf - 1000), userId, agentId: 'agent-0', receivedAt: asOf - 1000 }))
  // 2,500 traces in the last hour, one in 500 matching: with the bounds below, more groups than a
  // first look ranks, and more ids than a read by id is given.
  for (let i = 0; i < 2500; i++) add({ trace: `many-${String(i).padStart(4, '0')}` }, asOf - 10 * MINUTE - i * 1000, i % 500 === 7 ? 'rare needle' : 'hay')
  // 120 sessions active together for two hours, each matching: the walk's later pages meet the
  // sessions of earlier pages again in their hour.
  for (let s = 0; s < 120; s++) for (let k = 0; k < 12; k++) add({ session: `long-${String(s).padStart(3, '0')}` }, asOf - 2 * MINUTE - s * 700 - k * 10 * MINUTE, 'steady')
  // A trace timed a day ahead of the clock, matching.
  add({ trace: 'ahead' }, asOf + 24 * HOUR, 'rare needle')
  await events.insert(rows)

  const asked: { query: string; ids: number }[] = []
  const counted = countingClient(ch, (q) => asked.push({ query: q.tag, ids: (q.params.ids as string[] | undefined)?.length ?? 0 }))
  const bounds = { ranked: 2000, ids: 600, rounds: 3 }
  const search = new SearchRepository(counted, undefined, undefined, bounds)
  const w = { sinceMs: asOf - 24 * HOUR, asOf }
  const rare = await walk(search, 'traces', { userId, hidden: [] }, w, filters({ q: 'needle' }), 2)
  t.same(rare.map((x) => x.split(':')[0]), ['ahead', 'many-0007', 'many-0507', 'many-1007', 'many-1507', 'many-2007'], 'the rare traces, the one timed ahead first')
  t.ok(asked.every((x) => x.ids <= bounds.ids), `no read by id of more than ${bounds.ids} groups (most ${Math.max(...asked.map((x) => x.ids))})`)
  t.ok(asked.some((x) => x.query === 'search_groups_by_id'), 'some page was read by id')

  asked.length = 0
  const pages: number[] = []
  let start: PageStart = { asOf, after: null }
  const got: string[] = []
  for (;;) {
    const before = asked.length
    const page = await search.sessions({ userId, hidden: [] }, w, filters({ q: 'steady' }), { limit: 25, start })
    pages.push(asked.slice(before).filter((x) => x.query === 'search_groups_by_id').length)
    got.push(...page.items.map((x) => x.sessionId))
    if (!page.nextCursor) break
    start = pageStart('sessions', page.nextCursor, 0)!
  }
  t.same(got, Array.from({ length: 120 }, (_, s) => `long-${String(s).padStart(3, '0')}`), 'every session once, newest first')
  t.ok(pages.every((n) => n <= bounds.rounds), `at most ${bounds.rounds} reads by id a page (${pages.join(', ')})`)
})
