import t, { type Test } from 'tap'
import { SearchService, type EventSearch } from '../../src/services/search-service.ts'
import { DashboardService, type AgentStore, type ClusterStates, type DashboardReader, type DashboardReads, type RegressionAlerts } from '../../src/services/dashboard-service.ts'
import type { DashboardEvent } from '../../src/domain/dashboard-event.ts'
import type { SessionSummary, TraceSummary } from '../../src/domain/dashboard-figures.ts'
import type { Facets } from '../../src/storage/search-repository.ts'
import { encodeCursor } from '../../src/domain/cursor.ts'
import { HttpError } from '../../src/http-error.ts'

const AGENT = 'c' + 'a'.repeat(24)
const OTHER = 'c' + 'b'.repeat(24)
const STRANGER = 'c' + 'd'.repeat(24)
const SETTLED = Date.parse('2026-05-02T00:00:00.000Z')
const DAY = 86_400_000
const tokens = { inputBase: 0, cacheCreation: 0, cacheRead: 0, output: 0, total: 0 }

const reader: DashboardReader = { userId: 'u1', hidden: [], settledAt: SETTLED, names: new Map([[AGENT, 'alpha'], [OTHER, 'beta']]) }

function event (over: Partial<DashboardEvent> = {}): DashboardEvent {
  return {
    eventId: 'evt_1', agentId: AGENT, timestamp: '2026-05-01T00:00:00.000Z', receivedAt: '2026-05-01T00:00:00.000Z', type: 'tool',
    outcome: null, model: null, toolExecuted: null, toolsConsidered: [], durationMs: null, input: null, reasoning: null, transaction: null,
    amount: null, errorMessage: null, metadata: null, sessionId: null, traceId: null, spanId: null, parentSpanId: null, privacyLevel: null,
    privacyChip: null, tokens, costUsd: 0, costStatus: 'no_model', errorFingerprint: null, contentHash: 'h', ...over,
  }
}

/** The fields of a group summary the service reads (events, agents); the rest passes through as it is. */
const group = <S extends SessionSummary | TraceSummary>(over: { sessionId: string } | { traceId: string }) =>
  ({ ...over, events: 3, agents: [AGENT, STRANGER], costUsd: 0.5 }) as unknown as S

const noFacets = (): Facets['facets'] => ({ type: [], outcome: [], model: [], tool: [], agentId: [], costStatus: [] })

/** Fakes of the search and dashboard repositories, recording each call; the dashboard service over them is the real one. */
function fakes () {
  const calls: { name: string; args: unknown[] }[] = []
  const record = (name: string) => (args: unknown[]) => { calls.push({ name, args }) }
  const search: EventSearch = {
    async events (...args) { record('search.events')(args); return { items: [event(), event({ eventId: 'evt_2', agentId: STRANGER })], nextCursor: null } },
    async sessions (...args) { record('search.sessions')(args); return { items: [group<SessionSummary>({ sessionId: 's1' })], nextCursor: null } },
    async traces (...args) { record('search.traces')(args); return { items: [group<TraceSummary>({ traceId: 't1' })], nextCursor: null } },
    async facets (...args) {
      record('search.facets')(args)
      return {
        total: 4,
        facets: { ...noFacets(), agentId: [{ value: AGENT, count: 2 }, { value: STRANGER, count: 1 }, { value: null, count: 1 }], type: [{ value: 'tool', count: 4 }] },
        metadata: [],
      }
    },
    async histogram (...args) { record('search.histogram')(args); return [{ startMs: 0, events: 2 }, { startMs: 60_000, events: 1 }] },
  }
  const dashboard: DashboardReads = {
    async events (...args) { record('dashboard.events')(args); return { items: [event()], nextCursor: null } },
    async sessions (...args) { record('dashboard.sessions')(args); return { items: [], nextCursor: null } },
    async traces (...args) { record('dashboard.traces')(args); return { items: [], nextCursor: null } },
    async eventsOf () { return [] },
    async clusters () { return [] },
    async reopened () { return new Set<string>() },
    async spendBreakdown () { return { total: [], agent_id: [], model: [], day: [] } },
    async spend () { return [] },
    async agentFigures () { throw new Error('not used') },
    async agentWindow () { return new Map() },
  }
  const agents: AgentStore = {
    async namesOf () { return [] },
    async pageOwned () { return [] },
    async profileOwned () { return null },
    async update () { return null },
  }
  const clusters: ClusterStates = { async resolvedAt () { return new Map() }, async setResolved () { return null } }
  const alerts: RegressionAlerts = { async clearRegression () {} }
  const service = new SearchService(search, new DashboardService(dashboard, agents, clusters, alerts))
  const named = (name: string) => calls.filter((c) => c.name === name).map((c) => c.args)
  return { service, calls, named }
}

async function rejectsWith (t: Test, p: Promise<unknown>, status: number, code: string, extra: Record<string, unknown> = {}) {
  const err = await p.then(() => null, (e: unknown) => e)
  t.ok(err instanceof HttpError, 'an HTTP error')
  t.match(err, { statusCode: status, code, extra })
}

t.test('events without a filter, or with one agentId, are the plain list', async (t) => {
  const { service, calls, named } = fakes()
  await service.events(reader, {})
  await service.events(reader, { agentId: AGENT, limit: '10', since: '7d' })
  await service.events(reader, { agentId: [AGENT] })
  t.equal(calls.filter((c) => c.name.startsWith('search.')).length, 0, 'the search repository is not asked')
  const plain = named('dashboard.events')
  t.equal(plain.length, 3)
  t.match(plain[1]![1], { agentId: AGENT, limit: 10, sinceMs: SETTLED - 7 * DAY })
  t.match(plain[2]![1], { agentId: AGENT }, 'one agentId given as a list')
})

t.test('events with two agentIds or a filter are searched in the request\'s window, names attached', async (t) => {
  const { service, named } = fakes()
  const res = await service.events(reader, { agentId: [AGENT, OTHER], limit: '5000', since: '24h' })
  t.equal(named('dashboard.events').length, 0, 'not the plain list')
  const [r, window, filters, opts] = named('search.events')[0]!
  t.equal(r, reader)
  t.same(window, { sinceMs: SETTLED - DAY, asOf: SETTLED })
  t.match(filters, { agentIds: [AGENT, OTHER] })
  t.same(opts, { limit: 1000, start: { asOf: SETTLED, after: null } }, 'limit clamped to 1000; page one from the snapshot')
  t.same(res.events.map((e) => e.agent), [{ id: AGENT, displayName: 'alpha' }, { id: STRANGER, displayName: null }], 'agents named from the reader')

  await service.events(reader, { type: 'decision' })
  const [, w2, f2, o2] = named('search.events')[1]!
  t.same(w2, { sinceMs: 0, asOf: SETTLED }, 'since defaults to all')
  t.match(f2, { types: ['decision'] })
  t.match(o2, { limit: 50 }, 'limit defaults to 50')
})

t.test('a malformed filter is a 400 naming the parameter; nothing is read', async (t) => {
  const { service, calls } = fakes()
  await rejectsWith(t, service.events(reader, { fingerprint: 'not-hex' }), 400, 'validation_failed', { details: [{ path: ['fingerprint'] }] })
  await rejectsWith(t, service.traces(reader, { minDurationMs: 'soon' }), 400, 'validation_failed', { details: [{ path: ['minDurationMs'] }] })
  await rejectsWith(t, service.facets(reader, { from: 'yesterday' }), 400, 'validation_failed', { details: [{ path: ['from'] }] })
  t.equal(calls.length, 0)
})

t.test('a page after the first walks from its cursor\'s snapshot; another list\'s cursor is a 400', async (t) => {
  const { service, named } = fakes()
  const cursor = encodeCursor('sessions', SETTLED - 5_000, { ms: SETTLED - 60_000, id: 's9' })
  await service.sessions(reader, { model: 'gpt-4o', cursor })
  const [, window, , opts] = named('search.sessions')[0]!
  t.same(window, { sinceMs: 0, asOf: SETTLED - 5_000 })
  t.same(opts, { limit: 20, start: { asOf: SETTLED - 5_000, after: { ms: SETTLED - 60_000, id: 's9' } } })
  await rejectsWith(t, service.events(reader, { model: 'gpt-4o', cursor }), 400, 'invalid_cursor')
})

t.test('sessions: a since alone is searched (the plain list has none); summaries count events and name agents', async (t) => {
  const { service, named } = fakes()
  await service.sessions(reader, {})
  t.equal(named('dashboard.sessions').length, 1, 'no filter, no since: the plain list')
  const res = await service.sessions(reader, { since: '30d', limit: '500' })
  const [, window, , opts] = named('search.sessions')[0]!
  t.same(window, { sinceMs: SETTLED - 30 * DAY, asOf: SETTLED })
  t.match(opts, { limit: 100 }, 'limit clamped to 100')
  t.same(res.sessions, [{ sessionId: 's1', costUsd: 0.5, eventCount: 3, agents: [{ id: AGENT, displayName: 'alpha' }, { id: STRANGER, displayName: null }] }])
})

t.test('traces: searched within 7 days unless `from` bounds them; since wins when given', async (t) => {
  const { service, named } = fakes()
  await service.traces(reader, { since: '24h' })
  t.equal(named('dashboard.traces').length, 1, 'since alone: the plain list (which reads it)')
  await service.traces(reader, { outcome: 'failed' })
  await service.traces(reader, { outcome: 'failed', from: String(SETTLED - 90 * DAY) })
  await service.traces(reader, { outcome: 'failed', from: String(SETTLED - 90 * DAY), since: '24h', limit: '0' })
  const windows = named('search.traces').map((a) => a[1])
  t.same(windows, [
    { sinceMs: SETTLED - 7 * DAY, asOf: SETTLED },
    { sinceMs: 0, asOf: SETTLED },
    { sinceMs: SETTLED - DAY, asOf: SETTLED },
  ])
  t.match(named('search.traces')[2]![3], { limit: 1 }, 'limit clamped to at least 1')
})

t.test('facets: in the request\'s window; the agentId values carry their names', async (t) => {
  const { service, named } = fakes()
  const res = await service.facets(reader, { since: '7d', type: ['tool', 'decision'] })
  const [, window, filters] = named('search.facets')[0]!
  t.same(window, { sinceMs: SETTLED - 7 * DAY, asOf: SETTLED })
  t.match(filters, { types: ['tool', 'decision'] })
  t.equal(res.total, 4)
  t.same(res.facets.type, [{ value: 'tool', count: 4 }], 'other facets unchanged')
  t.same(res.facets.agentId, [
    { value: AGENT, count: 2, displayName: 'alpha' },
    { value: STRANGER, count: 1, displayName: null },
    { value: null, count: 1, displayName: null },
  ])
})
