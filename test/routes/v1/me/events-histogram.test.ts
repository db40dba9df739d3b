import t from 'tap'
import { buildTestApp, newUser, sendBatch, shipped } from '../../../helpers/app.ts'

// GET /v1/me/events/histogram (docs/api.md): the matching events per interval of event time, the
// filters of the lists, the caller's events only; what the overview's "events per minute" draws.

const MINUTE = 60_000

t.test('counts per interval equal a count of the events sent, under filters, for the caller only', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app, { burst: 1_000_000 })
  const other = await newUser(app, { burst: 1_000_000 })
  const { secret } = await user.createKey()
  const otherKey = await other.createKey()
  const base = Math.floor((Date.now() - 50 * MINUTE) / (15 * MINUTE)) * 15 * MINUTE
  // Minute i holds i + 1 events, every third of them failed; 20 minutes.
  const events = Array.from({ length: 20 }, (_, i) => Array.from({ length: i + 1 }, (_, j) => ({
    agentId: 'hist', type: 'tool', outcome: j % 3 === 0 ? 'failed' : 'success', timestamp: new Date(base + i * MINUTE + j * 100).toISOString(),
  }))).flat()
  t.equal((await sendBatch(app, secret, events)).statusCode, 207)
  t.equal((await sendBatch(app, otherKey.secret, events.slice(0, 50))).statusCode, 207)
  await shipped(app)
  const get = (query: string, who = user) => app.inject({ method: 'GET', url: `/v1/me/events/histogram?${query}`, headers: who.auth })
  const from = new Date(base - MINUTE).toISOString()

  const minutes = await get(`from=${from}&interval=1m`)
  t.equal(minutes.statusCode, 200, minutes.body)
  const body = minutes.json()
  t.same(body.buckets, Array.from({ length: 20 }, (_, i) => ({ start: new Date(base + i * MINUTE).toISOString(), events: i + 1 })), 'one bucket per minute that holds events, oldest first')
  t.equal(body.total, events.length)
  t.match(body, { interval: '1m', from })

  const failed = (await get(`from=${from}&interval=5m&outcome=failed`)).json()
  const expected = new Map<string, number>()
  for (const e of events.filter((x) => x.outcome === 'failed')) {
    const start = new Date(Math.floor(Date.parse(e.timestamp) / (5 * MINUTE)) * 5 * MINUTE).toISOString()
    expected.set(start, (expected.get(start) ?? 0) + 1)
  }
  t.same(failed.buckets, [...expected].map(([start, n]) => ({ start, events: n })), 'the list\'s filters apply; intervals start on their multiples')
  t.equal((await get(`from=${from}&interval=1h`)).json().total, events.length)
  t.equal((await get(`from=${from}&interval=1m`, other)).json().total, 50, 'another user counts only theirs')
})

t.test('an unknown interval, or a window of more than 1,440 intervals, is a 400 naming interval', async (t) => {
  const app = await buildTestApp(t)
  const user = await newUser(app)
  const get = (query: string) => app.inject({ method: 'GET', url: `/v1/me/events/histogram?${query}`, headers: user.auth })
  const unknown = await get('interval=2m')
  t.equal(unknown.statusCode, 400)
  t.match(unknown.json(), { error: 'validation_failed', details: [{ path: ['interval'], message: /must be one of 1m, 5m, 15m, 1h, 1d/ }] })
  const wide = await get('since=7d&interval=1m')
  t.equal(wide.statusCode, 400)
  t.match(wide.json().details[0], { path: ['interval'], message: /over 1440/ })
  t.equal((await get('since=7d&interval=15m')).statusCode, 200, '672 intervals')
  const day = await get('interval=1m')
  t.equal(day.statusCode, 200, 'the default 24 hours of minutes: 1,440 intervals long, whatever the alignment')
  t.equal(Date.parse(day.json().to) - Date.parse(day.json().from), 86_400_000)
  const longer = await get(`from=${Date.now() - 86_400_000 - 61_000}&interval=1m`)
  t.equal(longer.statusCode, 400, 'a minute more is over')
  t.match(longer.json().details[0], { path: ['interval'], message: /the window is 14\d\d intervals of 1m long, over 1440/ })
  t.match((await get('')).json(), { interval: '1h', total: 0, buckets: [] }, 'the default: hours over the last 24 hours')
  t.equal((await app.inject({ method: 'GET', url: '/v1/me/events/histogram' })).statusCode, 401)
})
