import t from 'tap'
import { buildTestApp, newUser, sendBatch, sendEvent, shipped } from '../../../helpers/app.ts'
import { HOUR, walk, type Ev } from './search-fixture.ts'
import { parseSearchFilters } from '../../../../src/domain/search-filters.ts'
import { searchWhere } from '../../../../src/storage/search-repository.ts'

// Paging under search filters while events stream in, and the 400s of malformed filters.

t.test('a filtered walk hands out every match once while matching events stream in', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app, { burst: 1_000_000 })
  const { secret } = await user.createKey()
  const now = Date.now()
  const base = Array.from({ length: 150 }, (_, i) => ({
    agentId: 'walker', type: i % 2 ? 'tool' : 'decision', reasoning: i % 3 ? '订单支付失败了' : 'fine',
    timestamp: new Date(now - HOUR - (i % 30) * 1000).toISOString(), metadata: { traceId: `w-${i % 17}` },
  }))
  const ids = (await sendBatch(app, secret, base)).json().results.map((x: Ev) => x.eventId as string)
  await shipped(app)
  const expected = ids.filter((_: string, i: number) => i % 2 === 1 && i % 3 !== 0)
  // Matching events stream in from the moment the walk's first page (its snapshot) is answered: an
  // event acknowledged before that page belongs to the snapshot, and the walk rightly lists it.
  let streaming = true
  let streamed = 0
  let stream: Promise<void> = Promise.resolve()
  const startStreaming = () => {
    stream = (async () => {
      // eslint-disable-next-line no-unmodified-loop-condition -- another task changes it
      for (let i = 0; streaming; i++) {
        const res = await sendEvent(app, secret, { agentId: 'walker', type: 'tool', reasoning: '支付失败', timestamp: new Date(now - HOUR - (i % 30) * 1000).toISOString(), metadata: { traceId: `w-${i % 17}` } })
        if (res.statusCode !== 202) throw new Error(res.body)
        streamed++
      }
    })()
  }
  const got = (await walk(app, user, '/v1/me/events?type=tool&q=%E6%94%AF%E4%BB%98%E5%A4%B1%E8%B4%A5&limit=9', 'events', startStreaming)).map((e) => e.eventId)
  const traces = (await walk(app, user, '/v1/me/traces?type=tool&q=%E6%94%AF%E4%BB%98&limit=2', 'traces')).map((x) => x.traceId)
  streaming = false
  await stream
  t.same([...got].sort(), [...expected].sort(), 'each match of the snapshot once, none of the streamed ones')
  t.ok(streamed > 0, `matching events streamed in during the walk (${streamed})`)

  // The bigram index is offered the term (it may skip granules; the LIKE decides).
  const parsed = parseSearchFilters({ q: '支付失败' })
  if (!parsed.ok) throw new Error('q')
  const { where, params } = searchWhere({ userId: user.id, hidden: [] }, { sinceMs: 0, asOf: Date.now() }, parsed.filters)
  const plan = await (await app.clickhouse.query({ query: `EXPLAIN indexes = 1 SELECT event_id FROM events WHERE ${where}`, query_params: params, format: 'TabSeparatedRaw' })).text()
  t.match(plan, /Name: idx_search_text/, 'EXPLAIN shows the search index used for q')
  t.equal(new Set(traces).size, 17, 'each trace once')
  t.equal(traces.length, 17)
})

t.test('a malformed filter is a 400 naming it; since and agentId keep dropping bad values', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app)
  const bad: [string, string][] = [
    ['type=nope', 'type'], ['outcome=ok', 'outcome'], ['privacyLevel=max', 'privacyLevel'], ['costStatus=free', 'costStatus'],
    ['fingerprint=xyz', 'fingerprint'], ['minCostUsd=-1', 'minCostUsd'], ['maxCostUsd=abc', 'maxCostUsd'], ['minCostUsd=0.0000000001', 'minCostUsd'],
    ['minDurationMs=1.5', 'minDurationMs'], ['maxDurationMs=x', 'maxDurationMs'], ['from=yesterday', 'from'], ['to=2026-02-30T00:00:00Z', 'to'],
    ['from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', 'from'], ['minCostUsd=2&maxCostUsd=1', 'minCostUsd'],
    ['minDurationMs=5&maxDurationMs=4', 'minDurationMs'], ['meta..a=1', 'meta..a'], ['meta.=1', 'meta.'], ['hasMeta=a..b', 'hasMeta'],
    [`q=${'x'.repeat(501)}`, 'q'], [`q=${Array.from({ length: 11 }, (_, i) => `w${i}`).join('+')}`, 'q'], ['q=a&q=b', 'q'],
    [`model=${'m'.repeat(201)}`, 'model'], ['sessionId=', 'sessionId'], ['from=1&from=2', 'from'],
  ]
  for (const path of ['/v1/me/events', '/v1/me/traces', '/v1/me/sessions', '/v1/me/events/facets']) {
    for (const [qs, name] of bad) {
      const res = await app.inject({ method: 'GET', url: `${path}?${qs}`, headers: user.auth })
      t.equal(res.statusCode, 400, `${path}?${qs.slice(0, 40)}`)
      t.equal(res.json().error, 'validation_failed')
      t.ok(res.json().details.some((d: Ev) => d.path[0] === name), `names ${name}: ${JSON.stringify(res.json().details)}`)
    }
  }
  for (const qs of ['since=forever', 'agentId=not-a-cuid', 'agentId=x&agentId=y', 'unknown=1', 'q=', 'q=%20%20', 'since=7d&agentId=nope']) {
    const res = await app.inject({ method: 'GET', url: `/v1/me/events?${qs}`, headers: user.auth })
    t.equal(res.statusCode, 200, `${qs}: ignored as before`)
  }
})

t.test('more than 50 agentId values is a 400 naming agentId on every list, not a silent empty answer', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app)
  const cuids = Array.from({ length: 51 }, (_, i) => `agentId=c${String(i).padStart(24, '0')}`).join('&')
  for (const path of ['/v1/me/events', '/v1/me/traces', '/v1/me/sessions', '/v1/me/events/facets']) {
    const res = await app.inject({ method: 'GET', url: `${path}?${cuids}`, headers: user.auth })
    t.equal(res.statusCode, 400, path)
    t.same(res.json().details, [{ path: ['agentId'], message: 'at most 50 values' }], path)
    const dropped = await app.inject({ method: 'GET', url: `${path}?${cuids.split('&').slice(1).join('&')}&${Array.from({ length: 10 }, () => 'agentId=nope').join('&')}`, headers: user.auth })
    t.equal(dropped.statusCode, 200, `${path}: 50 cuids and values that are not cuids (dropped, not counted)`)
  }
})

t.test('a repeated limit or since is the default, a repeated cursor must be given once, on every list', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app)
  for (const path of ['/v1/me/events', '/v1/me/traces', '/v1/me/sessions', '/v1/me/events/facets']) {
    for (const filter of ['', '&type=tool']) {
      const since = await app.inject({ method: 'GET', url: `${path}?since=24h&since=7d${filter}`, headers: user.auth })
      t.equal(since.statusCode, 200, `${path}: since twice${filter}`)
      if (path.endsWith('facets')) continue
      const limit = await app.inject({ method: 'GET', url: `${path}?limit=1&limit=2${filter}`, headers: user.auth })
      t.equal(limit.statusCode, 200, `${path}: limit twice${filter}`)
      const cursor = await app.inject({ method: 'GET', url: `${path}?cursor=a&cursor=b${filter}`, headers: user.auth })
      t.equal(cursor.statusCode, 400, `${path}: cursor twice${filter}`)
      t.same(cursor.json().details, [{ path: ['cursor'], message: 'must be given once' }])
    }
  }
})
