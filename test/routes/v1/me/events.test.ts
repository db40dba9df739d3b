import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent, type TestUser } from '../../../helpers/app.ts'
import { costOf } from '../../../../src/domain/pricing.ts'

const app = await buildTestApp(t)
const get = (user: TestUser, url: string) => app.inject({ method: 'GET', url, headers: user.auth })

async function fixture () {
  const user = await newUser(app, { tier: 'enterprise' })
  const key = await user.createKey()
  const send = async (payload: Record<string, unknown>) => {
    const res = await sendEvent(app, key.secret, payload)
    if (res.statusCode !== 202) throw new Error(`${res.statusCode} ${res.body}`)
    return res.json() as { eventId: string; agentId: string }
  }
  return { user, key, send }
}

t.test('GET /v1/me/events: newest first, every field, limit clamps, since and agentId dropped when they do not fit', async (t) => {
  const { user, send } = await fixture()
  const old = await send({ agentId: 'ev-a', timestamp: new Date(Date.now() - 3 * 86_400_000).toISOString() })
  const a = await send({ agentId: 'ev-a', type: 'tool', model: 'gpt-4o', toolExecuted: 'search', durationMs: 5, input: { prompt: 'p' }, reasoning: 'r',
    amount: { token: 'USDC', value: 3 }, metadata: { privacyLevel: 'minimal', sessionId: 's1', traceId: 't1', tokensBreakdown: { inputBase: 1000, output: 100 } } })
  const b = await send({ agentId: 'ev-b' })
  const all = (await get(user, '/v1/me/events')).json().events
  t.same(all.map((e: { eventId: string }) => e.eventId), [b.eventId, a.eventId, old.eventId])
  const e = all[1]
  t.match(e, {
    eventId: a.eventId, agentId: a.agentId, type: 'tool', model: 'gpt-4o', toolExecuted: 'search', durationMs: 5, input: { prompt: 'p' },
    reasoning: 'r', amount: { token: 'USDC', value: 3 }, sessionId: 's1', traceId: 't1', privacyLevel: 'minimal', privacyChip: 'MIN',
    tokens: { inputBase: 1000, output: 100, total: 1100 }, costUsd: Number(costOf('gpt-4o', { inputBase: 1000, cacheCreation: 0, cacheRead: 0, output: 100 }).usd),
    costStatus: 'priced', contentHash: /^[0-9a-f]{64}$/,
  })
  t.equal(all[0].privacyChip, null, 'no level, no chip')
  t.equal((await get(user, '/v1/me/events?limit=0')).json().events.length, 1, 'limit 0 clamps to 1')
  t.equal((await get(user, '/v1/me/events?limit=2')).json().events.length, 2)
  t.equal((await get(user, '/v1/me/events?limit=abc')).json().events.length, 3, 'a non-number limit is the default')
  t.equal((await get(user, '/v1/me/events?limit=5000')).statusCode, 200, 'a large limit clamps, no error')
  t.equal((await get(user, '/v1/me/events?since=24h')).json().events.length, 2)
  t.equal((await get(user, '/v1/me/events?since=7d')).json().events.length, 3)
  t.equal((await get(user, '/v1/me/events?since=yesterday')).json().events.length, 3, 'an invalid since is dropped')
  t.same((await get(user, `/v1/me/events?agentId=${b.agentId}`)).json().events.map((x: { eventId: string }) => x.eventId), [b.eventId])
  t.equal((await get(user, '/v1/me/events?agentId=ev-b')).json().events.length, 3, 'a non-cuid agentId is dropped')
  t.equal((await get(user, '/v1/me/events?whatever=1')).statusCode, 200, 'unknown parameters are ignored')
  const other = await newUser(app)
  t.same((await get(other, '/v1/me/events')).json().events, [], 'another user sees none of them')
  t.same((await get(other, `/v1/me/events?agentId=${a.agentId}`)).json().events, [])
})

t.test('sessions and traces: grouped, detailed with spans, git, cwd and chips; another user gets 404', async (t) => {
  const { user, send } = await fixture()
  const session = randomId('sess-')
  const trace = randomId('trace-')
  const t0 = Date.parse('2026-05-01T10:00:00.000Z')
  const e1 = await send({ agentId: 'tr-a', timestamp: t0, type: 'reasoning', metadata: { sessionId: session, traceId: trace, privacyLevel: 'full', git: { branch: 'main', sha: 'abc' }, cwd: '/repo' } })
  const e2 = await send({ agentId: 'tr-b', timestamp: t0 + 1500, type: 'tool', toolExecuted: 'grep', durationMs: 300, model: 'gpt-4o-mini',
    metadata: { sessionId: session, traceId: trace, privacyLevel: 'standard', tokensBreakdown: { inputBase: 10, output: 5 } } })
  const e3 = await send({ agentId: 'tr-b', timestamp: t0 + 4000, type: 'error', errorMessage: 'boom', metadata: { sessionId: session, traceId: trace } })

  const list = (await get(user, '/v1/me/sessions')).json().sessions
  const s = list.find((x: { sessionId: string }) => x.sessionId === session)
  t.match(s, { start: '2026-05-01T10:00:00.000Z', end: '2026-05-01T10:00:04.000Z', durationMs: 4000, eventCount: 3, errors: 1 })
  t.same(s.agents.map((a: { id: string }) => a.id), [e1.agentId, e2.agentId].sort())
  t.same(s.agents.map((a: { displayName: string }) => a.displayName).sort(), ['tr-a', 'tr-b'], 'agents are named')
  const detail = (await get(user, `/v1/me/sessions/${session}`)).json()
  t.same(detail.events.map((e: { eventId: string }) => e.eventId), [e1.eventId, e2.eventId, e3.eventId], 'time order')
  t.equal(detail.eventCount, 3)
  t.equal((await get(user, '/v1/me/sessions?limit=1')).json().sessions.length, 1)

  const traces = (await get(user, '/v1/me/traces?since=all')).json().traces
  t.ok(traces.some((x: { traceId: string }) => x.traceId === trace))
  t.notOk((await get(user, '/v1/me/traces')).json().traces.some((x: { traceId: string }) => x.traceId === trace), 'default window is 7 days')
  const tr = (await get(user, `/v1/me/traces/${trace}`)).json()
  t.same(tr.spans.map((x: { eventId: string }) => x.eventId), [e1.eventId, e2.eventId, e3.eventId], 'each event once, in time order')
  t.same(tr.spans.map((x: { offsetMs: number }) => x.offsetMs), [0, 1500, 4000])
  t.same(tr.spans.map((x: { durationMs?: number }) => x.durationMs), [undefined, 300, undefined], 'a duration not sent is left out')
  t.same(tr.spans.map((x: { privacyChip?: string }) => x.privacyChip), ['FULL', 'STD', undefined])
  t.same(tr.roots, [0, 1, 2], 'no span links: every event is a root')
  t.match(tr.spans[1], { agentId: e2.agentId, type: 'tool', toolExecuted: 'grep', model: 'gpt-4o-mini', sessionId: session, tokens: { inputBase: 10, output: 5, total: 15 }, costStatus: 'priced' })
  t.same(tr.spans[1].metadata, undefined, 'every metadata key it sent has a field of its own')
  t.same(tr.spans[0].metadata, { git: { branch: 'main', sha: 'abc' }, cwd: '/repo' })
  t.equal(tr.truncated, false)
  t.same(tr.git, { branch: 'main', sha: 'abc' })
  t.equal(tr.cwd, '/repo')
  t.equal(tr.durationMs, 4000)

  const other = await newUser(app)
  t.equal((await get(other, `/v1/me/sessions/${session}`)).statusCode, 404)
  t.equal((await get(other, `/v1/me/traces/${trace}`)).statusCode, 404)
  t.notOk((await get(other, '/v1/me/sessions')).json().sessions.some((x: { sessionId: string }) => x.sessionId === session))
  t.equal((await get(user, '/v1/me/sessions/nope')).statusCode, 404)
})

t.test('sessions and traces end when their last span finishes, not when their last event starts', async (t) => {
  const { user, send } = await fixture()
  const iso = (ms: number) => new Date(ms).toISOString()
  // A root span that ran 437 ms; its children started at 10 ms (ran 100 ms) and 408 ms (no duration).
  const rootRun = { session: randomId('s-root-'), trace: randomId('t-root-'), t0: Date.parse('2026-05-02T10:59:59.900Z') }
  const ids = { sessionId: rootRun.session, traceId: rootRun.trace }
  await send({ agentId: 'end-a', timestamp: rootRun.t0, durationMs: 437, metadata: { ...ids, spanId: 'root' } })
  await send({ agentId: 'end-a', timestamp: rootRun.t0 + 10, durationMs: 100, metadata: { ...ids, spanId: 'c1', parentSpanId: 'root' } })
  await send({ agentId: 'end-a', timestamp: rootRun.t0 + 408, metadata: { ...ids, spanId: 'c2', parentSpanId: 'root' } })
  // A child that ran 2.6 s, started before quick ones that are done by 95 ms.
  const longChild = { session: randomId('s-child-'), trace: randomId('t-child-'), t0: Date.parse('2026-05-02T12:00:00.000Z') }
  const ids2 = { sessionId: longChild.session, traceId: longChild.trace }
  await send({ agentId: 'end-b', timestamp: longChild.t0, durationMs: 20, metadata: { ...ids2, spanId: 'r' } })
  await send({ agentId: 'end-b', timestamp: longChild.t0 + 5, durationMs: 2600, metadata: { ...ids2, spanId: 'slow', parentSpanId: 'r' } })
  await send({ agentId: 'end-b', timestamp: longChild.t0 + 60, durationMs: 35, metadata: { ...ids2, spanId: 'quick', parentSpanId: 'r' } })

  const expected = [
    { run: rootRun, end: iso(rootRun.t0 + 437), durationMs: 437 },
    { run: longChild, end: iso(longChild.t0 + 2605), durationMs: 2605 },
  ]
  const sessions = (await get(user, '/v1/me/sessions')).json().sessions
  const traces = (await get(user, '/v1/me/traces?since=all')).json().traces
  for (const { run, end, durationMs } of expected) {
    const want = { start: iso(run.t0), end, durationMs }
    t.match(sessions.find((s: { sessionId: string }) => s.sessionId === run.session), want, `session list: ${run.session}`)
    t.match(traces.find((x: { traceId: string }) => x.traceId === run.trace), want, `trace list: ${run.trace}`)
    t.match((await get(user, `/v1/me/sessions/${run.session}`)).json(), want, `session detail: ${run.session}`)
    t.match((await get(user, `/v1/me/traces/${run.trace}`)).json(), want, `trace detail: ${run.trace}`)
  }
  // The lists stay ordered, and paged, by the last event to start: the root run (last start 408 ms
  // in, ending in the next hour) lists after the long-child run, which started later.
  t.same(sessions.map((s: { sessionId: string }) => s.sessionId), [longChild.session, rootRun.session])
  const first = (await get(user, '/v1/me/sessions?limit=1')).json()
  t.same(first.sessions.map((s: { sessionId: string }) => s.sessionId), [longChild.session])
  const second = (await get(user, `/v1/me/sessions?limit=1&cursor=${first.nextCursor}`)).json()
  t.same(second.sessions.map((s: { sessionId: string }) => s.sessionId), [rootRun.session], 'the next page holds the other session, once')
})

t.test('error clusters: resolve, re-open by a later event at once, re-open by DELETE; scoped to the caller', async (t) => {
  const { user, send } = await fixture()
  await send({ agentId: 'err-a', type: 'error', toolExecuted: 'http', errorMessage: 'timeout after 100ms' })
  await send({ agentId: 'err-a', outcome: 'failed', toolExecuted: 'http', errorMessage: 'timeout after 250ms' })
  const clusters = (await get(user, '/v1/me/errors')).json().clusters
  t.equal(clusters.length, 1)
  const c = clusters[0]
  t.match(c, { fingerprint: /^[0-9a-f]{16}$/, count: 2, status: 'open', resolvedAt: null, tools: ['http'], sampleMessage: 'timeout after 250ms' })
  const resolved = await app.inject({ method: 'POST', url: `/v1/me/errors/${c.fingerprint}/resolve`, headers: user.auth })
  t.equal(resolved.statusCode, 200)
  t.match(resolved.json(), { status: 'resolved', resolvedAt: String })
  t.equal((await get(user, '/v1/me/errors')).json().clusters[0].status, 'resolved')

  await send({ agentId: 'err-a', outcome: 'failed', toolExecuted: 'http', errorMessage: 'timeout after 9ms', timestamp: '2020-01-01T00:00:00Z' })
  t.equal((await get(user, '/v1/me/errors?since=all')).json().clusters[0].status, 'resolved', 'an event older than resolvedAt does not re-open')
  await new Promise((resolve) => setTimeout(resolve, 5))
  await send({ agentId: 'err-a', outcome: 'failed', toolExecuted: 'http', errorMessage: 'timeout after 7ms' })
  const reopened = (await get(user, '/v1/me/errors')).json().clusters[0]
  t.equal(reopened.status, 'open', 'a later event re-opens it on the next read')
  t.equal(reopened.count, 3)

  await app.inject({ method: 'POST', url: `/v1/me/errors/${c.fingerprint}/resolve`, headers: user.auth })
  const reopen = await app.inject({ method: 'DELETE', url: `/v1/me/errors/${c.fingerprint}/resolve`, headers: user.auth })
  t.equal(reopen.statusCode, 200)
  t.match(reopen.json(), { status: 'open', resolvedAt: null })

  const other = await newUser(app)
  t.equal((await app.inject({ method: 'POST', url: `/v1/me/errors/${c.fingerprint}/resolve`, headers: other.auth })).statusCode, 404)
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/me/errors/${c.fingerprint}/resolve`, headers: other.auth })).statusCode, 404)
  t.same((await get(other, '/v1/me/errors')).json().clusters, [])
  t.equal((await app.inject({ method: 'POST', url: '/v1/me/errors/not-hex/resolve', headers: user.auth })).statusCode, 400)
})

t.test('an error dated ahead of the clock, stored before the resolution, neither keeps its cluster open nor reopens it', async (t) => {
  const { user, send } = await fixture()
  const ahead = new Date(Date.now() + 10 * 60_000).toISOString()
  await send({ agentId: 'skew-a', type: 'error', toolExecuted: 'db', errorMessage: 'clock skew error', timestamp: ahead })
  const [c] = (await get(user, '/v1/me/errors')).json().clusters
  t.equal(c.lastSeen, ahead)
  const resolved = await app.inject({ method: 'POST', url: `/v1/me/errors/${c.fingerprint}/resolve`, headers: user.auth })
  t.match(resolved.json(), { status: 'resolved', resolvedAt: String }, 'the answer of the resolve says resolved')
  t.equal((await get(user, '/v1/me/errors')).json().clusters[0].status, 'resolved')
  const profile = (await get(user, `/v1/me/agents/${resolved.json().agents[0].id}`)).json()
  t.equal(profile.recentErrors[0].status, 'resolved', 'and so does the agent\'s page')
  await app.activity.flush()
  await app.anomaly.evaluateUser(user.id, Date.now())
  const alerts = (await get(user, '/v1/me/alerts')).json().alerts
  t.same(alerts.filter((a: { rule: string }) => a.rule.startsWith('regression:')), [], 'no regression raised')
  await new Promise((resolve) => setTimeout(resolve, 5))
  await send({ agentId: 'skew-a', type: 'error', toolExecuted: 'db', errorMessage: 'clock skew error' })
  t.equal((await get(user, '/v1/me/errors')).json().clusters[0].status, 'open', 'an event received after the resolution reopens it')
})

t.test('spend summary agrees with the per-event costs; windows; by agent, model and day', async (t) => {
  const { user, send } = await fixture()
  const events = [
    { agentId: 'sp-a', model: 'claude-sonnet-4-5', metadata: { tokensBreakdown: { inputBase: 12345, cacheCreation: 77, cacheRead: 999, output: 321 } } },
    { agentId: 'sp-a', model: 'gpt-4o-mini', metadata: { tokensBreakdown: { inputBase: 7, output: 3 } } },
    { agentId: 'sp-b', model: 'gemini-2.5-flash', metadata: { tokensBreakdown: { inputBase: 1000000, output: 3333 } } },
    { agentId: 'sp-b', model: 'unknown-model', metadata: { tokensBreakdown: { output: 50 } } },
    { agentId: 'sp-b', model: 'gpt-4o', timestamp: new Date(Date.now() - 40 * 86_400_000).toISOString(), metadata: { tokensBreakdown: { output: 1000 } } },
  ]
  for (const e of events) await send(e)
  const perEvent = (await get(user, '/v1/me/events?since=30d')).json().events
  const expected = perEvent.reduce((n: number, e: { costUsd: number }) => n + Math.round(e.costUsd * 1e9), 0) / 1e9
  const res = await get(user, '/v1/me/spend-summary')
  t.equal(res.statusCode, 200)
  const s = res.json()
  t.equal(s.days, 30)
  t.equal(Math.round(s.total.costUsd * 100), Math.round(expected * 100), 'total agrees to the cent')
  t.ok(Math.abs(s.total.costUsd - expected) < 1e-9, 'and exactly')
  t.equal(s.total.eventCount, 4, 'the 40-day-old event is outside the default window')
  t.equal(s.by_agent.length, 2)
  t.equal(s.by_agent.reduce((n: number, a: { eventCount: number }) => n + a.eventCount, 0), 4)
  t.ok(s.by_agent.every((a: { displayName: string }) => a.displayName.startsWith('sp-')))
  t.same(s.by_model.map((m: { model: string }) => m.model).sort(), ['claude-sonnet-4-5', 'gemini-2.5-flash', 'gpt-4o-mini', 'unknown-model'])
  t.equal(s.by_day.length, 1)
  t.same(s.unpriced_models, [{ model: 'unknown-model', eventCount: 1 }], 'the model the catalogue does not know is named')
  t.equal(s.by_model.find((m: { model: string }) => m.model === 'unknown-model').unpricedEvents, 1)
  t.equal(s.by_model.find((m: { model: string }) => m.model === 'gpt-4o-mini').unpricedEvents, 0)
  t.equal(s.total.tokens.inputBase, 12345 + 7 + 1000000)
  const longer = (await get(user, '/v1/me/spend-summary?days=60')).json()
  t.equal(longer.total.eventCount, 5)
  for (const bad of ['0', '366', 'abc']) t.equal((await get(user, `/v1/me/spend-summary?days=${bad}`)).statusCode, 400, `days=${bad}`)
  const other = await newUser(app)
  t.equal((await get(other, '/v1/me/spend-summary')).json().total.eventCount, 0)
})

t.test('agents: list with KPIs, profile with a 30-day calendar, rename with 409, delete hides everything', async (t) => {
  const { user, key, send } = await fixture()
  const a = await send({ agentId: 'ag-a', model: 'gpt-4o', metadata: { tool: 'langchain', sessionId: 'ag-s', tokensBreakdown: { output: 1000 } } })
  await send({ agentId: 'ag-a', type: 'error', errorMessage: 'x' })
  const b = await send({ agentId: 'ag-b' })
  await app.activity.flush()
  const list = (await get(user, '/v1/me/agents')).json().agents
  t.equal(list.length, 2)
  const la = list.find((x: { id: string }) => x.id === a.agentId)
  t.match(la, { displayName: 'ag-a', framework: 'langchain', lastSeenAt: String, kpis: { events24h: 2, events30d: 2, errors30d: 1, errorRate30d: 0.5, cost24h: 0.01, cost30d: 0.01 } })
  const profile = (await get(user, `/v1/me/agents/${a.agentId}`)).json()
  t.equal(profile.calendar.length, 30)
  t.match(profile.calendar[29], { day: new Date().toISOString().slice(0, 10), eventCount: 2, errors: 1, costUsd: 0.01, tokens: { output: 1000, total: 1000 } })
  t.equal(profile.recentSessions[0].sessionId, 'ag-s')
  t.equal(profile.recentErrors.length, 1)

  const other = await newUser(app)
  t.equal((await get(other, `/v1/me/agents/${a.agentId}`)).statusCode, 404)
  t.same((await get(other, '/v1/me/agents')).json().agents, [])
  const patch = (u: TestUser, id: string, payload: unknown) => app.inject({ method: 'PATCH', url: `/v1/me/agents/${id}`, headers: u.auth, payload: payload as object })
  t.equal((await patch(other, a.agentId, { displayName: 'mine' })).statusCode, 404)
  t.equal((await patch(user, a.agentId, { displayName: 'ag-b' })).statusCode, 409)
  t.same((await patch(user, a.agentId, { displayName: 'ag-b' })).json(), { error: 'conflict', reason: 'display_name_taken', message: 'another of your agents already has this display name; choose another' })
  for (const bad of [{}, { displayName: '' }, { displayName: '   ' }, { displayName: 'x'.repeat(121) }, { displayName: 'ok', extra: 1 }]) {
    t.equal((await patch(user, a.agentId, bad)).statusCode, 400, JSON.stringify(bad))
  }
  const renamed = await patch(user, a.agentId, { displayName: 'ag-renamed' })
  t.equal(renamed.statusCode, 200)
  t.equal(renamed.json().displayName, 'ag-renamed')
  t.equal((await sendEvent(app, key.secret, { agentId: 'ag-renamed' })).json().agentId, a.agentId, 'ingestion resolves the new name at once')

  t.equal((await app.inject({ method: 'DELETE', url: `/v1/me/agents/${a.agentId}`, headers: user.auth })).statusCode, 204)
  t.same((await get(user, '/v1/me/agents')).json().agents.map((x: { id: string }) => x.id), [b.agentId])
  t.notOk((await get(user, '/v1/me/events')).json().events.some((e: { agentId: string }) => e.agentId === a.agentId), 'its events are hidden')
  t.equal((await get(user, '/v1/me/sessions/ag-s')).statusCode, 404)
  t.same((await get(user, '/v1/me/errors')).json().clusters, [])
  t.notOk((await get(user, '/v1/me/spend-summary')).json().by_agent.some((x: { agentId: string }) => x.agentId === a.agentId))
  t.equal((await get(user, `/v1/me/agents/${a.agentId}`)).statusCode, 404)
})

t.test('POST /v1/me/test-event goes through ingestion to a private placeholder agent', async (t) => {
  const user = await newUser(app)
  const res = await app.inject({ method: 'POST', url: '/v1/me/test-event', headers: user.auth })
  t.equal(res.statusCode, 202)
  t.match(res.json(), { accepted: true, eventId: /^evt_/, agentId: /^c/ })
  const again = await app.inject({ method: 'POST', url: '/v1/me/test-event', headers: user.auth })
  t.equal(again.json().agentId, res.json().agentId, 'one placeholder agent')
  const { rows } = await app.db.query('SELECT is_public, owner_wallet, owner_id FROM agents WHERE id = $1', [res.json().agentId])
  t.same(rows[0], { is_public: false, owner_wallet: `test:${user.id}`, owner_id: user.id })
  const events = (await get(user, '/v1/me/events')).json().events
  t.equal(events.length, 2)
  t.equal(events[0].privacyChip, 'FULL')
  t.equal((await app.inject({ url: `/v1/agents/${res.json().agentId}` })).statusCode, 404, 'never public')
})

t.test('a test event never takes over the user\'s own agent named test-agent; concurrent ones share one placeholder', async (t) => {
  const { user, send } = await fixture()
  const own = await send({ agentId: 'test-agent' })
  t.equal((await app.inject({ method: 'PATCH', url: `/v1/me/agents/${own.agentId}`, headers: user.auth, payload: { isPublic: true } })).statusCode, 200)
  const results = await Promise.all([1, 2, 3].map(() => app.inject({ method: 'POST', url: '/v1/me/test-event', headers: user.auth })))
  t.same(results.map((r) => r.statusCode), [202, 202, 202])
  const placeholders = new Set(results.map((r) => r.json().agentId))
  t.equal(placeholders.size, 1, 'one placeholder')
  const [placeholder] = [...placeholders]
  t.not(placeholder, own.agentId, 'not the user\'s agent')
  const { rows } = await app.db.query('SELECT id, display_name, is_public, owner_wallet FROM agents WHERE id = ANY($1) ORDER BY display_name', [[own.agentId, placeholder]])
  t.same(rows, [
    { id: own.agentId, display_name: 'test-agent', is_public: true, owner_wallet: null },
    { id: placeholder, display_name: 'test-agent-2', is_public: false, owner_wallet: `test:${user.id}` },
  ], 'the user\'s agent unchanged, still public')
  t.equal((await app.inject({ url: `/v1/agents/${own.agentId}` })).statusCode, 200, 'and still in the registry')
  // Renamed, the placeholder is still found by its mark.
  t.equal((await app.inject({ method: 'PATCH', url: `/v1/me/agents/${placeholder}`, headers: user.auth, payload: { displayName: 'my tests' } })).statusCode, 200)
  t.equal((await app.inject({ method: 'POST', url: '/v1/me/test-event', headers: user.auth })).json().agentId, placeholder)
})

t.test('per-user, per-endpoint limits on /v1/me answer 429 with Retry-After', async (t) => {
  const limited = await buildTestApp(t, { ME_READS_PER_MINUTE: '3', ME_WRITES_PER_MINUTE: '2' })
  const user = await newUser(limited)
  const statuses = []
  for (let i = 0; i < 4; i++) statuses.push((await limited.inject({ url: '/v1/me/events', headers: user.auth })).statusCode)
  t.same(statuses, [200, 200, 200, 429])
  const res = await limited.inject({ url: '/v1/me/events', headers: user.auth })
  t.same(res.json(), { error: 'rate_limited' })
  t.match(res.headers['retry-after'], /^[1-9]\d*$/)
  t.equal((await limited.inject({ url: '/v1/me/sessions', headers: user.auth })).statusCode, 200, 'another endpoint has its own budget')
  const other = await newUser(limited)
  t.equal((await limited.inject({ url: '/v1/me/events', headers: other.auth })).statusCode, 200, 'another user has their own budget')
})

t.test('malformed ids get 404, 414 or a validation error, never a 500', async (t) => {
  const user = await newUser(app)
  for (const url of ['/v1/me/agents/%00', `/v1/me/agents/${'x'.repeat(300)}`, '/v1/me/sessions/%E2%80%AE', `/v1/me/traces/${'y'.repeat(300)}`, '/v1/me/errors/zz/resolve']) {
    const res = await app.inject({ method: url.endsWith('resolve') ? 'POST' : 'GET', url, headers: user.auth })
    t.ok([400, 404, 414].includes(res.statusCode), `${url}: ${res.statusCode}`)
    t.equal(res.json().error === undefined, false, 'a JSON error body')
  }
})

t.test('read-your-writes: an acknowledged event is in every read on the next request', async (t) => {
  const { user, send } = await fixture()
  const session = randomId('ryw-s-')
  const trace = randomId('ryw-t-')
  const ack = await send({ agentId: 'ryw', type: 'error', errorMessage: 'ryw failure', model: 'gpt-4o', metadata: { sessionId: session, traceId: trace, tokensBreakdown: { output: 1000 } } })
  t.equal((await get(user, '/v1/me/events')).json().events[0].eventId, ack.eventId, 'events')
  t.equal((await get(user, `/v1/me/sessions/${session}`)).json().events[0].eventId, ack.eventId, 'session')
  t.equal((await get(user, `/v1/me/traces/${trace}`)).json().spans[0].eventId, ack.eventId, 'trace')
  t.ok((await get(user, '/v1/me/traces')).json().traces.some((x: { traceId: string }) => x.traceId === trace), 'traces list')
  t.equal((await get(user, '/v1/me/errors')).json().clusters[0].count, 1, 'error cluster')
  t.equal((await get(user, '/v1/me/spend-summary')).json().total.costUsd, 0.01, 'spend summary')
  t.equal((await get(user, `/v1/me/agents/${ack.agentId}`)).json().kpis.events24h, 1, 'agent KPIs')
  const other = await newUser(app)
  t.notOk((await get(other, '/v1/me/traces?since=all')).json().traces.some((x: { traceId: string }) => x.traceId === trace), 'not in another user\'s traces')
})
