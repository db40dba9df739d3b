import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, newUser, randomId, sendEvent, shipped, type TestUser } from '../../helpers/app.ts'

// The ingest contract (README "Ingestion"): a 202 means the event is synced to the instance's ingest
// log; the shipper puts it in ClickHouse exactly once, whether ClickHouse is up or not.

async function storedCount (app: FastifyInstance, userId: string): Promise<{ n: number; distinct: number; spend: number }> {
  const rs = await app.clickhouse.query({
    query: `SELECT count() AS n, uniqExact(event_id) AS distinct,
              (SELECT sum(events) FROM spend_daily WHERE user_id = {u:String}) AS spend
            FROM events WHERE user_id = {u:String}`,
    query_params: { u: userId },
    format: 'JSONEachRow',
  })
  const row = (await rs.json<Record<string, string>>())[0]!
  return { n: Number(row.n), distinct: Number(row.distinct), spend: Number(row.spend) }
}

const health = async (app: FastifyInstance) => (await app.inject({ url: '/health' })).json()

/** Takes the events table away, as an outage of the store would, until the returned function puts it back. */
async function breakClickHouse (app: FastifyInstance, t: { teardown(fn: () => unknown): void }): Promise<() => Promise<void>> {
  await app.clickhouse.command({ query: 'RENAME TABLE events TO events_away' })
  let restored = false
  const restore = async () => {
    if (!restored) await app.clickhouse.command({ query: 'RENAME TABLE events_away TO events' })
    restored = true
  }
  t.teardown(restore)
  return restore
}

t.test('ClickHouse refusing inserts for seconds under load: every event gets a 202 and is stored exactly once after', async (t) => {
  const app = await buildTestApp(t, { INGEST_DEGRADED_AFTER_MS: '1000' })
  const user = await newUser(app, { tier: 'enterprise', burst: 1_000_000 })
  const key = await user.createKey()
  const restore = await breakClickHouse(app, t)
  const statuses = new Map<number, number>()
  const accepted = new Set<string>()
  const until = Date.now() + 2500
  await Promise.all(Array.from({ length: 8 }, async (_, c) => {
    for (let i = 0; Date.now() < until; i++) {
      const res = await sendEvent(app, key.secret, { agentId: `outage-${c % 2}`, reasoning: `client ${c} event ${i}`, outcome: i % 4 ? 'success' : 'failed' })
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
      if (res.statusCode === 202) accepted.add(res.json().eventId)
    }
  }))
  t.same([...statuses.keys()], [202], `only 202s during the outage (${accepted.size} events)`)
  t.ok(accepted.size > 50)
  const during = await health(app)
  t.equal(during.status, 'degraded', 'health turns degraded while the backlog ages')
  t.equal(during.ingest.backlogRows, accepted.size, 'the backlog holds every acknowledged event')
  t.ok(during.ingest.oldestAgeMs >= 1000)
  t.match(during.ingest.insertsFailing, { attempts: Number, code: 'UNKNOWN_TABLE' }, 'the kind of failure, not its message')
  t.notOk(JSON.stringify(during).includes('events_away'), 'no internals on the public health route')

  await restore()
  await shipped(app, 20_000)
  const stored = await storedCount(app, user.id)
  t.equal(stored.n, accepted.size, 'every acknowledged event is stored')
  t.equal(stored.distinct, accepted.size, 'none twice')
  t.equal(stored.spend, accepted.size, 'the spend rollup counts each once')
  const after = await health(app)
  t.equal(after.status, 'ok')
  t.equal(after.ingest.backlogRows, 0)
  t.equal(after.ingest.insertsFailing, null)
  const events = (await app.inject({ url: '/v1/me/events?since=all&limit=1000', headers: user.auth })).json().events
  t.equal(events.length, Math.min(accepted.size, 1000), 'and readable (one page of at most 1000)')
  t.ok(events.every((e: { eventId: string }) => accepted.has(e.eventId)))
})

t.test('a full ingest log answers 503 with Retry-After, and accepts again once drained', async (t) => {
  const app = await buildTestApp(t, { INGEST_LOG_MAX_BYTES: '65536' })
  const user = await newUser(app, { tier: 'enterprise', burst: 1_000_000 })
  const key = await user.createKey()
  const restore = await breakClickHouse(app, t)
  let refused
  let accepted = 0
  for (let i = 0; i < 2000 && !refused; i++) {
    const res = await sendEvent(app, key.secret, { agentId: 'full', reasoning: 'x'.repeat(200) })
    if (res.statusCode === 202) accepted++
    else refused = res
  }
  t.ok(refused, `refused after ${accepted} events`)
  t.equal(refused!.statusCode, 503)
  t.match(refused!.json(), { error: 'unavailable', reason: 'ingest_log_full' })
  t.match(refused!.headers['retry-after'], /^\d+$/)
  const batch = await app.inject({ method: 'POST', url: '/v1/events/batch', headers: { authorization: `Bearer ${key.secret}` }, payload: { events: [{ agentId: 'full' }] } })
  t.equal(batch.statusCode, 503, 'the batch endpoint too')
  await restore()
  await shipped(app, 20_000)
  t.equal((await sendEvent(app, key.secret, { agentId: 'full' })).statusCode, 202, 'accepted again')
  await shipped(app)
  t.equal((await storedCount(app, user.id)).n, accepted + 1)
})

t.test('read-your-writes with a slow shipper: every /v1/me read after a 202 includes the event', async (t) => {
  const app = await buildTestApp(t, { INGEST_SHIP_MIN_INTERVAL_MS: '5000' })
  const user = await newUser(app)
  const key = await user.createKey()
  const get = (u: TestUser, url: string) => app.inject({ url, headers: u.auth })
  const session = randomId('ryw-s-')
  const trace = randomId('ryw-t-')
  // The first event ships at once; the shipper then pauses, so the next one waits in the log.
  await sendEvent(app, key.secret, { agentId: 'ryw-warmup' })
  const res = await sendEvent(app, key.secret, { agentId: 'ryw', type: 'error', errorMessage: 'ryw failure', model: 'gpt-4o', metadata: { sessionId: session, traceId: trace, tokensBreakdown: { output: 1000 } } })
  t.equal(res.statusCode, 202)
  const ack = res.json()
  t.equal(await app.events.getRow(user.id, ack.eventId), null, 'not yet in ClickHouse when the 202 is back')
  t.equal((await get(user, '/v1/me/events')).json().events[0].eventId, ack.eventId, 'events')
  t.equal((await get(user, `/v1/me/sessions/${session}`)).json().events[0].eventId, ack.eventId, 'session')
  t.ok((await get(user, '/v1/me/sessions')).json().sessions.some((s: { sessionId: string }) => s.sessionId === session), 'sessions list')
  t.equal((await get(user, `/v1/me/traces/${trace}`)).json().spans[0].eventId, ack.eventId, 'trace')
  t.ok((await get(user, '/v1/me/traces')).json().traces.some((x: { traceId: string }) => x.traceId === trace), 'traces list')
  t.equal((await get(user, '/v1/me/errors')).json().clusters[0].count, 1, 'error cluster')
  t.equal((await get(user, '/v1/me/spend-summary')).json().total.costUsd, 0.01, 'spend summary')
  t.equal((await get(user, `/v1/me/agents/${ack.agentId}`)).json().kpis.events24h, 1, 'agent profile KPIs')
  t.ok((await get(user, '/v1/me/agents')).json().agents.some((a: { id: string }) => a.id === ack.agentId), 'agents list')
  // A second event, read through the list of agents first: every read waits, not only the first.
  const second = (await sendEvent(app, key.secret, { agentId: 'ryw', metadata: { sessionId: session } })).json()
  t.equal((await get(user, `/v1/me/sessions/${session}`)).json().events.length, 2, 'session after a second 202')
  t.ok(await app.events.getRow(user.id, second.eventId))
  // Another user reads while this user's third event waits in the log: that read neither waits for
  // it nor has it shipped. An event sent while the shipper is idle ships at once, and the shipper then
  // pauses 5 s unless a read waits for it: the third event is sent in that pause.
  const other = await newUser(app)
  const warm = (await sendEvent(app, key.secret, { agentId: 'ryw-warmup' })).json()
  while (!(await app.events.getRow(user.id, warm.eventId))) await new Promise((resolve) => setTimeout(resolve, 10))
  const third = (await sendEvent(app, key.secret, { agentId: 'ryw' })).json()
  t.equal((await get(other, '/v1/me/events')).statusCode, 200)
  t.equal(await app.events.getRow(user.id, third.eventId), null, 'another user\'s read does not wait for this user\'s events')
  t.equal((await get(user, `/v1/me/sessions/${session}`)).statusCode, 200)
  t.ok(await app.events.getRow(user.id, third.eventId), 'this user\'s next read does')
})
