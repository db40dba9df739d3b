import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { encodeCursor, pageStart } from '../../../../src/domain/cursor.ts'
import { acceptedBatch, buildTestApp, newUser, sendEvent, shipped, type TestUser } from '../../../helpers/app.ts'

const DAY = 86_400_000

t.test('cursors: a round trip, and anything another list or nobody handed out is refused', async (t) => {
  const c = encodeCursor('events', 1_700_000_000_000, { ms: 1_699_999_999_000, id: 'evt_x' })
  t.same(pageStart('events', c, 5), { asOf: 1_700_000_000_000, after: { ms: 1_699_999_999_000, id: 'evt_x' } })
  t.same(pageStart('events', undefined, 5), { asOf: 5, after: null }, 'no cursor starts a walk now')
  t.equal(pageStart('sessions', c, 5), null, 'a cursor of another list')
  const nul = { ms: 1_699_999_999_000, id: 'a\u0000b' }
  t.equal(pageStart('agents', encodeCursor('agents', 1_700_000_000_000, nul), 5), null, 'an id with a control character on a list of the service\'s ids')
  t.same(pageStart('sessions', encodeCursor('sessions', 1_700_000_000_000, nul), 5), { asOf: 1_700_000_000_000, after: nul }, 'a session id may hold one (ingestion takes it)')
  for (const bad of ['x', '!!!', Buffer.from('[1,2]').toString('base64url'), Buffer.from('["events",-1,0,"a"]').toString('base64url'),
    Buffer.from('{"a":1}').toString('base64url'), 'A'.repeat(600)]) {
    t.equal(pageStart('events', bad, 5), null, `refused: ${bad.slice(0, 20)}`)
  }
})

/** Ordered by creation time, newest first, then id descending: the agents' and alerts' paging order. */
function newestFirst (rows: Record<string, any>[]): boolean {
  return rows.every((r, i) => {
    if (i === 0) return true
    const prev = rows[i - 1]!
    const [a, b] = [Date.parse(prev.createdAt), Date.parse(r.createdAt)]
    return a > b || (a === b && prev.id > r.id)
  })
}

/** Follows nextCursor from the first page to the last; returns every page's body. */
async function walk (app: FastifyInstance, user: TestUser, path: string, key: string): Promise<Record<string, any>[][]> {
  const pages: Record<string, any>[][] = []
  let cursor: string | null = null
  do {
    const sep = path.includes('?') ? '&' : '?'
    const res: { statusCode: number; body: string; json(): any } = await app.inject({ method: 'GET', url: cursor ? `${path}${sep}cursor=${cursor}` : path, headers: user.auth })
    if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${res.body}`)
    const body: Record<string, any> = res.json()
    pages.push(body[key])
    cursor = body.nextCursor
    if (pages.length > 200) throw new Error('the walk does not end')
  } while (cursor)
  return pages
}

t.test('paging walks a 5,000-event history exactly once while new events stream in', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app, { burst: 1_000_000 })
  const { secret } = await user.createKey()
  const now = Date.now()
  // Ties on purpose: 5,000 events over 100 distinct instants, so pages split runs of equal timestamps.
  const history: string[] = []
  for (let b = 0; b < 10; b++) {
    const events = Array.from({ length: 500 }, (_, i) => ({
      agentId: `pager-${(b * 500 + i) % 3}`,
      type: 'decision',
      timestamp: new Date(now - DAY - ((b * 500 + i) % 100) * 60_000).toISOString(),
      metadata: { sessionId: `s-${(b * 500 + i) % 40}`, traceId: `tr-${(b * 500 + i) % 40}` },
    }))
    history.push(...(await acceptedBatch(app, secret, events)).map((r) => r.eventId))
  }
  await shipped(app)

  // While the walks run, more events arrive: newer ones, ones in the middle of the walked range, and
  // ones extending the sessions and traces being walked (which moves their last activity).
  let streaming = true
  const streamed: string[] = []
  const stream = (async () => {
    // eslint-disable-next-line no-unmodified-loop-condition -- another task changes it
    for (let i = 0; streaming; i++) {
      const mid = new Date(now - DAY - (i % 100) * 60_000).toISOString()
      const res = await sendEvent(app, secret, { agentId: 'pager-0', type: 'decision', timestamp: i % 2 ? mid : undefined, metadata: { sessionId: `s-${i % 40}`, traceId: `tr-${i % 40}` } })
      if (res.statusCode !== 202) throw new Error(`stream: ${res.statusCode} ${res.body}`)
      streamed.push(res.json().eventId)
    }
  })()

  const pages = await walk(app, user, '/v1/me/events?since=all&limit=450', 'events')
  const seen = pages.flat().map((e) => e.eventId as string)
  t.equal(new Set(seen).size, seen.length, 'no event twice')
  const seenSet = new Set(seen)
  t.equal(history.filter((id) => seenSet.has(id)).length, 5000, 'every event of the history once')
  t.ok(pages.length >= 12, `several pages (${pages.length})`)
  t.ok(pages.slice(0, -1).every((p) => p.length === 450), 'every page but the last is full')
  const order = pages.flat().map((e) => [Date.parse(e.timestamp), e.eventId] as const)
  t.ok(order.every((k, i) => i === 0 || k[0] < order[i - 1]![0] || (k[0] === order[i - 1]![0] && k[1] < order[i - 1]![1])), 'newest first across pages')

  const sessions = (await walk(app, user, '/v1/me/sessions?limit=7', 'sessions')).flat().map((s) => s.sessionId)
  t.equal(sessions.length, 40, 'every session once, though their last activity moved during the walk')
  t.equal(new Set(sessions).size, 40)
  const traces = (await walk(app, user, '/v1/me/traces?since=all&limit=6', 'traces')).flat().map((s) => s.traceId)
  t.same([...traces].sort(), Array.from({ length: 40 }, (_, i) => `tr-${i}`).sort(), 'every trace once')

  streaming = false
  await stream
  t.ok(streamed.length > 0, `events streamed during the walks (${streamed.length})`)
  await shipped(app)
  const fresh = await walk(app, user, '/v1/me/events?since=all&limit=1000', 'events')
  t.equal(fresh.flat().length, 5000 + streamed.length, 'a new walk sees the events that arrived during the old one')
})

t.test('agents and alerts page in creation order; limit, the last page and bad cursors', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app, { burst: 1_000 })
  const { secret } = await user.createKey()
  const agentIds: string[] = []
  for (let i = 0; i < 12; i++) {
    const res = await sendEvent(app, secret, { agentId: `paged-agent-${i}`, type: 'decision' })
    t.equal(res.statusCode, 202)
    agentIds.push(res.json().agentId)
  }
  const agents = await walk(app, user, '/v1/me/agents?limit=5', 'agents')
  t.same(agents.map((p) => p.length), [5, 5, 2])
  t.same(agents.flat().map((a) => a.id).sort(), [...agentIds].sort(), 'each agent once')
  t.ok(newestFirst(agents.flat()), 'newest first (agents created in the same millisecond by id, descending)')
  t.ok(agents.flat().every((a) => typeof a.kpis?.events24h === 'number'), 'KPIs on every page')

  const alertIds: string[] = []
  for (let i = 0; i < 9; i++) {
    alertIds.push((await app.alerts.raise({ userId: user.id, agentId: agentIds[i % 3]!, rule: `regression:${i}`, severity: 'warning', message: `m${i}`, figures: {} })).id)
  }
  const alerts = await walk(app, user, '/v1/me/alerts?limit=4&count=true', 'alerts')
  t.same(alerts.map((p) => p.length), [4, 4, 1])
  t.same(alerts.flat().map((a) => a.id).sort(), [...alertIds].sort(), 'each alert once')
  t.ok(newestFirst(alerts.flat()), 'newest first (alerts raised in the same millisecond by id, descending)')

  const events = await app.inject({ method: 'GET', url: '/v1/me/events?limit=3', headers: user.auth })
  const cursor = events.json().nextCursor
  t.type(cursor, 'string')
  for (const [url, what] of [
    [`/v1/me/sessions?cursor=${cursor}`, 'an events cursor on sessions'],
    ['/v1/me/events?cursor=garbage', 'garbage'],
    ['/v1/me/agents?cursor=%21%21', 'not base64url'],
    ['/v1/me/alerts?cursor=e30', 'an object'],
  ] as const) {
    const res = await app.inject({ method: 'GET', url, headers: user.auth })
    t.equal(res.statusCode, 400, what)
    t.equal(res.json().error, 'invalid_cursor', what)
  }
  // An id no row of the list can have (a NUL: the ids of agents and alerts are the service's own)
  // was not handed out: invalid_cursor, not invalid_text from the store.
  for (const list of ['agents', 'alerts'] as const) {
    const nul = encodeCursor(list, Date.now(), { ms: Date.now(), id: 'a\u0000b' })
    const res = await app.inject({ method: 'GET', url: `/v1/me/${list}?cursor=${nul}`, headers: user.auth })
    t.equal(res.statusCode, 400, `${list}: a NUL in the cursor's id`)
    t.equal(res.json().error, 'invalid_cursor', `${list}: a NUL in the cursor's id`)
  }
  const other = await newUser(app)
  const foreign = await app.inject({ method: 'GET', url: `/v1/me/events?cursor=${cursor}`, headers: other.auth })
  t.equal(foreign.statusCode, 200, "another user's cursor only positions a walk over the caller's own rows")
  t.same(foreign.json().events, [])
})
