import t from 'tap'
import { matches, newestFirst, query, randomFilters, rng, setUp, TYPES, walk, type Filters } from './search-fixture.ts'

// Search filters and q on GET /v1/me/events (docs/api.md#search), each answer compared with a
// brute-force filter in JavaScript over the same events as the API returns them.

t.test('filters and q: every combination answers exactly what a brute-force filter does, paged once through', async (t) => {
  const { app, alice, stored, bobs } = await setUp(t)
  t.equal(stored.length, 360, 'all of Alice\'s events are there')
  const bobIds = new Set(bobs.map((e) => e.eventId))
  const r = rng(7)
  let nonEmpty = 0
  for (let i = 0; i < 40; i++) {
    const f = randomFilters(r, stored)
    const expected = stored.filter((e) => matches(e, f)).sort(newestFirst).map((e) => e.eventId)
    const got = (await walk(app, alice, `/v1/me/events?since=all&limit=15&${query(f)}`, 'events')).map((e) => e.eventId)
    t.same(got, expected, `events ${query(f)} (${expected.length})`)
    t.notOk(got.some((id) => bobIds.has(id)), 'none of Bob\'s')
    if (expected.length > 0) nonEmpty++
  }
  t.ok(nonEmpty >= 20, `most combinations match something (${nonEmpty} of 40)`)

  // Each field alone, every value it can take, so no filter is exercised only by chance.
  const singles: Filters[] = [
    ...TYPES.map((type) => ({ type })), { outcome: 'failed' }, { model: 'claude-sonnet-4' }, { tool: 'pay' },
    { costStatus: ['unknown_model', 'no_model'] }, { privacyLevel: 'minimal' }, { 'meta.env': 'дев' }, { 'meta.git.branch': 'feat/支付' },
    { 'meta.deep.a.c.d': 'too deep' }, { hasMeta: 'deep.a.c' }, { hasMeta: ['git', 'flag'] }, { 'meta.retries': ['0', '3'] },
    { q: '支付失败' }, { q: 'ДАННЫЕ данные' }, { q: '"CAFÉ CRÈME"' }, { q: '✅' }, { q: '100%' }, { q: '_' }, { q: 'ångström' }, { q: 'café noir' }, { q: 'cafe\u0301' }, { q: 'cafe' },
    { q: 'too deep' }, { q: 'lang' }, { q: 'prod' }, { q: 'search' }, { q: 'gpt-4o' }, { q: '"open quote' },
  ]
  for (const f of singles) {
    const expected = stored.filter((e) => matches(e, f)).sort(newestFirst).map((e) => e.eventId)
    const got = (await walk(app, alice, `/v1/me/events?limit=50&${query(f)}`, 'events')).map((e) => e.eventId)
    t.same(got, expected, `events ${query(f)} (${expected.length})`)
  }
})
