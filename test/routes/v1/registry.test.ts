import t from 'tap'
import { createServer, type Server } from 'node:http'
import { buildTestApp, newUser, randomId, sendEvent, shipped } from '../../helpers/app.ts'

// A local x402 upstream whose behaviour each test sets: never the internet.
let mode: 'ok' | 'slow' | 'fail' | 'malformed' = 'ok'
let hits = 0
const upstream: Server = createServer((req, res) => {
  hits++
  if (mode === 'fail') return void res.writeHead(500).end('boom')
  if (mode === 'malformed') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"topSellers": 5')
  const body = JSON.stringify({ topSellers: [{ seller: 's1', volume: 10 }], recentTransfers: [{ tx: 'abc' }], facilitator: { name: 'f' }, extra: 'dropped' })
  if (mode === 'slow') return void setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(body), 1500)
  res.writeHead(200, { 'content-type': 'application/json' }).end(body)
})
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { upstream.closeAllConnections(); upstream.close(() => resolve()) }))
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`

const app = await buildTestApp(t, {
  X402_BASE_URL: `${upstreamUrl}/base`,
  X402_SOLANA_URL: `${upstreamUrl}/solana`,
  X402_TIMEOUT_MS: '300',
  X402_CACHE_SECONDS: '1',
  CORS_ORIGINS: 'https://dash.example,https://app.example',
  // Wide enough that 30 concurrent reads on a loaded machine fall in one cache lifetime.
  PROFILE_KPIS_CACHE_SECONDS: '3',
})

/** Public agents whose names carry a token no other test uses, so listings can be scoped by search. */
async function importAgents (token: string, n: number, extra: (i: number) => Record<string, unknown> = () => ({})) {
  const ids: string[] = []
  for (let i = 0; i < n; i++) {
    await app.registry.upsert({
      registryId: randomId('reg-'), snsName: `${token}-${i}.sol`, reputationScore: i * 10,
      enriched: { name: `Agent ${token} ${i}`, description: `does things ${token}`, capabilities: ['swap'], profiled: i % 2 === 0, secretField: 'x' },
      metadata: { agentUri: `https://example.org/${i}`, feedback_count: i, privateNote: 'hidden' },
      ...extra(i),
    })
  }
  const { rows } = await app.db.query('SELECT id FROM agents WHERE sns_name LIKE $1 ORDER BY reputation_score DESC', [`${token}-%`])
  for (const r of rows) ids.push(r.id)
  return ids
}

const LISTING_KEYS = ['displayName', 'enriched', 'id', 'lastSeenAt', 'metadata', 'registryId', 'reputationScore', 'snsName', 'source']

t.test('GET /v1/agents lists public, live agents with the listing fields only', async (t) => {
  const token = randomId('tok')
  const ids = await importAgents(token, 5)
  const user = await newUser(app)
  await sendEvent(app, (await user.createKey()).secret, { agentId: `private ${token}` })
  await app.db.query('UPDATE agents SET deleted_at = now() WHERE id = $1', [ids[4]])

  const res = await app.inject({ url: `/v1/agents?search=${token.toUpperCase()}&unknownParam=1` })
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.equal(body.total, 4, 'the private and the deleted agents are not listed')
  t.equal(body.offset, 0)
  t.same(body.agents.map((a: { id: string }) => a.id), ids.slice(0, 4), 'highest reputation first')
  for (const a of body.agents) {
    t.same(Object.keys(a).sort(), LISTING_KEYS)
    t.same(Object.keys(a.metadata).sort(), ['agentUri', 'feedback_count'])
    t.same(Object.keys(a.enriched).sort(), ['capabilities', 'description', 'image', 'name', 'profiled'])
  }
  const identified = await app.inject({ url: `/v1/agents?search=${token}&filter=identified` })
  t.ok(identified.json().agents.every((a: { enriched: { profiled: boolean } }) => a.enriched.profiled))
  t.equal(identified.json().total, 2)
  const unknown = await app.inject({ url: `/v1/agents?search=${token}&filter=unknown` })
  t.equal(unknown.json().total, 2)
  const page = await app.inject({ url: `/v1/agents?search=${token}&limit=2&offset=2` })
  t.same(page.json().agents.map((a: { id: string }) => a.id), ids.slice(2, 4))
  t.equal(page.json().total, 4)
  t.equal(page.json().offset, 2)
  const past = await app.inject({ url: `/v1/agents?search=${token}&offset=50` })
  t.same(past.json(), { agents: [], total: 4, offset: 50 })
  const bySns = await app.inject({ url: `/v1/agents?search=${token}-1.sol` })
  t.equal(bySns.json().total, 1)
  const wildcard = await app.inject({ url: `/v1/agents?search=${encodeURIComponent('%_')}` })
  t.equal(wildcard.statusCode, 200, 'LIKE wildcards in a search are literal')
})

t.test('GET /v1/agents refuses bad parameters with 400 details', async (t) => {
  for (const q of ['limit=0', 'limit=101', 'limit=abc', 'offset=-1', 'filter=bogus', `search=${'x'.repeat(101)}`]) {
    const res = await app.inject({ url: `/v1/agents?${q}` })
    t.equal(res.statusCode, 400, q)
    t.equal(res.json().error, 'validation_failed')
    t.ok(res.json().details.length > 0)
  }
  const defaults = await app.inject({ url: '/v1/agents' })
  t.equal(defaults.statusCode, 200)
  t.ok(defaults.json().agents.length <= 20, 'default limit 20')
})

t.test('a public profile read many times costs the engine one KPI query per PROFILE_KPIS_CACHE_SECONDS, and shows new events after it', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const name = randomId('kpi-')
  const first = await sendEvent(app, key.secret, { agentId: name })
  await shipped(app)
  const agentId = first.json().agentId
  await app.db.query('UPDATE agents SET is_public = true WHERE id = $1', [agentId])
  // The real query runs; the repository only counts how often it is asked.
  let queries = 0
  const agentKpis = app.publicEvents.agentKpis.bind(app.publicEvents)
  app.publicEvents.agentKpis = (agent) => { queries++; return agentKpis(agent) }
  t.teardown(() => { app.publicEvents.agentKpis = agentKpis })
  const read = async () => (await app.inject({ url: `/v1/agents/${agentId}` })).json().kpis.eventCount as number
  const counts = await Promise.all(Array.from({ length: 30 }, read))
  t.same(new Set(counts), new Set([1]), 'every read answers the KPIs')
  t.equal(queries, 1, '30 reads, one engine query')

  await sendEvent(app, key.secret, { agentId: name })
  await shipped(app)
  await new Promise((resolve) => setTimeout(resolve, 3100)) // PROFILE_KPIS_CACHE_SECONDS (3) later
  t.equal(await read(), 2, 'the new event is counted once the cached KPIs expire')
  t.equal(queries, 2)
  await app.db.query('UPDATE agents SET is_public = false WHERE id = $1', [agentId])
  t.equal((await app.inject({ url: `/v1/agents/${agentId}` })).statusCode, 404, 'an agent made private is not found at once, cached KPIs or not')
})

t.test('with Redis unreachable, a public profile still answers its KPIs, from ClickHouse', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const sent = await sendEvent(app, key.secret, { agentId: randomId('noredis-') })
  await shipped(app)
  const agentId = sent.json().agentId
  await app.db.query('UPDATE agents SET is_public = true WHERE id = $1', [agentId])
  // A second instance of the service whose Redis connection is gone.
  const lonely = await buildTestApp(t, {})
  lonely.redis.disconnect()
  const res = await lonely.inject({ url: `/v1/agents/${agentId}` })
  t.equal(res.statusCode, 200)
  t.equal(res.json().kpis.eventCount, 1, 'the KPIs, read without the cache')
})

t.test('GET /v1/agents/:identifier by cuid, snsName or registryId, with KPIs; 404 otherwise', async (t) => {
  const token = randomId('prof')
  const [id] = await importAgents(token, 1)
  const { rows } = await app.db.query('SELECT registry_id, sns_name FROM agents WHERE id = $1', [id])
  for (const ident of [id, rows[0].sns_name, rows[0].registry_id]) {
    const res = await app.inject({ url: `/v1/agents/${encodeURIComponent(ident)}` })
    t.equal(res.statusCode, 200, ident)
    t.equal(res.json().id, id)
    t.same(res.json().kpis, { eventCount: 0, lastActivityAt: null, reputationScore: 0 })
  }
  // An ingested agent its owner made public: KPIs count its events; content never shows.
  const user = await newUser(app)
  const key = await user.createKey()
  const name = randomId('pub-')
  const sent = await sendEvent(app, key.secret, { agentId: name, reasoning: 'SECRET-REASONING', timestamp: '2026-01-02T03:04:05Z' })
  await sendEvent(app, key.secret, { agentId: name, timestamp: '2026-01-01T00:00:00Z' })
  await shipped(app)
  const agentId = sent.json().agentId
  t.equal((await app.inject({ url: `/v1/agents/${agentId}` })).statusCode, 404, 'private agents are not found')
  await app.db.query('UPDATE agents SET is_public = true WHERE id = $1', [agentId])
  const pub = await app.inject({ url: `/v1/agents/${agentId}` })
  t.equal(pub.statusCode, 200)
  t.same(pub.json().kpis, { eventCount: 2, lastActivityAt: '2026-01-02T03:04:05.000Z', reputationScore: null })
  t.notOk(pub.body.includes('SECRET-REASONING'))
  t.notOk(pub.body.includes(user.id), 'no owner id')
  await app.db.query('UPDATE agents SET deleted_at = now() WHERE id = $1', [agentId])
  t.equal((await app.inject({ url: `/v1/agents/${agentId}` })).statusCode, 404, 'deleted agents are not found')
  t.equal((await app.inject({ url: '/v1/agents/nothing-here' })).statusCode, 404)
  t.same((await app.inject({ url: '/v1/agents/nothing-here' })).json(), { error: 'not_found' })
})

t.test('GET /v1/stats counts public agents and events of the last 24 h, cached briefly', async (t) => {
  const first = await app.inject({ url: '/v1/stats' })
  t.equal(first.statusCode, 200)
  const s = first.json()
  t.match(s, { agents: { total: Number, identified: Number, unknown: Number }, events24h: Number, lastUpdated: String })
  t.equal(s.agents.total, s.agents.identified + s.agents.unknown)
  await importAgents(randomId('stat'), 2)
  const cached = await app.inject({ url: '/v1/stats' })
  t.equal(cached.json().lastUpdated, s.lastUpdated, 'served from the cache within its lifetime')
  await app.redis.del(`${app.redisPrefix}cache:stats`)
  const fresh = (await app.inject({ url: '/v1/stats' })).json()
  t.equal(fresh.agents.total, s.agents.total + 2)
  t.equal(fresh.agents.identified, s.agents.identified + 1)
  const user = await newUser(app)
  const key = await user.createKey()
  await sendEvent(app, key.secret, { agentId: 'counted' })
  await sendEvent(app, key.secret, { agentId: 'old', timestamp: '2020-01-01T00:00:00Z' })
  await shipped(app)
  await app.redis.del(`${app.redisPrefix}cache:stats`)
  const after = (await app.inject({ url: '/v1/stats' })).json()
  t.ok(after.events24h >= fresh.events24h + 1, 'a new event counts; old ones do not need to')
})

t.test('GET /v1/explorer: top agents, collections, activity without content, payment statistics', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const name = randomId('trader-')
  const first = await sendEvent(app, key.secret, { agentId: name, type: 'tx', toolExecuted: 'swap', outcome: 'success', amount: { token: 'SOLX', value: 2.5 }, reasoning: 'SECRET-EXPLORER' })
  await sendEvent(app, key.secret, { agentId: name, type: 'tx', amount: { token: 'SOLX', value: 1.5 }, timestamp: new Date(Date.now() - 3 * 86_400_000).toISOString() })
  await shipped(app)
  await app.db.query('UPDATE agents SET is_public = true, last_seen_at = now() WHERE id = $1', [first.json().agentId])
  await app.redis.del(`${app.redisPrefix}cache:explorer`)
  const res = await app.inject({ url: '/v1/explorer' })
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.ok(Array.isArray(body.topAgents) && Array.isArray(body.collections))
  const mine = body.recentActivity.filter((a: { agentId: string }) => a.agentId === first.json().agentId)
  t.equal(mine.length, 2)
  t.same(Object.keys(mine[0]).sort(), ['agentId', 'at', 'displayName', 'outcome', 'snsName', 'tool', 'type'])
  const solx = body.payments.byToken.find((p: { token: string }) => p.token === 'SOLX')
  t.same(solx, { token: 'SOLX', count24h: 1, amount24h: 2.5, count7d: 2, amount7d: 4 })
  t.notOk(res.body.includes('SECRET-EXPLORER'))
})

t.test('GET /v1/x402: fresh, cached, stale with an age when the upstream fails, 502 with nothing cached', async (t) => {
  mode = 'ok'
  hits = 0
  await app.redis.del(`${app.redisPrefix}cache:x402:base`, `${app.redisPrefix}cache:x402:solana`)
  const fresh = await app.inject({ url: '/v1/x402' })
  t.equal(fresh.statusCode, 200)
  t.match(fresh.json().chains.base, { status: 'fresh', ageSeconds: 0, topSellers: [{ seller: 's1' }], recentTransfers: [{ tx: 'abc' }], facilitator: { name: 'f' } })
  t.notOk('extra' in fresh.json().chains.base, 'only the three documented parts are passed on')
  t.equal(hits, 2, 'one request per chain')
  await app.inject({ url: '/v1/x402' })
  t.equal(hits, 2, 'within the freshness window the cache answers')

  await new Promise((resolve) => setTimeout(resolve, 1100))
  mode = 'fail'
  const stale = await app.inject({ url: '/v1/x402' })
  t.equal(stale.statusCode, 200)
  t.equal(stale.json().chains.base.status, 'stale')
  t.ok(stale.json().chains.base.ageSeconds >= 1)

  mode = 'slow'
  const slow = await app.inject({ url: '/v1/x402' })
  t.equal(slow.json().chains.solana.status, 'stale', 'a slow upstream times out and the stale copy is served')

  await app.redis.del(`${app.redisPrefix}cache:x402:base`, `${app.redisPrefix}cache:x402:solana`)
  for (const m of ['fail', 'malformed', 'slow'] as const) {
    mode = m
    const res = await app.inject({ url: '/v1/x402' })
    t.equal(res.statusCode, 502, m)
    t.equal(res.json().error, 'upstream_unavailable')
    t.match(res.json().details, [{ path: ['chains', 'base'], message: /upstream/ }, { path: ['chains', 'solana'], message: /upstream/ }])
  }
  mode = 'ok'
})

t.test('GET /v1/x402 without upstreams is a 503 saying so', async (t) => {
  const bare = await buildTestApp(t)
  const res = await bare.inject({ url: '/v1/x402' })
  t.equal(res.statusCode, 503)
  t.equal(res.json().error, 'x402_not_configured')
})

t.test('POST /v1/waitlist: validated, one row per address, 5 per hour per client address', async (t) => {
  const email = `${randomId('w')}@Example.org`
  const ip = '10.0.0.1'
  const post = (payload: unknown, remoteAddress = ip, headers: Record<string, string> = {}) =>
    app.inject({ method: 'POST', url: '/v1/waitlist', payload: payload as object, remoteAddress, headers })
  const ok = await post({ email, source: 'landing', metadata: { ref: 'x' } })
  t.equal(ok.statusCode, 200)
  t.same(ok.json(), { ok: true })
  t.equal((await post({ email: email.toLowerCase() })).statusCode, 200)
  const { rows } = await app.db.query('SELECT count(*)::int AS n FROM waitlist WHERE lower(email) = lower($1)', [email])
  t.equal(rows[0].n, 1, 'the same address twice stores one row')
  const bad = await post({ email: 'not-an-email' })
  t.equal(bad.statusCode, 400)
  t.same(bad.json().details[0].path, ['email'])
  t.equal((await post({ email, extra: 1 })).statusCode, 400)
  const sixth = await post({ email })
  t.equal(sixth.statusCode, 200, 'the fifth request of the hour')
  const limited = await post({ email })
  t.equal(limited.statusCode, 429)
  t.same(limited.json(), { error: 'rate_limited' })
  t.match(limited.headers['retry-after'], /^[1-9]\d*$/)
  t.equal((await post({ email }, '10.0.0.2')).statusCode, 200, 'another address has its own budget')
  const spoofed = await post({ email }, ip, { 'x-forwarded-for': '10.9.9.9' })
  t.equal(spoofed.statusCode, 429, 'a forwarding header is ignored unless TRUST_PROXY is set')
})

t.test('TRUST_PROXY takes the client address from X-Forwarded-For', async (t) => {
  const proxied = await buildTestApp(t, { TRUST_PROXY: 'true' })
  const post = (xff: string) => proxied.inject({ method: 'POST', url: '/v1/waitlist', payload: { email: `${randomId('p')}@example.org` }, remoteAddress: '10.1.1.1', headers: { 'x-forwarded-for': xff } })
  for (let i = 0; i < 5; i++) t.equal((await post('203.0.113.7')).statusCode, 200)
  t.equal((await post('203.0.113.7')).statusCode, 429)
  t.equal((await post('203.0.113.8')).statusCode, 200)
})

t.test('CORS: the dashboard origins get headers and preflight answers on /v1 routes; others get none', async (t) => {
  for (const url of ['/v1/events', '/v1/me/keys', '/v1/agents']) {
    const pre = await app.inject({ method: 'OPTIONS', url, headers: { origin: 'https://dash.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' } })
    t.equal(pre.statusCode, 204, url)
    t.equal(pre.headers['access-control-allow-origin'], 'https://dash.example')
    t.match(String(pre.headers['access-control-allow-headers']).toLowerCase(), /authorization/)
    const evil = await app.inject({ method: 'OPTIONS', url, headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } })
    t.notOk(evil.headers['access-control-allow-origin'], `no CORS for other origins on ${url}`)
  }
  const get = await app.inject({ url: '/v1/stats', headers: { origin: 'https://app.example' } })
  t.equal(get.headers['access-control-allow-origin'], 'https://app.example')
  const other = await app.inject({ url: '/v1/stats', headers: { origin: 'https://evil.example' } })
  t.notOk(other.headers['access-control-allow-origin'])
})

t.test('no public response carries a private field or any event content', async (t) => {
  const marker = randomId('LEAK')
  const user = await newUser(app)
  const key = await user.createKey()
  const sent = await sendEvent(app, key.secret, {
    agentId: `leaky-${marker}`, type: 'tx', amount: { token: 'LEAK', value: 1 }, toolExecuted: 'swap',
    input: { prompt: `${marker}-prompt`, context: { k: marker } }, reasoning: `${marker}-reasoning`, errorMessage: `${marker}-error`,
    transaction: `${marker}-tx`, metadata: { cwd: `/home/${marker}`, git: { branch: marker }, sessionId: `${marker}-s`, traceId: `${marker}-t`, note: marker },
  })
  const agentId = sent.json().agentId
  await shipped(app)
  await app.db.query(`UPDATE agents SET is_public = true, sns_name = $2, registry_id = $3, owner_wallet = 'wallet-${marker}', metadata = $4, enriched = $5 WHERE id = $1`,
    [agentId, `${marker.toLowerCase()}.sol`, `reg-${marker}`, { agentUri: 'https://a.example', privateNote: marker }, { name: 'Leaky', profiled: true, internal: marker }])
  await app.redis.del(`${app.redisPrefix}cache:explorer`, `${app.redisPrefix}cache:stats`)
  const forbidden = new Set(['ownerId', 'owner_id', 'ownerWallet', 'owner_wallet', 'userId', 'user_id', 'privyId', 'email', 'secret', 'keyPrefix',
    'input', 'prompt', 'reasoning', 'errorMessage', 'error_message', 'transaction', 'cwd', 'git', 'sessionId', 'traceId', 'privateNote', 'internal', 'deletedAt', 'isPublic'])
  const walk = (value: unknown, path: string) => {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, `${path}[${i}]`))
    else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        t.notOk(forbidden.has(k), `${path}.${k} is not a private field`)
        walk(v, `${path}.${k}`)
      }
    }
  }
  // The reads that show this agent must show it (a 404 or an empty list would leak nothing and prove nothing).
  const showsAgent: Record<string, (body: any) => boolean> = {
    [`/v1/agents?search=leaky-${marker}`]: (body) => body.agents.some((a: { id: string }) => a.id === agentId),
    [`/v1/agents/${agentId}`]: (body) => body.id === agentId,
    [`/v1/agents/reg-${marker}`]: (body) => body.id === agentId,
  }
  for (const url of ['/v1/stats', '/v1/explorer', `/v1/agents?search=leaky-${marker}`, `/v1/agents/${agentId}`, `/v1/agents/reg-${marker}`, '/v1/x402', '/health']) {
    const res = await app.inject({ url })
    t.equal(res.statusCode, 200, `${url} answers`)
    if (showsAgent[url]) t.ok(showsAgent[url](res.json()), `${url} shows the agent`)
    walk(res.json(), url)
    const leaked = res.body.replaceAll(`leaky-${marker}`, '').replaceAll(`reg-${marker}`, '').replaceAll(`${marker.toLowerCase()}.sol`, '')
    t.notOk(leaked.includes(marker), `${url} carries no event content or private value`)
  }
  const listing = await app.inject({ url: `/v1/agents?search=leaky-${marker}` })
  t.equal(listing.json().total, 1, 'the agent is public and listed')
})
