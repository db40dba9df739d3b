import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent, shipped } from '../../helpers/app.ts'

const prefix = `test:${randomId()}:`
const app = await buildTestApp(t, { REDIS_PREFIX: prefix })

t.test('free tier: 60 events in a burst, then 429 with an integer Retry-After', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  // The bucket refills one event a second, so on a slow machine a few more than 60 may pass.
  const started = Date.now()
  let passed = 0
  let limited
  while (passed < 200) {
    const res = await sendEvent(app, key.secret, { agentId: 'a' })
    if (res.statusCode !== 202) {
      limited = res
      break
    }
    passed++
  }
  const elapsedSeconds = (Date.now() - started) / 1000
  t.ok(passed >= 60, `at least the burst of 60 passed (${passed})`)
  t.ok(passed <= 60 + Math.ceil(elapsedSeconds) + 1, `no more than the burst plus the refill (${passed} in ${elapsedSeconds.toFixed(1)} s)`)
  t.equal(limited?.statusCode, 429)
  t.same(limited?.json(), { error: 'rate_limited' })
  t.match(limited?.headers['retry-after'], /^[1-9]\d*$/)
  t.ok(Number(limited?.headers['retry-after']) <= 2, 'one event refills within about a second')
})

t.test('the limit is per user across keys and instances sharing Redis; tiers and overrides apply', async (t) => {
  const other = await buildTestApp(t, { REDIS_PREFIX: prefix })
  // A burst of 10 refills one event every 6 s: long enough for this test to be exact.
  const user = await newUser(app, { burst: 10 })
  const k1 = await user.createKey()
  const k2 = await user.createKey()
  for (let i = 0; i < 5; i++) t.equal((await sendEvent(app, k1.secret, { agentId: 'a' })).statusCode, 202)
  for (let i = 0; i < 5; i++) t.equal((await sendEvent(other, k2.secret, { agentId: 'a' })).statusCode, 202)
  t.equal((await sendEvent(other, k1.secret, { agentId: 'a' })).statusCode, 429, 'the 11th is refused on the other instance')

  const neighbour = await newUser(app)
  t.equal((await sendEvent(app, (await neighbour.createKey()).secret, { agentId: 'a' })).statusCode, 202, 'other users are unaffected')

  const pro = await newUser(app, { tier: 'pro' })
  const proKey = await pro.createKey()
  const proStatuses = await Promise.all(Array.from({ length: 100 }, () => sendEvent(app, proKey.secret, { agentId: 'a' })))
  t.same(new Set(proStatuses.map((r) => r.statusCode)), new Set([202]), 'pro allows more than 60')

  const custom = await newUser(app, { tier: 'enterprise', burst: 5 })
  const customKey = await custom.createKey()
  const customStatuses = []
  for (let i = 0; i < 6; i++) customStatuses.push((await sendEvent(app, customKey.secret, { agentId: 'a' })).statusCode)
  t.same(customStatuses, [202, 202, 202, 202, 202, 429], 'a per-user override replaces the tier limit')
})

t.test('invalid events do not spend the burst', async (t) => {
  const user = await newUser(app, { burst: 2 })
  const key = await user.createKey()
  for (let i = 0; i < 5; i++) t.equal((await sendEvent(app, key.secret, { agentId: 'a', type: 'bad' })).statusCode, 400)
  for (let i = 0; i < 5; i++) t.equal((await sendEvent(app, key.secret, { type: 'tool' })).statusCode, 400, 'no agentId on an unbound key')
  t.equal((await sendEvent(app, key.secret, { agentId: 'a' })).statusCode, 202)
})

function sendBatch (secret: string, events: unknown[]) {
  return app.inject({
    method: 'POST', url: '/v1/events/batch',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ events }),
  })
}

t.test('batch: 207 with one result per event, in order, as each would have got alone', async (t) => {
  const user = await newUser(app, { tier: 'enterprise' })
  const key = await user.createKey()
  const other = await newUser(app)
  const theirs = (await sendEvent(app, (await other.createKey()).secret, { agentId: 'x' })).json().agentId
  const res = await sendBatch(key.secret, [
    { agentId: 'batch-a', type: 'tool' },
    { agentId: 'batch-a', type: 'nope' },
    { type: 'tool' },
    { agentId: theirs },
    { agentId: 'batch-b', metadata: { sessionId: 's' } },
  ])
  t.equal(res.statusCode, 207)
  const { results } = res.json()
  t.same(results.map((r: { status: number }) => r.status), [202, 400, 400, 403, 202])
  t.match(results[0], { accepted: true, eventId: /^evt_/, agentId: /^c/ })
  t.equal(results[1].error, 'validation_failed')
  t.same(results[1].details[0].path, ['type'], 'paths are relative to the event')
  t.same(results[2].details[0].path, ['agentId'])
  t.equal(results[3].error, 'forbidden')
  await shipped(app)
  const stored = await app.events.existingIds([results[0].eventId, results[4].eventId])
  t.equal(stored.size, 2, 'the accepted events are shipped')
})

t.test('batch: the burst admits what fits and refuses the rest with 429', async (t) => {
  const user = await newUser(app, { burst: 3 })
  const key = await user.createKey()
  const res = await sendBatch(key.secret, Array.from({ length: 5 }, () => ({ agentId: 'b' })))
  t.equal(res.statusCode, 207)
  t.same(res.json().results.map((r: { status: number }) => r.status), [202, 202, 202, 429, 429])
  t.equal(res.json().results[3].error, 'rate_limited')
  t.match(res.headers['retry-after'], /^[1-9]\d*$/, 'the answer says when the refused events fit')
  // 3 a minute: one more event every 20 s.
  const [first, second] = [res.json().results[3].retryAfter, res.json().results[4].retryAfter]
  t.ok(first >= 1 && first <= 20, `the first refused fits within 20 s (${first})`)
  t.ok(second - first >= 19 && second - first <= 21, `the next one 20 s later (${second})`)
  t.equal(res.headers['retry-after'], String(second), 'the answer\'s Retry-After is the longest')
  t.equal(res.json().results[0].retryAfter, undefined, 'an accepted event has none')
  const fits = await sendBatch((await (await newUser(app, { burst: 3 })).createKey()).secret, [{ agentId: 'b' }])
  t.equal(fits.headers['retry-after'], undefined, 'no Retry-After when nothing was refused for the rate')
})

t.test('batch limits: 500 events and 5 MiB', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100000 })
  const key = await user.createKey()
  const full = await sendBatch(key.secret, Array.from({ length: 500 }, (_, i) => ({ agentId: `agent-${i % 7}` })))
  t.equal(full.statusCode, 207)
  t.equal(full.json().results.filter((r: { status: number }) => r.status === 202).length, 500)
  const over = await sendBatch(key.secret, Array.from({ length: 501 }, () => ({ agentId: 'a' })))
  t.equal(over.statusCode, 400)
  t.same(over.json().details[0].path, ['events'])
  const empty = await sendBatch(key.secret, [])
  t.equal(empty.statusCode, 400)
  const huge = await sendBatch(key.secret, Array.from({ length: 6 }, () => ({ agentId: 'a', reasoning: 'x'.repeat(1024 * 1024) })))
  t.equal(huge.statusCode, 413)
  const notArray = await app.inject({ method: 'POST', url: '/v1/events/batch', headers: { authorization: `Bearer ${key.secret}` }, payload: { events: 'x' } })
  t.equal(notArray.statusCode, 400)
  const noKey = await app.inject({ method: 'POST', url: '/v1/events/batch', payload: { events: [{}] } })
  t.equal(noKey.statusCode, 401)
})
