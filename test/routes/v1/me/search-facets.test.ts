import t from 'tap'
import { buildTestApp, newUser, sendBatch, shipped } from '../../../helpers/app.ts'
import { HOUR, type Ev } from './search-fixture.ts'

// The metadata of GET /v1/me/events/facets (docs/api.md#get-v1meeventsfacets) against the filters it
// offers: served from the hourly counts (no filter) and from the events (a filter), alike.

t.test('facets offer only metadata paths and values a filter can take, and each narrows the list to its count', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app, { burst: 1_000_000 })
  const { secret } = await user.createKey()
  const timestamp = new Date(Date.now() - 5 * HOUR).toISOString()
  const refused = { '': 'empty key', 'dot.': 'x', ['k'.repeat(201)]: 'long key', 'c\u0001': 'a control character in the key', d: { '': 'an empty nested key' } }
  const events = [
    ...Array.from({ length: 3 }, () => ({ ...refused, long: 'v'.repeat(1001), ok: 'fine', ctl: 'a\u0007b' })),
    ...Array.from({ length: 2 }, () => ({ long: 'short', ok: 'fine', ctl: 'plain' })),
  ].map((metadata) => ({ agentId: 'facets', type: 'tool', timestamp, metadata }))
  t.equal((await sendBatch(app, secret, events)).statusCode, 207)
  await shipped(app)
  for (const filter of ['', '&type=tool']) {
    const res = await app.inject({ method: 'GET', url: `/v1/me/events/facets?since=all${filter}`, headers: user.auth })
    t.equal(res.statusCode, 200)
    const metadata = res.json().metadata as Ev[]
    t.same(metadata.map((m) => [m.key, m.count]).sort(), [['ctl', 5], ['long', 5], ['ok', 5]], `only the paths a filter names (${filter || 'hourly counts'})`)
    t.same(metadata.find((m) => m.key === 'long')!.values, [{ value: 'short', count: 2 }], 'a value over 1,000 characters is left out; the path still counts its events')
    t.same(metadata.find((m) => m.key === 'ctl')!.values, [{ value: 'plain', count: 2 }], 'a value with a control character is left out')
    for (const m of metadata) {
      const has = await app.inject({ method: 'GET', url: `/v1/me/events?limit=1000&hasMeta=${encodeURIComponent(m.key)}${filter}`, headers: user.auth })
      t.equal(has.statusCode, 200, `hasMeta=${m.key}`)
      t.equal(has.json().events.length, m.count, `hasMeta=${m.key} lists the path's count`)
      for (const v of m.values) {
        const one = await app.inject({ method: 'GET', url: `/v1/me/events?limit=1000&meta.${encodeURIComponent(m.key)}=${encodeURIComponent(v.value)}${filter}`, headers: user.auth })
        t.equal(one.statusCode, 200, `meta.${m.key}=${v.value}`)
        t.equal(one.json().events.length, v.count, `meta.${m.key}=${v.value} lists the value's count`)
      }
    }
  }
})

t.test('an event holding two values at one path (a dotted key and a nesting) counts once for the path', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app, { burst: 1_000_000 })
  const { secret } = await user.createKey()
  const timestamp = new Date(Date.now() - 5 * HOUR).toISOString()
  const events = [
    ...Array.from({ length: 3 }, () => ({ 'git.branch': 'a', git: { branch: 'b' } })),
    ...Array.from({ length: 2 }, () => ({ git: { branch: 'a' } })),
    { 'x.y.z': 1, x: { 'y.z': 2, y: { z: 3 } } },
  ].map((metadata) => ({ agentId: 'facets', type: 'tool', timestamp, metadata }))
  t.equal((await sendBatch(app, secret, events)).statusCode, 207)
  await shipped(app)
  for (const filter of ['', '&type=tool']) {
    const metadata = (await app.inject({ method: 'GET', url: `/v1/me/events/facets?since=all${filter}`, headers: user.auth })).json().metadata as Ev[]
    const label = filter || 'hourly counts'
    t.same(metadata.find((m) => m.key === 'git.branch'), { key: 'git.branch', count: 5, values: [{ value: 'a', count: 5 }, { value: 'b', count: 3 }] }, `git.branch: 5 events, a in 5, b in 3 (${label})`)
    t.same(metadata.find((m) => m.key === 'x.y.z'), { key: 'x.y.z', count: 1, values: [{ value: '1', count: 1 }, { value: '2', count: 1 }, { value: '3', count: 1 }] }, `three values at one path: one event (${label})`)
    const has = await app.inject({ method: 'GET', url: `/v1/me/events?limit=1000&hasMeta=git.branch${filter}`, headers: user.auth })
    t.equal(has.json().events.length, 5, 'hasMeta lists the path\'s count')
  }
})

t.test('an event with 20,000 metadata paths ships, and the facets count it as any other', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app, { burst: 1_000_000 })
  const { secret } = await user.createKey()
  const timestamp = new Date(Date.now() - 5 * HOUR).toISOString()
  const wide: Record<string, string> = {}
  for (let i = 0; i < 20_000; i++) wide[`k${i}`] = 'v'
  const events = [
    { w: wide, 'w.k1': 'dup' },
    { w: { k1: 'x' } },
  ].map((metadata) => ({ agentId: 'wide', type: 'tool', timestamp, metadata }))
  t.equal((await sendBatch(app, secret, events)).statusCode, 207)
  // The views counting facets run in the insert: one that was quadratic in an event's paths held
  // the insert for minutes (gigabytes for the lookup of each path in all of them).
  await shipped(app, 60_000)
  for (const filter of ['', '&type=tool']) {
    const res = await app.inject({ method: 'GET', url: `/v1/me/events/facets?since=all${filter}`, headers: user.auth })
    t.equal(res.statusCode, 200)
    const label = filter || 'hourly counts'
    t.equal(res.json().total, 2, `two events (${label})`)
    const metadata = res.json().metadata as Ev[]
    t.same(metadata[0], { key: 'w.k1', count: 2, values: [{ value: 'dup', count: 1 }, { value: 'v', count: 1 }, { value: 'x', count: 1 }] },
      `the path both events hold first, counted once per event (${label})`)
    t.same(metadata.slice(1).map((m) => [m.key, m.count]), ['w.k0', 'w.k10', 'w.k100', 'w.k1000', 'w.k10000', 'w.k10001', 'w.k10002', 'w.k10003', 'w.k10004'].map((k) => [k, 1]),
      `then the paths of one event, by key (${label})`)
  }
})

t.test('the paths a client sent rank first; an OTLP span\'s own paths next; those restating the event\'s fields last', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app, { burst: 1_000_000 })
  const { secret } = await user.createKey()
  const timestamp = new Date(Date.now() - 5 * HOUR).toISOString()
  // 30 events shaped as OTLP spans store their data (metadata.otel), 4 with two keys of the client's.
  const otel = {
    name: 'chat gpt-4o', kind: 3, operation: 'chat', scope: { name: 'openai-instr', version: '1.0.0' }, status: { code: 0 },
    attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.provider.name': 'openai', 'deployment.environment': 'prod' },
    resource: { 'service.name': 'svc', 'agent_telemetry.privacy_level': 'full' },
  }
  const events = [
    // `tool` and `provider` as an OTLP span's mapping sets them (the scope's name, the provider).
    ...Array.from({ length: 30 }, () => ({ metadata: { otel, tool: 'openai-instr', provider: 'openai' } })),
    ...Array.from({ length: 4 }, (_, i) => ({ metadata: { env: 'prod', customer: `c${i % 2}` } })),
  ].map((e) => ({ agentId: 'ranked', type: 'reasoning', timestamp, ...e }))
  t.equal((await sendBatch(app, secret, events)).statusCode, 207)
  await shipped(app)
  for (const filter of ['', '&type=reasoning']) {
    const metadata = (await app.inject({ method: 'GET', url: `/v1/me/events/facets?since=all${filter}`, headers: user.auth })).json().metadata as Ev[]
    const label = filter || 'hourly counts'
    t.same(metadata.map((m) => [m.key, m.count]), [
      ['customer', 4], ['env', 4],
      ['otel.attributes.deployment.environment', 30], ['otel.name', 30], ['otel.resource.service.name', 30],
      ['otel.attributes.gen_ai.operation.name', 30], ['otel.attributes.gen_ai.provider.name', 30], ['otel.attributes.gen_ai.request.model', 30],
      ['otel.kind', 30], ['otel.operation', 30],
    ], `by tier, then by events, then by path; 10 paths; tool and provider after them (${label})`)
  }
})

t.test('values of equal counts are ordered by value, null (none sent) before any other', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app, { burst: 1_000_000 })
  const { secret } = await user.createKey()
  const timestamp = new Date(Date.now() - 5 * HOUR).toISOString()
  const events = [
    ...['b-tool', 'a-tool', null, 'b-tool', 'a-tool', null].map((tool) => ({ agentId: 'facets', type: 'tool', timestamp, ...(tool ? { toolExecuted: tool } : {}) })),
    { agentId: 'facets', type: 'tool', timestamp, toolExecuted: 'c-tool' },
  ]
  t.equal((await sendBatch(app, secret, events)).statusCode, 207)
  await shipped(app)
  for (const filter of ['', '&type=tool']) {
    const res = await app.inject({ method: 'GET', url: `/v1/me/events/facets?since=all${filter}`, headers: user.auth })
    t.same(res.json().facets.tool, [{ value: null, count: 2 }, { value: 'a-tool', count: 2 }, { value: 'b-tool', count: 2 }, { value: 'c-tool', count: 1 }], filter || 'hourly counts')
  }
})
