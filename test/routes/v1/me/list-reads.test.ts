import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent, type TestUser } from '../../../helpers/app.ts'
import { costOf } from '../../../../src/domain/pricing.ts'

// The dashboard lists read rollups (clickhouse/012) where they answer and events only at their
// edges: a window's first partial hour, a group older than the list's window or received after the
// page's snapshot. These are the edges, each against what the events say.
const app = await buildTestApp(t)
const get = (user: TestUser, url: string) => app.inject({ method: 'GET', url, headers: user.auth })
const HOUR = 3_600_000
const DAY = 24 * HOUR

async function fixture () {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const send = async (payload: Record<string, unknown>) => {
    const res = await sendEvent(app, key.secret, payload)
    if (res.statusCode !== 202) throw new Error(`${res.statusCode} ${res.body}`)
    return res.json() as { eventId: string; agentId: string }
  }
  return { user, send }
}

t.test('the agents\' last 24 hours: whole hours from the rollup, the partial first hour from events, nothing older', async (t) => {
  const { user, send } = await fixture()
  const now = Date.now()
  const tokens = { inputBase: 1000, output: 100 }
  await send({ agentId: 'edge-a', timestamp: now - DAY - 2 * 60_000, model: 'gpt-4o', metadata: { tokensBreakdown: tokens } })
  const a = await send({ agentId: 'edge-a', timestamp: now - DAY + 2 * 60_000, model: 'gpt-4o', metadata: { tokensBreakdown: tokens } })
  await send({ agentId: 'edge-a', timestamp: now - 5 * HOUR, type: 'error', errorMessage: 'boom' })
  await send({ agentId: 'edge-a' })
  await send({ agentId: 'edge-b', timestamp: now - DAY + HOUR / 2 })

  const cost = Number(costOf('gpt-4o', { ...tokens, cacheCreation: 0, cacheRead: 0 }).usd)
  const list = (await get(user, '/v1/me/agents')).json().agents as { displayName: string; kpis: Record<string, number> }[]
  const kpis = Object.fromEntries(list.map((x) => [x.displayName, x.kpis]))
  t.equal(kpis['edge-a']!.events24h, 3, 'the event 2 minutes inside the window counts, the one 2 minutes before it does not')
  t.equal(kpis['edge-a']!.cost24h, cost, 'so does its cost, once')
  t.equal(kpis['edge-b']!.events24h, 1)
  t.equal(kpis['edge-a']!.events30d, 4, 'the 30 days count all four')
  const profile = (await get(user, `/v1/me/agents/${a.agentId}`)).json()
  t.match(profile.kpis, { events24h: 3, cost24h: cost, events30d: 4, errors30d: 1 }, 'the profile says the same')
})

t.test('a trace older than the list\'s window counts only its events inside the window', async (t) => {
  const { user, send } = await fixture()
  const trace = randomId('old-trace-')
  const now = Date.now()
  await send({ agentId: 'win-a', timestamp: now - 8 * DAY, metadata: { traceId: trace, sessionId: trace } })
  const recent = now - HOUR
  await send({ agentId: 'win-a', timestamp: recent, model: 'gpt-4o', metadata: { traceId: trace, sessionId: trace, tokensBreakdown: { output: 10 } } })
  await send({ agentId: 'win-b', timestamp: recent + 1000, type: 'error', errorMessage: 'late', metadata: { traceId: trace, sessionId: trace } })
  const week = (await get(user, '/v1/me/traces?since=7d')).json().traces.find((x: { traceId: string }) => x.traceId === trace)
  t.match(week, { eventCount: 2, start: new Date(recent).toISOString(), end: new Date(recent + 1000).toISOString(), errors: 1, tokens: { output: 10 } })
  t.equal(week.agents.length, 2)
  const month = (await get(user, '/v1/me/traces?since=30d')).json().traces.find((x: { traceId: string }) => x.traceId === trace)
  t.match(month, { eventCount: 3, start: new Date(now - 8 * DAY).toISOString(), errors: 1 }, 'a wider window counts the old event too')
  const session = (await get(user, '/v1/me/sessions')).json().sessions.find((x: { sessionId: string }) => x.sessionId === trace)
  t.match(session, { eventCount: 3, durationMs: 8 * DAY - HOUR + 1000 }, 'sessions have no window: every event')
})

t.test('a page walked after its snapshot shows its groups as they were then, though they grew since', async (t) => {
  const { user, send } = await fixture()
  const t0 = Date.now() - 2 * HOUR
  for (let i = 0; i < 4; i++) {
    await send({ agentId: 'snap-a', timestamp: t0 + i * 60_000, model: 'gpt-4o', metadata: { sessionId: `snap-${i}`, tokensBreakdown: { output: 100 } } })
  }
  const first = (await get(user, '/v1/me/sessions?limit=2')).json()
  t.same(first.sessions.map((s: { sessionId: string }) => s.sessionId), ['snap-3', 'snap-2'])
  // snap-1 (on the next page) gets an event received after the walk's snapshot, at an older time
  // (so it stays on that page), and a soft-deleted agent's event that no read may count.
  await send({ agentId: 'snap-a', timestamp: t0 - 60_000, model: 'gpt-4o', metadata: { sessionId: 'snap-1', tokensBreakdown: { output: 100 } } })
  const hidden = await send({ agentId: 'snap-hidden', timestamp: t0 + 30_000, metadata: { sessionId: 'snap-0' } })
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/me/agents/${hidden.agentId}`, headers: user.auth })).statusCode, 204)

  const second = (await get(user, `/v1/me/sessions?limit=2&cursor=${encodeURIComponent(first.nextCursor)}`)).json()
  t.same(second.sessions.map((s: { sessionId: string; eventCount: number }) => [s.sessionId, s.eventCount]), [['snap-1', 1], ['snap-0', 1]],
    'snap-1 as of the snapshot (1 event, not 2); snap-0 without the hidden agent\'s event')
  t.equal(second.sessions[0].start, new Date(t0 + 60_000).toISOString())
  const fresh = (await get(user, '/v1/me/sessions?limit=4')).json().sessions
  t.same(fresh.map((s: { sessionId: string; eventCount: number }) => [s.sessionId, s.eventCount]), [['snap-3', 1], ['snap-2', 1], ['snap-1', 2], ['snap-0', 1]],
    'a new walk counts the new event')
  t.same(fresh[3].agents.map((a: { id: string }) => a.id).includes(hidden.agentId), false)
})

t.test('error clusters: whole days from the daily rollup, the hours before the first from the hourly one', async (t) => {
  const { user, send } = await fixture()
  const now = Date.now()
  // since=7d starts at the hour of now - 7 days; one event an hour inside it, one two hours before.
  const from = Math.floor((now - 7 * DAY) / HOUR) * HOUR
  await send({ agentId: 'err-a', timestamp: from - HOUR, type: 'error', errorMessage: 'disk full' })
  await send({ agentId: 'err-a', timestamp: from + HOUR / 2, type: 'error', errorMessage: 'disk full' })
  await send({ agentId: 'err-a', timestamp: now - 3 * DAY, type: 'error', errorMessage: 'disk full' })
  const latest = await send({ agentId: 'err-a', timestamp: now - HOUR, type: 'error', errorMessage: 'disk full' })
  const week = (await get(user, '/v1/me/errors?since=7d')).json().clusters
  t.equal(week.length, 1)
  t.match(week[0], { count: 3, firstSeen: new Date(from + HOUR / 2).toISOString(), lastSeen: new Date(now - HOUR).toISOString(), sampleMessage: 'disk full' })
  const all = (await get(user, '/v1/me/errors?since=all')).json().clusters
  t.equal(all[0].count, 4, 'all time: every error')
  const profile = (await get(user, `/v1/me/agents/${latest.agentId}`)).json()
  t.match(profile.recentErrors, [{ fingerprint: week[0].fingerprint, count: 4 }], 'the agent profile\'s clusters cover all time')
})

t.test('the spend summary\'s breakdowns agree with each other and order by cost', async (t) => {
  const { user, send } = await fixture()
  await send({ agentId: 'sp-a', model: 'gpt-4o', metadata: { tokensBreakdown: { inputBase: 1000 } } })
  await send({ agentId: 'sp-a', model: 'gpt-4o-mini', metadata: { tokensBreakdown: { inputBase: 1000 } } })
  await send({ agentId: 'sp-b', model: 'gpt-4o', metadata: { tokensBreakdown: { inputBase: 3000 } } })
  await send({ agentId: 'sp-b', model: 'no-such-model-xyz' })
  const s = (await get(user, '/v1/me/spend-summary?days=7')).json()
  t.equal(s.total.eventCount, 4)
  for (const part of ['by_agent', 'by_model', 'by_day'] as const) {
    t.equal(s[part].reduce((n: number, x: { eventCount: number }) => n + x.eventCount, 0), 4, `${part} adds up to the total`)
  }
  t.same(s.by_agent.map((x: { displayName: string }) => x.displayName), ['sp-b', 'sp-a'], 'agents by cost, highest first')
  t.same(s.by_model.map((x: { model: string | null }) => x.model), ['gpt-4o', 'gpt-4o-mini', 'no-such-model-xyz'])
  t.same(s.unpriced_models, [{ model: 'no-such-model-xyz', eventCount: 1 }])
  const empty = await newUser(app)
  t.match((await get(empty, '/v1/me/spend-summary')).json(), { total: { eventCount: 0, costUsd: 0 }, by_agent: [], by_model: [], by_day: [] }, 'no events: zeros and empty lists')
})

t.test('a list first looked for in the span its last page needed still finds every group when the history thins out', async (t) => {
  const { user, send } = await fixture()
  const now = Date.now()
  // Six sessions in the last two minutes, then six spread over the five days before: the first page
  // (limit 3) needs a minute's span, the pages after it days.
  const expected: string[] = []
  for (let i = 0; i < 6; i++) {
    await send({ agentId: 'hint-a', timestamp: now - i * 15_000, metadata: { sessionId: `dense-${i}` } })
    expected.push(`dense-${i}`)
  }
  for (let i = 0; i < 6; i++) {
    await send({ agentId: 'hint-a', timestamp: now - (i + 1) * 20 * HOUR, metadata: { sessionId: `sparse-${i}` } })
    expected.push(`sparse-${i}`)
  }
  const agentId = (await get(user, '/v1/me/agents')).json().agents[0].id as string
  const ids = (body: { sessions: { sessionId: string }[] }) => body.sessions.map((s) => s.sessionId)
  for (const list of ['/v1/me/sessions?', `/v1/me/sessions?agentId=${agentId}&`]) {
    const seen: string[] = []
    let cursor = ''
    for (let page = 0; page < 6; page++) {
      const body = (await get(user, `${list}limit=3${cursor}`)).json()
      seen.push(...ids(body))
      if (!body.nextCursor) break
      cursor = `&cursor=${encodeURIComponent(body.nextCursor)}`
    }
    t.same(seen, expected, `${list}: every session once, newest first`)
    // Read again: the hint learned from the walk changes nothing.
    t.same(ids((await get(user, `${list}limit=12`)).json()), expected)
  }
})
