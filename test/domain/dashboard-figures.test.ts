import t from 'tap'
import {
  byCostThenKey, combineGroups, groupSummary, spendBreakdown, spendDays, spendRow, spendTotal, tokenTotals,
  type GroupFigures, type SpendFigures,
} from '../../src/domain/dashboard-figures.ts'

const figures = (over: Partial<SpendFigures>): SpendFigures =>
  ({ key: '', cost: '0', events: 0, errors: 0, unpricedEvents: 0, t_in: 0, t_cw: 0, t_cr: 0, t_out: 0, ...over })

const group = (over: Partial<GroupFigures>): GroupFigures => ({
  id: 'g', start_ms: 0, last_ms: 0, end_ms: 0, n: 1, agents: ['a'], t_in: 0, t_cw: 0, t_cr: 0, t_out: 0, cost: '0', errors: 0, ...over,
})

t.test('token totals sum the four counts', async (t) => {
  t.same(tokenTotals(1, 2, 3, 4), { inputBase: 1, cacheCreation: 2, cacheRead: 3, output: 4, total: 10 })
})

t.test('a spend row answers its cost as a number and its tokens as totals', async (t) => {
  t.same(spendRow(figures({ key: 'k', cost: '1.250000000', events: 3, errors: 1, unpricedEvents: 2, t_in: 5, t_out: 7 })), {
    key: 'k', costUsd: 1.25, events: 3, errors: 1, unpricedEvents: 2, tokens: { inputBase: 5, cacheCreation: 0, cacheRead: 0, output: 7, total: 12 },
  })
})

t.test('a total sums every figure, the cost exactly', async (t) => {
  const total = spendTotal([
    figures({ key: '2026-05-01', cost: '90071992.547409910', events: 1, errors: 1, unpricedEvents: 1, t_in: 1, t_cw: 2, t_cr: 3, t_out: 4 }),
    figures({ key: '2026-05-02', cost: '0.000000001', events: 2, t_out: 6 }),
  ])
  t.same(total, { key: '', cost: '90071992.547409911', events: 3, errors: 1, unpricedEvents: 1, t_in: 1, t_cw: 2, t_cr: 3, t_out: 10 })
})

t.test('costs order by the exact decimal, then key', async (t) => {
  // One double, two decimals: the order must still tell them apart.
  const a = figures({ key: 'a', cost: '90071992.547409910' })
  const b = figures({ key: 'b', cost: '90071992.547409911' })
  t.equal(Number(a.cost), Number(b.cost), 'the doubles are equal')
  t.same([a, b].sort(byCostThenKey).map((x) => x.key), ['b', 'a'])
  t.same([figures({ key: 'y', cost: '1' }), figures({ key: 'x', cost: '1.0' })].sort(byCostThenKey).map((x) => x.key), ['x', 'y'], 'a tie by key')
})

t.test('the breakdowns: an empty total dropped, agents and models by cost, days oldest first', async (t) => {
  const out = spendBreakdown([
    { set: 'total', figures: figures({ events: 0 }) },
    { set: 'agent_id', figures: figures({ key: 'cheap', cost: '0.1', events: 1 }) },
    { set: 'agent_id', figures: figures({ key: 'dear', cost: '2', events: 1 }) },
    { set: 'model', figures: figures({ key: 'm1', cost: '0.000000001', events: 1 }) },
    { set: 'model', figures: figures({ key: 'm2', cost: '0.000000002', events: 1 }) },
    { set: 'day', figures: figures({ key: '2026-05-02', events: 1 }) },
    { set: 'day', figures: figures({ key: '2026-05-01', events: 1 }) },
  ])
  t.same(out.total, [], 'no event since the day: no total row, as with no row at all')
  t.same(out.agent_id.map((x) => x.key), ['dear', 'cheap'])
  t.same(out.model.map((x) => x.key), ['m2', 'm1'])
  t.same(out.day.map((x) => x.key), ['2026-05-01', '2026-05-02'])
  const counted = spendBreakdown([{ set: 'total', figures: figures({ cost: '3.5', events: 2 }) }])
  t.match(counted.total, [{ key: '', costUsd: 3.5, events: 2 }])
})

t.test('an agent\'s days oldest first, with their exact total', async (t) => {
  const { days, total } = spendDays([
    figures({ key: '2026-05-02', cost: '0.2', events: 2, t_in: 1 }),
    figures({ key: '2026-05-01', cost: '0.1', events: 1, errors: 1 }),
  ])
  t.same(days.map((d) => d.key), ['2026-05-01', '2026-05-02'])
  t.same(total, { key: '', costUsd: 0.3, events: 3, errors: 1, unpricedEvents: 0, tokens: { inputBase: 1, cacheCreation: 0, cacheRead: 0, output: 0, total: 1 } })
  t.same(spendDays([]).total.costUsd, 0, 'no day: zeros')
})

t.test('groups combine their rows: the widest span, the counts and the exact cost summed, the agents united', async (t) => {
  const [g, ...rest] = combineGroups([
    group({ id: 's1', start_ms: 100, last_ms: 200, end_ms: 250, n: 2, agents: ['b'], t_in: 1, cost: '0.1', errors: 1 }),
    group({ id: 's1', start_ms: 50, last_ms: 150, end_ms: 400, n: 3, agents: ['a', 'b'], t_out: 2, cost: '0.2', errors: 0 }),
  ])
  t.same(rest, [])
  t.same(g, { id: 's1', start_ms: 50, last_ms: 200, end_ms: 400, n: 5, agents: ['b', 'a'], t_in: 1, t_cw: 0, t_cr: 0, t_out: 2, cost: '0.300000000', errors: 1 })
})

t.test('a group\'s cost is summed as decimals, exact beyond a double', async (t) => {
  const [g] = combineGroups([group({ id: 'x', cost: '90071992.547409910' }), group({ id: 'x', cost: '0.000000001' })])
  t.equal(g!.cost, '90071992.547409911')
})

t.test('groups are ordered by their last event, latest first, then id', async (t) => {
  const rows = combineGroups([group({ id: 'b', last_ms: 5 }), group({ id: 'c', last_ms: 9 }), group({ id: 'a', last_ms: 5 })])
  t.same(rows.map((x) => x.id), ['c', 'a', 'b'])
})

t.test('combining leaves the rows it was given as they were', async (t) => {
  const row = group({ id: 'x', agents: ['a'], n: 1 })
  combineGroups([row, group({ id: 'x', agents: ['b'], n: 1 })])
  t.same(row.agents, ['a'])
  t.equal(row.n, 1)
})

t.test('a group summary: ISO instants, a duration to the latest span end, sorted agents, tokens, cost', async (t) => {
  const s = groupSummary(group({ start_ms: Date.parse('2026-05-01T00:00:00Z'), end_ms: Date.parse('2026-05-01T00:00:02.5Z'), agents: ['z', 'a'], n: 4, t_cw: 3, cost: '0.000000001', errors: 2 }))
  t.same(s, {
    start: '2026-05-01T00:00:00.000Z', end: '2026-05-01T00:00:02.500Z', durationMs: 2500, events: 4, agents: ['a', 'z'],
    tokens: { inputBase: 0, cacheCreation: 3, cacheRead: 0, output: 0, total: 3 }, costUsd: 1e-9, errors: 2,
  })
})
