import t, { type Test } from 'tap'
import { DashboardService, type AgentStore, type ClusterStates, type DashboardReads, type RegressionAlerts } from '../../src/services/dashboard-service.ts'
import type { DashboardEvent } from '../../src/domain/dashboard-event.ts'
import type { SpendRow } from '../../src/domain/dashboard-figures.ts'
import type { ClusterAggregate, WindowFigures } from '../../src/storage/dashboard-repository.ts'
import type { OwnedAgentProfile } from '../../src/storage/agents-repository.ts'
import { encodeCursor } from '../../src/domain/cursor.ts'
import { HttpError } from '../../src/http-error.ts'
import { TRACE_SPANS_MAX } from '../../schemas/dashboard.ts'

const AGENT = 'c' + 'a'.repeat(24)
const GONE = 'c' + 'b'.repeat(24)
const tokens = { inputBase: 0, cacheCreation: 0, cacheRead: 0, output: 0, total: 0 }

function event (over: Partial<DashboardEvent> = {}): DashboardEvent {
  return {
    eventId: 'evt_1', agentId: AGENT, timestamp: '2026-05-01T00:00:00.000Z', receivedAt: '2026-05-01T00:00:00.000Z', type: 'tool',
    outcome: null, model: null, toolExecuted: null, toolsConsidered: [], durationMs: null, input: null, reasoning: null, transaction: null,
    amount: null, errorMessage: null, metadata: null, sessionId: null, traceId: null, spanId: null, parentSpanId: null, privacyLevel: null,
    privacyChip: null, tokens, costUsd: 0, costStatus: 'no_model', errorFingerprint: null, contentHash: 'h', ...over,
  }
}

const spend = (key: string, over: Partial<SpendRow> = {}): SpendRow => ({ key, costUsd: 0, events: 0, errors: 0, tokens, unpricedEvents: 0, ...over })

const cluster = (over: Partial<ClusterAggregate> = {}): ClusterAggregate => ({
  fingerprint: '0123456789abcdef', count: 1, firstSeen: '2026-05-01T00:00:00.000Z', lastSeen: '2026-05-01T00:00:00.000Z',
  lastSeenMs: Date.parse('2026-05-01T00:00:00.000Z'), sampleMessage: 'boom', agents: [AGENT], tools: [], ...over,
})

/** Fakes of the service's store interfaces that record each call and answer what a test sets. */
function fakes () {
  const calls: { name: string; args: unknown[] }[] = []
  const record = (name: string, args: unknown[]) => { calls.push({ name, args }) }
  const answers = {
    events: [] as DashboardEvent[],
    eventsOf: [] as DashboardEvent[],
    clusters: [] as ClusterAggregate[],
    resolvedAt: new Map<string, number>(),
    reopened: new Set<string>(),
    breakdown: { total: [] as SpendRow[], agent_id: [] as SpendRow[], model: [] as SpendRow[], day: [] as SpendRow[] },
    update: null as Awaited<ReturnType<AgentStore['update']>>,
    setResolved: null as number | null,
    owned: [] as OwnedAgentProfile[],
    spend: [] as SpendRow[],
    window: new Map<string, WindowFigures>(),
  }
  const dashboard: DashboardReads = {
    async events (...args) { record('events', args); return { items: answers.events, nextCursor: null } },
    async sessions (...args) { record('sessions', args); return { items: [], nextCursor: null } },
    async traces (...args) { record('traces', args); return { items: [], nextCursor: null } },
    async eventsOf (...args) { record('eventsOf', args); return answers.eventsOf },
    async clusters (...args) { record('clusters', args); return answers.clusters },
    async reopened (...args) { record('reopened', args); return answers.reopened },
    async spendBreakdown (...args) { record('spendBreakdown', args); return answers.breakdown },
    async spend (...args) { record('spend', args); return answers.spend },
    async agentFigures (...args) { record('agentFigures', args); return { window: { events: 0, costUsd: 0, errors: 0 }, days: [], total: spend('') } },
    async agentWindow (...args) { record('agentWindow', args); return answers.window },
  }
  const agents: AgentStore = {
    async namesOf (...args) {
      record('namesOf', args)
      return [{ id: AGENT, displayName: 'alpha', deleted: false }, { id: GONE, displayName: 'gone', deleted: true }]
    },
    async pageOwned (...args) {
      record('pageOwned', args)
      // As the repository: newest first, after the cursor's row, at most `limit`.
      const [, limit, after] = args
      return answers.owned.filter((a) => !after || Date.parse(a.createdAt) < after.ms).slice(0, limit)
    },
    async profileOwned (...args) { record('profileOwned', args); return null },
    async update (...args) { record('update', args); return answers.update },
  }
  const clusters: ClusterStates = {
    async resolvedAt (...args) { record('resolvedAt', args); return answers.resolvedAt },
    async setResolved (...args) { record('setResolved', args); return answers.setResolved },
  }
  const alerts: RegressionAlerts = { async clearRegression (...args) { record('clearRegression', args) } }
  return { service: new DashboardService(dashboard, agents, clusters, alerts), calls, answers }
}

const argsOf = (calls: { name: string; args: unknown[] }[], name: string) => calls.filter((c) => c.name === name).map((c) => c.args)

async function rejectsWith (t: Test, promise: Promise<unknown>, status: number, error: string) {
  const err = await promise.then(() => null, (e: unknown) => e)
  t.ok(err instanceof HttpError, 'an HTTP error')
  t.match(err, { statusCode: status, code: error })
}

t.test('a reader hides the user\'s deleted agents and names every agent', async (t) => {
  const { service } = fakes()
  const r = await service.readerOf('u1', 123)
  t.same(r.hidden, [GONE])
  t.equal(r.names.get(AGENT), 'alpha')
  t.equal(r.settledAt, 123)
})

t.test('events: the limit clamped, a bad agent id dropped, each event named', async (t) => {
  const { service, calls, answers } = fakes()
  const r = await service.readerOf('u1', 1_000)
  answers.events = [event()]
  const out = await service.events(r, { limit: '5000', agentId: 'not-a-cuid' })
  const [[, opts]] = argsOf(calls, 'events') as [[unknown, { limit: number; agentId: unknown; start: unknown; sinceMs: number }]]
  t.equal(opts.limit, 1000)
  t.equal(opts.agentId, undefined)
  t.same(opts.start, { asOf: 1_000, after: null })
  t.equal(opts.sinceMs, 0, 'no since: all time')
  t.same(out.events[0]!.agent, { id: AGENT, displayName: 'alpha' })
  await service.events(r, { agentId: AGENT })
  t.equal((argsOf(calls, 'events')[1]![1] as { limit: number; agentId: string }).limit, 50, 'the default')
  t.equal((argsOf(calls, 'events')[1]![1] as { agentId: string }).agentId, AGENT)
})

t.test('a cursor of another list is a 400, and one of this list resumes it', async (t) => {
  const { service, calls } = fakes()
  const r = await service.readerOf('u1', 1_000)
  await rejectsWith(t, service.events(r, { cursor: encodeCursor('traces', 500, { ms: 1, id: 'x' }) }), 400, 'invalid_cursor')
  await rejectsWith(t, service.sessions(r, { cursor: '%%%' }), 400, 'invalid_cursor')
  await service.events(r, { cursor: encodeCursor('events', 500, { ms: 1, id: 'x' }) })
  t.same((argsOf(calls, 'events')[0]![1] as { start: unknown }).start, { asOf: 500, after: { ms: 1, id: 'x' } })
})

t.test('a session the user does not have is a 404; one they have is totalled', async (t) => {
  const { service, answers } = fakes()
  const r = await service.readerOf('u1', 1_000)
  await rejectsWith(t, service.session(r, 's'), 404, 'not_found')
  answers.eventsOf = [event({ costUsd: 0.1, durationMs: 100 }), event({ eventId: 'evt_2', timestamp: '2026-05-01T00:00:01.000Z', costUsd: 0.2 })]
  const s = await service.session(r, 's')
  t.match(s, { sessionId: 's', eventCount: 2, durationMs: 1000, costUsd: 0.3, agents: [{ id: AGENT, displayName: 'alpha' }] })
  t.equal(s.events.length, 2)
})

t.test('a trace longer than TRACE_SPANS_MAX is cut there and says so', async (t) => {
  const { service, calls, answers } = fakes()
  const r = await service.readerOf('u1', 1_000)
  answers.eventsOf = Array.from({ length: TRACE_SPANS_MAX + 1 }, (_, i) => event({ eventId: `evt_${i}`, traceId: 'tr' }))
  const trace = await service.trace(r, 'tr')
  t.equal(argsOf(calls, 'eventsOf')[0]![3], TRACE_SPANS_MAX + 1, 'one more than shown is read, to know')
  t.equal(trace.truncated, true)
  t.equal(trace.spans.length, TRACE_SPANS_MAX)
  t.equal(trace.eventCount, TRACE_SPANS_MAX)
  answers.eventsOf = [event({ metadata: { cwd: '/repo', git: { branch: 'main' } } })]
  t.match(await service.trace(r, 'tr'), { truncated: false, cwd: '/repo', git: { branch: 'main' } })
})

t.test('clusters show as resolved only while no event is later; resolving clears the regression alert', async (t) => {
  const { service, calls, answers } = fakes()
  const r = await service.readerOf('u1', 1_000)
  const c = cluster()
  answers.clusters = [c]
  answers.resolvedAt = new Map([[c.fingerprint, c.lastSeenMs]])
  t.match((await service.errorClusters(r, {})).clusters, [{ status: 'resolved', agents: [{ displayName: 'alpha' }], resolvedAt: c.lastSeen }])
  answers.resolvedAt = new Map([[c.fingerprint, c.lastSeenMs - 1]])
  t.match((await service.errorClusters(r, {})).clusters, [{ status: 'resolved' }], 'a later event received before the resolution')
  answers.reopened = new Set([c.fingerprint])
  t.match((await service.errorClusters(r, {})).clusters, [{ status: 'open' }], 'and one received after it')
  t.same(argsOf(calls, 'reopened').at(-1)!.slice(1), [[c], answers.resolvedAt], 'asked of the listed clusters and their resolutions')
  answers.reopened = new Set()

  answers.setResolved = c.lastSeenMs
  t.match(await service.setResolved(r, c.fingerprint, true), { status: 'resolved' })
  t.same(argsOf(calls, 'setResolved'), [['u1', c.fingerprint, true]])
  t.same(argsOf(calls, 'clearRegression'), [['u1', c.fingerprint]])
  answers.clusters = []
  await rejectsWith(t, service.setResolved(r, 'ffffffffffffffff', true), 404, 'not_found')
  t.equal(argsOf(calls, 'setResolved').length, 1, 'an unknown cluster is not written')
})

t.test('the spend summary: zeros without a total, agents named, unpriced models listed', async (t) => {
  const { service, answers } = fakes()
  const r = await service.readerOf('u1', 1_000)
  answers.breakdown = {
    total: [],
    agent_id: [spend(AGENT, { costUsd: 1, events: 2 }), spend('c' + 'z'.repeat(24), { events: 1 })],
    model: [spend('', { events: 1, unpricedEvents: 0 }), spend('mystery', { events: 3, unpricedEvents: 3 })],
    day: [spend('2026-05-01', { events: 2 })],
  }
  const out = await service.spendSummary(r, 7)
  t.same(out.total, { costUsd: 0, eventCount: 0, errors: 0, tokens, unpricedEvents: 0 })
  t.match(out.by_agent, [{ agentId: AGENT, displayName: 'alpha', agent: { id: AGENT, displayName: 'alpha' }, costUsd: 1, eventCount: 2 }, { displayName: null }])
  t.match(out.by_model, [{ model: null }, { model: 'mystery', unpricedEvents: 3 }])
  t.same(out.unpriced_models, [{ model: 'mystery', eventCount: 3 }])
  t.match(out.by_day, [{ day: '2026-05-01', eventCount: 2 }])
})

t.test('an agent update answers 409 for a taken name and 404 for no such agent, with the name trimmed', async (t) => {
  const { service, calls, answers } = fakes()
  answers.update = 'taken'
  await rejectsWith(t, service.updateAgent('u1', AGENT, { displayName: '  alpha  ' }), 409, 'conflict')
  t.same(argsOf(calls, 'update')[0], ['u1', AGENT, { displayName: 'alpha', isPublic: undefined }])
  answers.update = null
  await rejectsWith(t, service.updateAgent('u1', AGENT, { isPublic: true }), 404, 'not_found')
})

t.test('an agent profile of no agent of the user is a 404', async (t) => {
  const { service } = fakes()
  await rejectsWith(t, service.agentProfile(await service.readerOf('u1', 1_000), AGENT), 404, 'not_found')
})

t.test('the agent list pages newest first from the request\'s snapshot, each agent with its KPIs', async (t) => {
  const { service, calls, answers } = fakes()
  const r = await service.readerOf('u1', 1_000)
  const owned = (n: number): OwnedAgentProfile => ({
    id: `c${String(n).repeat(24)}`, displayName: `agent ${n}`, snsName: null, registryId: null, framework: null, isPublic: false,
    source: 'sdk', lastSeenAt: null, createdAt: new Date(Date.parse('2026-05-01T00:00:00.000Z') - n * 60_000).toISOString(),
  })
  answers.owned = [owned(1), owned(2), owned(3)]
  answers.window = new Map([[owned(1).id, { events: 4, costUsd: 0.5, errors: 1 }]])
  answers.spend = [spend(owned(1).id, { events: 10, errors: 5, costUsd: 2 })]

  const first = await service.agentList(r, { limit: '2' })
  t.same(first.agents.map((a) => a.id), [owned(1).id, owned(2).id])
  t.same(argsOf(calls, 'pageOwned')[0], ['u1', 3, null], 'one more row than the page, from the start')
  t.same(first.agents[0]!.kpis, { events24h: 4, cost24h: 0.5, events30d: 10, cost30d: 2, errors30d: 5, errorRate30d: 0.5 })
  t.same(first.agents[1]!.kpis, { events24h: 0, cost24h: 0, events30d: 0, cost30d: 0, errors30d: 0, errorRate30d: 0 }, 'an agent without events')
  t.equal(first.nextCursor, encodeCursor('agents', 1_000, { ms: Date.parse(owned(2).createdAt), id: owned(2).id }))

  const later = await service.readerOf('u1', 9_000)
  const second = await service.agentList(later, { limit: '2', cursor: first.nextCursor! })
  t.same(second.agents.map((a) => a.id), [owned(3).id])
  t.same(argsOf(calls, 'pageOwned')[1]![2], { ms: Date.parse(owned(2).createdAt), id: owned(2).id })
  t.equal(second.nextCursor, null, 'the last page')

  await service.agentList(r, { limit: 'lots' })
  t.equal(argsOf(calls, 'pageOwned')[2]![1], 101, 'the default limit is 100')
  await service.agentList(r, { limit: '5000' })
  t.equal(argsOf(calls, 'pageOwned')[3]![1], 1001, 'clamped to 1000')
  await rejectsWith(t, service.agentList(r, { cursor: encodeCursor('events', 1_000, { ms: 1, id: 'x' }) }), 400, 'invalid_cursor')
})
