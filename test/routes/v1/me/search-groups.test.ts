import t from 'tap'
import { newUser } from '../../../helpers/app.ts'
import { flatten, matches, query, randomFilters, rng, setUp, walk, type Ev, type Filters } from './search-fixture.ts'

// Traces, sessions and facets under search filters (docs/api.md#search), compared with a brute-force
// filter in JavaScript; and isolation between users.

t.test('traces and sessions match when any of their events does; facets count what the filters match', async (t) => {
  const { app, alice, bob, stored, bobs } = await setUp(t)
  const r = rng(11)
  const groupsOf = (column: 'traceId' | 'sessionId', f: Filters) => {
    const ids = new Set(stored.filter((e) => e[column] && matches(e, f)).map((e) => e[column]))
    const window = stored.filter((e) => e[column] && ids.has(e[column]) && matches(e, { ...(f.from ? { from: f.from } : {}), ...(f.to ? { to: f.to } : {}) }))
    const groups = new Map<string, { last: number; n: number }>()
    for (const e of window) {
      const g = groups.get(e[column]) ?? { last: 0, n: 0 }
      groups.set(e[column], { last: Math.max(g.last, Date.parse(e.timestamp)), n: g.n + 1 })
    }
    return [...groups].sort((a, b) => b[1].last - a[1].last || (a[0] < b[0] ? -1 : 1)).map(([id, g]) => `${id}:${g.n}`)
  }
  for (let i = 0; i < 25; i++) {
    const f = randomFilters(r, stored)
    delete f.from
    delete f.to
    const traces = (await walk(app, alice, `/v1/me/traces?limit=4&${query(f)}`, 'traces')).map((x) => `${x.traceId}:${x.eventCount}`)
    t.same(traces, groupsOf('traceId', f), `traces ${query(f)}`)
    const sessions = (await walk(app, alice, `/v1/me/sessions?limit=3&${query(f)}`, 'sessions')).map((x) => `${x.sessionId}:${x.eventCount}`)
    t.same(sessions, groupsOf('sessionId', f), `sessions ${query(f)}`)
  }

  const count = (list: Ev[], key: (e: Ev) => string | null) => {
    const m = new Map<string | null, number>()
    for (const e of list) m.set(key(e), (m.get(key(e)) ?? 0) + 1)
    return [...m].map(([value, n]) => ({ value, count: n })).sort((a, b) => b.count - a.count || ((a.value ?? '') < (b.value ?? '') ? -1 : 1)).slice(0, 20)
  }
  for (const f of [{}, { q: '支付' }, { type: ['error', 'tool'], 'meta.env': 'prod' }, { hasMeta: 'git' }, { q: 'zzz-nothing' }] as Filters[]) {
    const matched = stored.filter((e) => matches(e, f))
    const res = await app.inject({ method: 'GET', url: `/v1/me/events/facets?${query(f)}`, headers: alice.auth })
    t.equal(res.statusCode, 200)
    const body = res.json()
    t.equal(body.total, matched.length, `total ${query(f)}`)
    t.same(body.facets.type, count(matched, (e) => e.type), 'by type')
    t.same(body.facets.outcome, count(matched, (e) => e.outcome), 'by outcome')
    t.same(body.facets.model, count(matched, (e) => e.model), 'by model')
    t.same(body.facets.tool, count(matched, (e) => e.toolExecuted), 'by tool')
    t.same(body.facets.costStatus, count(matched, (e) => e.costStatus), 'by cost status')
    t.same(body.facets.agentId.map((x: Ev) => ({ value: x.value, count: x.count })), count(matched, (e) => e.agentId), 'by agent')
    t.ok(body.facets.agentId.every((x: Ev) => typeof x.displayName === 'string'), 'agents named')
    const hiddenKey = (k: string) => ['traceId', 'sessionId', 'privacyLevel'].includes(k) || k.startsWith('tokensBreakdown.')
    const keys = new Map<string, number>()
    for (const e of matched) for (const k of new Set(flatten(e.metadata).map((x) => x[0]).filter((k) => !hiddenKey(k)))) keys.set(k, (keys.get(k) ?? 0) + 1)
    const topKeys = [...keys].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 10)
    t.same(body.metadata.map((m: Ev) => [m.key, m.count]), topKeys, 'metadata keys')
    for (const m of body.metadata) {
      const values = count(matched.filter((e) => flatten(e.metadata).some((x) => x[0] === m.key)), (e) => flatten(e.metadata).find((x) => x[0] === m.key)![1]).slice(0, 5)
      t.same(m.values, values, `values of ${m.key}`)
    }
  }

  // Isolation: Bob's events hold the same words, and his facets count only his.
  const mine = await app.inject({ method: 'GET', url: '/v1/me/events/facets?q=%E6%94%AF%E4%BB%98', headers: bob.auth })
  t.equal(mine.json().total, bobs.filter((e) => matches(e, { q: '支付' })).length, 'Bob\'s facets count his events only')
  const nobody = await newUser(app)
  const empty = await app.inject({ method: 'GET', url: '/v1/me/events/facets', headers: nobody.auth })
  t.same(empty.json(), { total: 0, facets: { type: [], outcome: [], model: [], tool: [], agentId: [], costStatus: [] }, metadata: [] }, 'a user without events: zeros')
  const other = await app.inject({ method: 'GET', url: `/v1/me/events?agentId=${stored[0]!.agentId}&agentId=${bobs[0]!.agentId}&q=a`, headers: bob.auth })
  t.ok(other.json().events.every((e: Ev) => e.agentId === bobs[0]!.agentId), 'naming another user\'s agent finds none of its events')
})
