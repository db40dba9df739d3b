import t from 'tap'
import { migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { DashboardRepository } from '../../src/storage/dashboard-repository.ts'
import { buildEventRow, type EventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'
import { walkPages } from '../helpers/page-walk.ts'
import { countingClient } from '../helpers/counted-client.ts'

// The plain events list (GET /v1/me/events) looks for a page in a widening window below the
// reader's newest event at or below the page's start: a user whose last hours hold no event gets
// the first page from one read, and the walk is the same as before, event by event.
const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
await migrateClickHouse(handle.client)
const events = new EventsRepository(handle.client)
const HOUR = 3_600_000

/** The client, counting the list's reads. */
const reads: string[] = []
const counted = countingClient(handle.client, (q) => reads.push(q.tag))
const dashboard = new DashboardRepository(counted)

function row (userId: string, agentId: string, ts: number, asOf: number): EventRow {
  return buildEventRow({ agentId, type: 'tool', timestamp: ts }, { eventId: newEventId(asOf - 1000), userId, agentId, receivedAt: asOf - 1000 })
}

/** Every event of a walk over pages of `limit`, as the route pages. */
async function walk (r: { userId: string; hidden: string[] }, opts: { sinceMs: number; agentId?: string; asOf: number }, limit: number) {
  const items = await walkPages('events', opts.asOf, (start) => dashboard.events(r, { limit, sinceMs: opts.sinceMs, agentId: opts.agentId, start }))
  return items.map((e) => e.eventId)
}

t.test('a page comes from below the newest event, and the walk is every event once', async (t) => {
  const userId = randomId('list-')
  const asOf = Date.parse('2026-08-05T12:00:00Z')
  // Nothing in the last six hours; 60 events in the hour before; 40 spread over the week before;
  // two timed ahead of the clock; another user's events in the empty hours.
  const stored = [
    ...Array.from({ length: 60 }, (_, i) => row(userId, `agent-${i % 3}`, asOf - 6 * HOUR - i * 50_000, asOf)),
    ...Array.from({ length: 40 }, (_, i) => row(userId, `agent-${i % 3}`, asOf - 8 * HOUR - i * 4 * HOUR, asOf)),
    row(userId, 'agent-0', asOf + 2 * HOUR, asOf), row(userId, 'agent-1', asOf + 3 * HOUR, asOf),
  ]
  await events.insert([...stored, ...Array.from({ length: 10 }, (_, i) => row(randomId('other-'), 'agent-0', asOf - HOUR - i * 1000, asOf))])
  const newestFirst = (list: EventRow[]) => [...list].sort((a, b) => Number(b.ts) - Number(a.ts) || (a.event_id < b.event_id ? 1 : -1)).map((e) => e.event_id)
  const r = { userId, hidden: [] as string[] }

  reads.length = 0
  const first = await dashboard.events(r, { limit: 50, sinceMs: asOf - 30 * 24 * HOUR, start: { asOf, after: null } })
  t.same(first.items.map((e) => e.eventId), newestFirst(stored).slice(0, 50), 'the newest 50, those timed ahead first')
  t.equal(reads.filter((x) => x === 'me_events').length, 1, 'one read: the hour below the newest event holds the page')

  t.same(await walk(r, { sinceMs: asOf - 30 * 24 * HOUR, asOf }, 7), newestFirst(stored), 'pages of 7: every event once')
  t.same(await walk(r, { sinceMs: asOf - 30 * 24 * HOUR, asOf, agentId: 'agent-1' }, 4), newestFirst(stored.filter((e) => e.agent_id === 'agent-1')), 'one agent')
  t.same(await walk({ userId, hidden: ['agent-2'] }, { sinceMs: asOf - 30 * 24 * HOUR, asOf }, 9), newestFirst(stored.filter((e) => e.agent_id !== 'agent-2')), 'a hidden agent left out')
  const since = asOf - 7 * HOUR
  t.same(await walk(r, { sinceMs: since, asOf }, 5), newestFirst(stored.filter((e) => Number(e.ts) >= since)), 'since cuts the window')
  t.same(await walk({ userId: randomId('nobody-'), hidden: [] }, { sinceMs: 0, asOf }, 5), [], 'a user with no event: an empty page')
})
