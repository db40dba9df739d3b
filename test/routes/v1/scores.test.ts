import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { randomBytes } from 'node:crypto'
import { buildTestApp, newUser, randomId, sendEvent, shipped, type TestUser } from '../../helpers/app.ts'
import { ScoresRepository } from '../../../src/storage/scores-repository.ts'

const app = await buildTestApp(t)
const stored = new ScoresRepository(app.clickhouse)

function postScore (on: FastifyInstance, secret: string, payload: unknown, headers: Record<string, string> = {}) {
  return on.inject({ method: 'POST', url: '/v1/scores', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...headers }, payload: JSON.stringify(payload) })
}
function postScores (on: FastifyInstance, secret: string, scores: unknown[], headers: Record<string, string> = {}) {
  return on.inject({ method: 'POST', url: '/v1/scores/batch', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...headers }, payload: JSON.stringify({ scores }) })
}
async function listScores (on: FastifyInstance, user: TestUser, query = '') {
  const res = await on.inject({ method: 'GET', url: `/v1/me/scores${query}`, headers: user.auth })
  if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`)
  return res.json() as { scores: Record<string, any>[]; nextCursor: string | null }
}

t.test('a score is acknowledged from the log, stored, and read back', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const res = await postScore(app, key.secret, { traceId, name: 'helpfulness', value: 0.75, comment: 'fine', source: 'llm', metadata: { judge: 'gpt' } })
  t.equal(res.statusCode, 202, res.body)
  const ack = res.json()
  t.match(ack, { accepted: true, id: /^scr_/ })
  t.equal(ack.scoreId, ack.id, 'without a scoreId the write is the score')

  const { scores } = await listScores(app, user)
  t.equal(scores.length, 1)
  t.match(scores[0], {
    scoreId: ack.id, name: 'helpfulness', dataType: 'numeric', value: 0.75, label: null, boolean: null, comment: 'fine', source: 'llm',
    traceId, spanId: null, sessionId: null, eventId: null, agent: null, metadata: { judge: 'gpt' }, authorId: null,
  })
})

t.test('the scores of a trace or session with no events of the caller: 200, its scores or none, never another user\'s', async (t) => {
  const [owner, other] = [await newUser(app), await newUser(app)]
  const key = await owner.createKey()
  const [traceId, sessionId] = [randomId('trace-'), randomId('session-')]
  t.equal((await postScore(app, key.secret, { traceId, name: 'early', value: 1 })).statusCode, 202)
  t.equal((await postScore(app, key.secret, { sessionId, name: 'early', value: 2 })).statusCode, 202)
  for (const [path, value] of [[`traces/${traceId}`, 1], [`sessions/${sessionId}`, 2]] as const) {
    const mine = await app.inject({ method: 'GET', url: `/v1/me/${path}/scores`, headers: owner.auth })
    t.equal(mine.statusCode, 200)
    t.match(mine.json().scores, [{ name: 'early', value }], 'a score that came before its events')
    const theirs = await app.inject({ method: 'GET', url: `/v1/me/${path}/scores`, headers: other.auth })
    t.equal(theirs.statusCode, 200)
    t.same(theirs.json(), { scores: [] }, 'another user\'s id finds nothing')
  }
  const unknown = await app.inject({ method: 'GET', url: `/v1/me/traces/${randomId('trace-')}/scores`, headers: owner.auth })
  t.same([unknown.statusCode, unknown.json()], [200, { scores: [] }])
})

t.test('bad scores are refused naming the field', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const cases: [unknown, string][] = [
    [{ name: 'x', value: 1 }, 'traceId'],
    [{ traceId: 't', sessionId: 's', name: 'x', value: 1 }, 'sessionId'],
    [{ traceId: 't', name: 'x' }, 'value'],
    [{ traceId: 't', name: 'x', value: 1, label: 'a' }, 'label'],
    [{ sessionId: 's', spanId: 'p', name: 'x', value: 1 }, 'spanId'],
    [{ traceId: 't', name: 'x', value: '1' }, 'value'],
    [{ traceId: 't', name: 'x', value: 1, source: 'robot' }, 'source'],
    [{ traceId: 't', name: '', value: 1 }, 'name'],
    [{ traceId: 't', name: 'x', value: 1, extra: true }, 'extra'],
  ]
  for (const [body, field] of cases) {
    const res = await postScore(app, key.secret, body)
    t.equal(res.statusCode, 400, JSON.stringify(body))
    t.ok(res.json().details.some((d: { path: string[] }) => d.path[0] === field), `${JSON.stringify(body)} names ${field}: ${res.body}`)
  }
  t.equal((await listScores(app, user)).scores.length, 0, 'nothing stored')
})

t.test('500 writes of one scoreId in a batch: the last wins, batch after batch', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const traceId = randomId('trace-')
  // Three batches: a per-process counter that wrapped at 1,000 gave some batch's last writes the lowest versions.
  for (let round = 0; round < 3; round++) {
    const res = await postScores(app, key.secret, Array.from({ length: 500 }, (_, i) => ({ scoreId: `wrap-${round}`, traceId, name: 'wrap', value: i })))
    t.equal(res.statusCode, 207)
  }
  const { scores } = await listScores(app, user)
  t.same(scores.map((s) => [s.scoreId, s.value]).sort(), [['wrap-0', 499], ['wrap-1', 499], ['wrap-2', 499]])
})

t.test('a scoreId sent again replaces the score: stored as one, the last write wins', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const first = await postScore(app, key.secret, { scoreId: 'run-1/q', traceId, name: 'quality', value: 0.2 })
  t.equal(first.statusCode, 202)
  await shipped(app)
  const second = await postScore(app, key.secret, { scoreId: 'run-1/q', traceId, name: 'quality', value: 0.9, comment: 'rejudged' })
  t.equal(second.statusCode, 202)
  t.equal(second.json().scoreId, 'run-1/q')
  // Two writes of one id in one batch: the later one in the batch wins.
  const batch = await postScores(app, key.secret, [
    { scoreId: 'run-1/b', traceId, name: 'quality', value: 0.1 },
    { scoreId: 'run-1/b', traceId, name: 'quality', value: 0.6 },
  ])
  t.equal(batch.statusCode, 207)
  const { scores } = await listScores(app, user)
  t.equal(scores.length, 2, 'one score per id')
  t.same(scores.map((s) => [s.scoreId, s.value, s.comment]).sort(), [['run-1/b', 0.6, null], ['run-1/q', 0.9, 'rejudged']])
  // Both writes are stored until a background merge keeps the latest alone (it may have run already): reads see one either way.
  const writes = await stored.writesOf(user.id, 'run-1/q')
  t.ok(writes === 1 || writes === 2, `${writes} writes stored`)

  const summary = (await app.inject({ method: 'GET', url: '/v1/me/scores/summary', headers: user.auth })).json()
  t.equal(summary.names[0].count, 2, 'counted once each in the summary')
  t.equal(summary.names[0].numeric.mean, 0.75)
})

t.test('a batch retried with its Idempotency-Key is stored once', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const scores = [{ traceId, name: 'a', value: 1 }, { traceId, name: 'b', boolean: true }, { traceId, name: 'c', value: 'bad' }]
  const headers = { 'idempotency-key': randomId('k-') }
  const first = await postScores(app, key.secret, scores, headers)
  t.equal(first.statusCode, 207)
  t.same(first.json().results.map((r: { status: number }) => r.status), [202, 202, 400])
  const again = await postScores(app, key.secret, scores, headers)
  t.equal(again.statusCode, 207)
  t.equal(again.headers['idempotent-replayed'], 'true')
  t.same(again.json(), first.json(), 'the same answer, the same ids')
  const read = await listScores(app, user)
  t.equal(read.scores.length, 2, 'stored once')
  t.same(read.scores.map((s) => s.name).sort(), ['a', 'b'])
  const b = read.scores.find((s) => s.name === 'b')!
  t.match(b, { dataType: 'boolean', boolean: true, value: 1, label: null })
})

t.test('score configs: set, read, refuse scores that break them (400 alone, per item in a batch), remove', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const put = (name: string, body: unknown) => app.inject({ method: 'PUT', url: `/v1/me/score-configs/${encodeURIComponent(name)}`, headers: user.auth, payload: body as object })

  t.equal((await put('relevance', { dataType: 'numeric', min: 0, max: 1 })).statusCode, 200)
  t.equal((await put('verdict', { dataType: 'categorical', labels: ['correct', 'partial', 'wrong'] })).statusCode, 200)
  t.equal((await put('thumbs', { dataType: 'boolean', description: 'from the page' })).statusCode, 200)
  const badConfigs: [unknown, string][] = [
    [{ dataType: 'categorical' }, 'labels'],
    [{ dataType: 'numeric', min: 2, max: 1 }, 'min'],
    [{ dataType: 'boolean', min: 0 }, 'min'],
    [{ dataType: 'numeric', labels: ['a'] }, 'labels'],
    [{ dataType: 'stars' }, 'dataType'],
    [{ dataType: 'categorical', labels: ['polite', 'polite '] }, 'labels'],
    [{ dataType: 'categorical', labels: ['ok', 'ok\u200b'] }, 'labels'],
    [{ dataType: 'categorical', labels: ['caf\u00e9', 'cafe\u0301'] }, 'labels'],
  ]
  for (const [body, field] of badConfigs) {
    const res = await put('other', body)
    t.equal(res.statusCode, 400, JSON.stringify(body))
    t.ok(res.json().details.some((d: { path: string[] }) => d.path[0] === field), `${JSON.stringify(body)} names ${field}: ${res.body}`)
  }

  const got = await app.inject({ method: 'GET', url: '/v1/me/score-configs/verdict', headers: user.auth })
  t.match(got.json(), { name: 'verdict', dataType: 'categorical', labels: ['correct', 'partial', 'wrong'], min: null, max: null })
  const list = await app.inject({ method: 'GET', url: '/v1/me/score-configs', headers: user.auth })
  t.same(list.json().configs.map((c: { name: string }) => c.name), ['relevance', 'thumbs', 'verdict'])

  const traceId = randomId('trace-')
  const refused = await postScore(app, key.secret, { traceId, name: 'relevance', value: 1.5 })
  t.equal(refused.statusCode, 400)
  t.match(refused.json(), { error: 'validation_failed', reason: 'score_config_mismatch', details: [{ path: ['value'], message: /at most 1/ }] })
  const wrongType = await postScore(app, key.secret, { traceId, name: 'thumbs', label: 'up' })
  t.match(wrongType.json(), { reason: 'score_config_mismatch', details: [{ path: ['boolean'] }] })

  const batch = await postScores(app, key.secret, [
    { traceId, name: 'verdict', label: 'correct' },
    { traceId, name: 'verdict', label: 'maybe' },
    { traceId, name: 'relevance', value: 0 },
    { traceId, name: 'relevance', value: -0.1 },
    { traceId, name: 'unconfigured', label: 'anything' },
  ])
  t.same(batch.json().results.map((r: { status: number }) => r.status), [202, 400, 202, 400, 202])
  t.match(batch.json().results[1], { reason: 'score_config_mismatch', details: [{ path: ['label'], message: /one of "correct", "partial", "wrong"/ }] })

  // A removed config no longer refuses (on this instance at once: the change drops the cache).
  t.equal((await app.inject({ method: 'DELETE', url: '/v1/me/score-configs/relevance', headers: user.auth })).statusCode, 204)
  t.equal((await app.inject({ method: 'DELETE', url: '/v1/me/score-configs/relevance', headers: user.auth })).statusCode, 404)
  t.equal((await postScore(app, key.secret, { traceId, name: 'relevance', value: 1.5 })).statusCode, 202)
  t.equal((await app.inject({ method: 'GET', url: '/v1/me/score-configs/relevance', headers: user.auth })).statusCode, 404)

  // Another user's configs do not apply.
  const stranger = await newUser(app)
  const theirs = await stranger.createKey()
  t.equal((await postScore(app, theirs.secret, { traceId, name: 'verdict', label: 'maybe' })).statusCode, 202)
  t.equal((await app.inject({ method: 'GET', url: '/v1/me/score-configs/verdict', headers: stranger.auth })).statusCode, 404)
})

t.test('scores are scoped to their user', async (t) => {
  const alice = await newUser(app)
  const bob = await newUser(app)
  const aliceKey = await alice.createKey()
  const bobKey = await bob.createKey()
  const traceId = randomId('trace-')
  t.equal((await postScore(app, aliceKey.secret, { scoreId: 'same', traceId, name: 'n', value: 1 })).statusCode, 202)
  t.equal((await postScore(app, bobKey.secret, { scoreId: 'same', traceId, name: 'n', value: 5 })).statusCode, 202)
  const a = await listScores(app, alice)
  const b = await listScores(app, bob)
  t.same(a.scores.map((s) => s.value), [1], 'the same scoreId of another user replaces nothing')
  t.same(b.scores.map((s) => s.value), [5])
  const trace = await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}/scores`, headers: alice.auth })
  t.same(trace.json().scores.map((s: { value: number }) => s.value), [1])
  // Bob cannot score Alice's trace from the dashboard.
  t.equal((await sendEvent(app, aliceKey.secret, { agentId: 'bot', metadata: { traceId: 'alice-only-' + traceId } })).statusCode, 202)
  const annotate = await app.inject({ method: 'POST', url: `/v1/me/traces/alice-only-${traceId}/scores`, headers: bob.auth, payload: { name: 'thumbs', boolean: false } })
  t.equal(annotate.statusCode, 404)
})

t.test('people score traces and sessions from the dashboard as themselves; trace scores per span and whole', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const sessionId = randomId('session-')
  for (const spanId of ['s1', 's2']) {
    t.equal((await sendEvent(app, key.secret, { agentId: 'scored-bot', metadata: { traceId, spanId, sessionId } })).statusCode, 202)
  }
  const onSpan = await app.inject({ method: 'POST', url: `/v1/me/traces/${traceId}/scores`, headers: user.auth, payload: { spanId: 's2', name: 'thumbs', boolean: false, comment: 'wrong tool' } })
  t.equal(onSpan.statusCode, 202, onSpan.body)
  const whole = await app.inject({ method: 'POST', url: `/v1/me/traces/${traceId}/scores`, headers: user.auth, payload: { name: 'thumbs', boolean: true } })
  t.equal(whole.statusCode, 202)
  const noSpan = await app.inject({ method: 'POST', url: `/v1/me/traces/${traceId}/scores`, headers: user.auth, payload: { spanId: 'nope', name: 'thumbs', boolean: true } })
  t.equal(noSpan.statusCode, 404)
  const session = await app.inject({ method: 'POST', url: `/v1/me/sessions/${sessionId}/scores`, headers: user.auth, payload: { name: 'resolved', label: 'yes' } })
  t.equal(session.statusCode, 202)
  t.equal((await app.inject({ method: 'POST', url: '/v1/me/sessions/unknown/scores', headers: user.auth, payload: { name: 'resolved', label: 'yes' } })).statusCode, 404)

  const trace = (await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}/scores`, headers: user.auth })).json()
  t.equal(trace.scores.length, 2)
  t.match(trace.scores[0], { spanId: 's2', boolean: false, source: 'human', authorId: user.id, agent: { displayName: 'scored-bot' }, comment: 'wrong tool' })
  t.match(trace.scores[1], { spanId: null, boolean: true, source: 'human', authorId: user.id })
  const sessionScores = (await app.inject({ method: 'GET', url: `/v1/me/sessions/${sessionId}/scores`, headers: user.auth })).json()
  t.match(sessionScores.scores, [{ sessionId, label: 'yes', dataType: 'categorical', source: 'human' }])
  // The trace and session details carry them too.
  const detail = (await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}`, headers: user.auth })).json()
  t.same(detail.scores, trace.scores, 'the trace detail has the trace\'s scores, whole and per span')
  t.ok(detail.spans.some((s: { spanId: string }) => s.spanId === detail.scores[0].spanId), 'a span score names one of the spans')
  const sessionDetail = (await app.inject({ method: 'GET', url: `/v1/me/sessions/${sessionId}`, headers: user.auth })).json()
  t.same(sessionDetail.scores, sessionScores.scores)
  const humans = await listScores(app, user, '?source=human&name=thumbs')
  t.equal(humans.scores.length, 2)
})

t.test('a score of an event is listed with its trace and its session, and only the caller\'s', async (t) => {
  const [user, other] = [await newUser(app), await newUser(app)]
  const [key, otherKey] = [await user.createKey(), await other.createKey()]
  const [traceId, sessionId] = [randomId('trace-'), randomId('session-')]
  const sent = await sendEvent(app, key.secret, { agentId: 'evented-bot', metadata: { traceId, sessionId, spanId: 's1' } })
  t.equal(sent.statusCode, 202, sent.body)
  const eventId = sent.json().id as string
  const elsewhere = (await sendEvent(app, key.secret, { agentId: 'evented-bot', metadata: { traceId: randomId('trace-') } })).json().id as string
  t.equal((await postScore(app, key.secret, { eventId, name: 'grounded', value: 0.25 })).statusCode, 202)
  t.equal((await postScore(app, key.secret, { eventId: elsewhere, name: 'grounded', value: 0.5 })).statusCode, 202)
  // Another user scoring the same event id (which is not theirs) adds nothing to the owner's trace.
  t.equal((await postScore(app, otherKey.secret, { eventId, name: 'grounded', value: 0.75 })).statusCode, 202)
  for (const path of [`traces/${traceId}`, `sessions/${sessionId}`]) {
    const listed = (await app.inject({ method: 'GET', url: `/v1/me/${path}/scores`, headers: user.auth })).json().scores
    t.match(listed, [{ eventId, traceId: null, name: 'grounded', value: 0.25 }], `${path}: the event's score, not another event's`)
    t.equal(listed.length, 1)
    const detail = (await app.inject({ method: 'GET', url: `/v1/me/${path}`, headers: user.auth })).json()
    t.same(detail.scores, listed, `${path}: the detail carries it too`)
    const theirs = (await app.inject({ method: 'GET', url: `/v1/me/${path}/scores`, headers: other.auth })).json().scores
    t.same(theirs, [], 'the other user has no events there, so none of their scores is listed')
  }
})

t.test('a score updated during a walk and merged away is never listed twice; the next walk has its new value', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('walked-')
  for (const id of ['a', 'b', 'c']) {
    t.equal((await postScore(app, key.secret, { scoreId: id, traceId, name: 'walked', value: 1 })).statusCode, 202)
    await shipped(app)
  }
  const first = await listScores(app, user, '?limit=1')
  t.same(first.scores.map((s) => s.scoreId), ['c'])
  // 'a', not yet handed out, is updated, and the parts merge: only its latest write is kept.
  t.equal((await postScore(app, key.secret, { scoreId: 'a', traceId, name: 'walked', value: 2 })).statusCode, 202)
  await shipped(app)
  await app.clickhouse.command({ query: 'OPTIMIZE TABLE scores FINAL' })
  const rest = await listScores(app, user, `?limit=10&cursor=${first.nextCursor}`)
  const walked = [...first.scores, ...rest.scores].map((s) => s.scoreId)
  t.equal(new Set(walked).size, walked.length, 'no score twice')
  t.ok(walked.includes('b'), 'an untouched score is listed')
  t.same((await listScores(app, user)).scores.map((s) => [s.scoreId, s.value]), [['a', 2], ['c', 1], ['b', 1]], 'the next walk: the update first, with its value')
})

t.test('the list pages with the cursor and filters by name, source, agent and range', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  t.equal((await sendEvent(app, key.secret, { agentId: 'paged-bot', metadata: { traceId } })).statusCode, 202)
  const agentId = (await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}`, headers: user.auth })).json().agents[0].id
  const bound = await user.createKey('bound', agentId)
  for (let i = 0; i < 5; i++) t.equal((await postScore(app, key.secret, { traceId, name: 'n', value: i, source: i % 2 ? 'code' : 'llm' })).statusCode, 202)
  t.equal((await postScore(app, bound.secret, { traceId, name: 'other', value: 9 })).statusCode, 202)
  const seen: number[] = []
  let cursor: string | null = null
  do {
    const page = await listScores(app, user, `?name=n&limit=2${cursor ? `&cursor=${cursor}` : ''}`)
    seen.push(...page.scores.map((s) => s.value))
    cursor = page.nextCursor
  } while (cursor)
  t.same(seen, [4, 3, 2, 1, 0], 'newest first, each once')
  t.same((await listScores(app, user, '?source=code')).scores.map((s) => s.value), [3, 1])
  t.same((await listScores(app, user, '?name=other')).scores[0]!.agent, { id: agentId, displayName: 'paged-bot' })
  // A score of a trace that names no agent is of the trace's agent.
  t.same((await listScores(app, user, '?name=n')).scores.map((s) => s.agent), Array(5).fill({ id: agentId, displayName: 'paged-bot' }))
  t.equal((await listScores(app, user, `?agentId=${agentId}`)).scores.length, 6)
  const stray = randomId('trace-')
  t.equal((await postScore(app, key.secret, { traceId: stray, name: 'stray', value: 1 })).statusCode, 202)
  t.equal((await listScores(app, user, '?name=stray')).scores[0]!.agent, null, 'a trace without events: no agent')
  const future = new Date(Date.now() + 60_000).toISOString()
  t.equal((await listScores(app, user, `?from=${future}`)).scores.length, 0)
  t.equal((await listScores(app, user, `?to=${future}`)).scores.length, 7)
  const bad = await app.inject({ method: 'GET', url: '/v1/me/scores?cursor=nope', headers: user.auth })
  t.equal(bad.statusCode, 400)
})

t.test('a key bound to an agent updates its agent\'s scores, never another agent\'s: its ids are its agent\'s', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceOf = async (agent: string) => {
    const traceId = randomId('trace-')
    t.equal((await sendEvent(app, key.secret, { agentId: agent, metadata: { traceId } })).statusCode, 202)
    return { traceId, agentId: (await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}`, headers: user.auth })).json().agents[0].id as string }
  }
  const mine = await traceOf('bound-owner')
  const other = await traceOf('bound-other')
  const bound = await user.createKey('bound', mine.agentId)
  // The other agent's score, written by an unbound key under an id of the client's.
  t.equal((await postScore(app, key.secret, { scoreId: 'quality-1', traceId: other.traceId, agentId: other.agentId, name: 'quality', value: 0.95 })).statusCode, 202)
  const sent = await postScore(app, bound.secret, { scoreId: 'quality-1', traceId: other.traceId, name: 'quality', value: 0.01 })
  t.equal(sent.statusCode, 202)
  t.equal(sent.json().scoreId, `ag:${mine.agentId}:quality-1`, 'the acknowledgement names the id stored')
  const ofOther = await listScores(app, user, `?agentId=${other.agentId}`)
  t.same(ofOther.scores.map((s) => [s.scoreId, s.value]), [['quality-1', 0.95]], 'the other agent\'s score is untouched')
  t.equal((await postScore(app, bound.secret, { scoreId: 'quality-1', traceId: mine.traceId, name: 'quality', value: 0.5 })).statusCode, 202)
  t.same((await listScores(app, user, `?agentId=${mine.agentId}`)).scores.map((s) => [s.scoreId, s.value]), [[`ag:${mine.agentId}:quality-1`, 0.5]], 'its own score is updated by the same id')
  const long = await postScore(app, bound.secret, { scoreId: 'x'.repeat(172), traceId: mine.traceId, name: 'quality', value: 1 })
  t.equal(long.statusCode, 400)
  t.same(long.json().details.map((d: { path: unknown[] }) => d.path), [['scoreId']], 'an id with no room for the prefix is refused, naming it')
  t.equal((await postScore(app, bound.secret, { scoreId: 'x'.repeat(171), traceId: mine.traceId, name: 'quality', value: 1 })).statusCode, 202, '171 characters fit')
})

/** An OTLP JSON export of one span carrying `events`, for `service`. */
function otlpExport (traceId: string, spanId: string, service: string, events: { name: string; attributes: Record<string, string | number> }[]) {
  const attr = (key: string, v: string | number) => ({ key, value: typeof v === 'number' ? { doubleValue: v } : { stringValue: v } })
  const now = BigInt(Date.now()) * 1_000_000n
  return {
    resourceSpans: [{
      // Above `minimal`, where an evaluation's explanation is kept as its comment.
      resource: { attributes: [attr('service.name', service), attr('agent_telemetry.privacy_level', 'standard')] },
      scopeSpans: [{
        scope: { name: 'judge' },
        spans: [{
          traceId, spanId, name: 'chat', kind: 3, startTimeUnixNano: String(now), endTimeUnixNano: String(now + 1_000_000n),
          attributes: [attr('gen_ai.operation.name', 'chat')],
          events: events.map((e) => ({ name: e.name, timeUnixNano: String(now), attributes: Object.entries(e.attributes).map(([k, v]) => attr(k, v)) })),
        }],
      }],
    }],
  }
}

t.test('OTLP gen_ai.evaluation.result span events become scores of their span, once however often re-sent', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const put = await app.inject({ method: 'PUT', url: '/v1/me/score-configs/relevance', headers: user.auth, payload: { dataType: 'numeric', min: 0, max: 1 } })
  t.equal(put.statusCode, 200)
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  const body = otlpExport(traceId, spanId, 'judged-agent', [
    { name: 'gen_ai.evaluation.result', attributes: { 'gen_ai.evaluation.name': 'relevance', 'gen_ai.evaluation.score.value': 0.25, 'gen_ai.evaluation.score.label': 'low', 'gen_ai.evaluation.explanation': 'off topic' } },
    { name: 'gen_ai.evaluation.result', attributes: { 'gen_ai.evaluation.name': 'tone', 'gen_ai.evaluation.score.label': 'polite' } },
    { name: 'gen_ai.evaluation.result', attributes: { 'gen_ai.evaluation.name': 'relevance', 'gen_ai.evaluation.score.value': 7 } },
    { name: 'gen_ai.evaluation.result', attributes: { 'gen_ai.evaluation.score.value': 1 } },
    { name: 'something.else', attributes: { 'gen_ai.evaluation.name': 'x', 'gen_ai.evaluation.score.value': 1 } },
  ])
  const send = () => app.inject({ method: 'POST', url: '/v1/traces', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }, payload: JSON.stringify(body) })
  const first = await send()
  t.equal(first.statusCode, 200, first.body)
  t.match(first.json(), { partialSuccess: { errorMessage: /1 of 3 evaluation results refused: 1 validation_failed \(score_config_mismatch\)/ } })
  const again = await send()
  t.equal(again.statusCode, 200, 're-sent')
  t.same(again.json(), first.json(), 'a re-sent export tells the refused evaluation result again')

  const { scores } = (await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}/scores`, headers: user.auth })).json()
  t.equal(scores.length, 2, 'one score per valid evaluation result, stored once')
  t.match(scores.find((s: { name: string }) => s.name === 'relevance'), {
    traceId, spanId, dataType: 'numeric', value: 0.25, comment: 'off topic', source: 'api', metadata: { label: 'low' }, agent: { displayName: 'judged-agent' },
  })
  t.match(scores.find((s: { name: string }) => s.name === 'tone'), { dataType: 'categorical', label: 'polite', spanId })
  const trace = (await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}`, headers: user.auth })).json()
  t.equal(trace.spans.length, 1, 'the span itself is stored as before')
  t.equal(await stored.writesOf(user.id, `otel:${traceId}:${spanId}:0`), 1, 'a re-sent span writes its scores no second time')
})

t.test('an OTLP evaluation name the score rule refuses is refused and told, never trimmed into another', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  const body = otlpExport(traceId, spanId, 'judged-agent', [
    { name: 'gen_ai.evaluation.result', attributes: { 'gen_ai.evaluation.name': 'accuracy ', 'gen_ai.evaluation.score.value': 1 } },
    { name: 'gen_ai.evaluation.result', attributes: { 'gen_ai.evaluation.name': 'acc\nuracy', 'gen_ai.evaluation.score.value': 1 } },
    { name: 'gen_ai.evaluation.result', attributes: { 'gen_ai.evaluation.name': 'accuracy', 'gen_ai.evaluation.score.value': 0.5 } },
  ])
  const res = await app.inject({ method: 'POST', url: '/v1/traces', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' }, payload: JSON.stringify(body) })
  t.equal(res.statusCode, 200, res.body)
  t.match(res.json(), { partialSuccess: { rejectedSpans: 0, errorMessage: /^2 of 3 evaluation results refused: 2 validation_failed/ } })
  const { scores } = (await app.inject({ method: 'GET', url: `/v1/me/traces/${traceId}/scores`, headers: user.auth })).json()
  t.same(scores.map((s: { name: string; value: number }) => [s.name, s.value]), [['accuracy', 0.5]], 'only the valid name is stored')
})

/** The p-th quantile as ClickHouse's quantileExact takes it: the element at floor(p * n) of the sorted values. */
function quantileExact (values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}

t.test('the summary\'s figures match a brute-force computation over the scores sent', async (t) => {
  const user = await newUser(app, { tier: 'enterprise' })
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const agents = ['sum-a', 'sum-b']
  const sent: { name: string; value?: number; label?: string; boolean?: boolean; agentId: string }[] = []
  let seed = 7
  const next = () => (seed = (seed * 48271) % 2147483647) / 2147483647
  for (let i = 0; i < 60; i++) {
    const agentId = agents[i % 2]!
    sent.push({ name: 'accuracy', value: Math.round(next() * 1000) / 100, agentId })
    sent.push({ name: 'verdict', label: ['good', 'bad', 'meh'][Math.floor(next() * 3)]!, agentId })
    if (i % 3 === 0) sent.push({ name: 'thumbs', boolean: next() > 0.4, agentId })
  }
  // Replaced scores count once, with their last value.
  const replaced = { name: 'accuracy', agentId: 'sum-a' }
  const res = await postScores(app, key.secret, [...sent.map((s) => ({ traceId, ...s })), { scoreId: 'r1', traceId, ...replaced, value: 100 }])
  t.ok(res.json().results.every((r: { status: number }) => r.status === 202), 'all accepted')
  // Shipped first, so that the replacement lands in another part than the write it replaces.
  await shipped(app)
  t.equal((await postScore(app, key.secret, { scoreId: 'r1', traceId, ...replaced, value: 5 })).statusCode, 202)
  sent.push({ ...replaced, value: 5 })

  const summary = (await app.inject({ method: 'GET', url: '/v1/me/scores/summary', headers: user.auth })).json()
  t.same(summary.names.map((n: { name: string }) => n.name), ['accuracy', 'thumbs', 'verdict'])
  const numbers = (list: typeof sent) => list.map((s) => s.value ?? (s.boolean === undefined ? NaN : Number(s.boolean)))
  const figures = (list: typeof sent, dataType: string) => {
    const values = numbers(list)
    const labels: Record<string, number> = {}
    for (const s of list) {
      const label = s.label ?? (s.boolean === undefined ? undefined : String(s.boolean))
      if (label !== undefined) labels[label] = (labels[label] ?? 0) + 1
    }
    return {
      count: list.length,
      numeric: dataType === 'categorical' ? null : { mean: values.reduce((a, b) => a + b, 0) / values.length, p50: quantileExact(values, 0.5), p90: quantileExact(values, 0.9) },
      labels: dataType === 'numeric' ? null : labels,
    }
  }
  const today = new Date().toISOString().slice(0, 10)
  for (const n of summary.names) {
    const mine = sent.filter((s) => s.name === n.name)
    const expected = figures(mine, n.dataType)
    t.equal(n.count, expected.count, `${n.name} count`)
    if (expected.numeric) {
      t.ok(Math.abs(n.numeric.mean - expected.numeric.mean) < 1e-9, `${n.name} mean ${n.numeric.mean} ~ ${expected.numeric.mean}`)
      t.equal(n.numeric.p50, expected.numeric.p50, `${n.name} p50`)
      t.equal(n.numeric.p90, expected.numeric.p90, `${n.name} p90`)
    } else t.equal(n.numeric, null)
    t.same(n.labels, expected.labels, `${n.name} labels`)
    t.same(n.previous, { count: 0, numeric: null, labels: null }, 'nothing in the previous period')
    t.same(n.change.count, expected.count)
    t.equal(n.change.mean, null)
    t.same(n.byDay.map((d: { day: string; count: number }) => [d.day, d.count]), [[today, expected.count]])
    for (const a of n.byAgent) {
      const ofAgent = mine.filter((s) => s.agentId === a.agent.displayName)
      const e = figures(ofAgent, n.dataType)
      t.equal(a.count, e.count, `${n.name} ${a.agent.displayName} count`)
      if (e.numeric) t.equal(a.numeric.p90, e.numeric.p90, `${n.name} ${a.agent.displayName} p90`)
      t.same(a.labels, e.labels)
    }
    t.equal(n.byAgent.length, 2)
  }

  // Against the previous period: the same scores seen from a window a week on are all "previous".
  const weekOn = Date.now() + 7 * 86_400_000
  const later = (await app.inject({ method: 'GET', url: `/v1/me/scores/summary?to=${new Date(weekOn).toISOString()}&name=accuracy`, headers: user.auth })).json()
  t.equal(later.names.length, 1)
  t.match(later.names[0], { name: 'accuracy', count: 0, numeric: null, byDay: [], byAgent: [] })
  t.equal(later.names[0].previous.count, sent.filter((s) => s.name === 'accuracy').length)
  t.equal(later.names[0].change.count, -later.names[0].previous.count)
})

/** What a score name is, as every 400 about one says it (never the schema's regex). */
const NAME_RULE = 'must be 1 to 200 characters in composed Unicode form (NFC), without control or invisible characters (zero-width, bidi, fillers, variation selectors) and without whitespace at the start or end'

t.test('a name that looks like another is refused in words, so it cannot slip past the other\'s config', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const put = (name: string) => app.inject({ method: 'PUT', url: `/v1/me/score-configs/${encodeURIComponent(name)}`, headers: user.auth, payload: { dataType: 'numeric', min: 0, max: 1 } })
  t.equal((await put('acc')).statusCode, 200)
  for (const name of ['acc ', ' acc', '   ', 'acc\u200b', 'a\u202ecc', '\u00a0acc', 'acc\u0085', 'acc\u034f', 'acc\ufe0f', 'acc\u115f', 'acc\u2800', 'a\u0301cc']) {
    const score = await postScore(app, key.secret, { traceId, name, value: 5 })
    t.equal(score.statusCode, 400, JSON.stringify(name))
    t.same(score.json(), { error: 'validation_failed', message: 'the body is not valid', details: [{ path: ['name'], message: NAME_RULE }] }, JSON.stringify(name))
    const config = await put(name)
    t.equal(config.statusCode, 400, `config ${JSON.stringify(name)}`)
    t.same(config.json(), { error: 'validation_failed', message: 'the path parameters are not valid', details: [{ path: ['name'], message: NAME_RULE }] }, `config ${JSON.stringify(name)}`)
  }
  t.equal((await postScore(app, key.secret, { traceId, name: 'acc', value: 5 })).statusCode, 400, 'the config of acc holds')
  t.equal((await postScore(app, key.secret, { traceId, name: 'très bien', value: 5 })).statusCode, 202, 'inner spaces and letters beyond ASCII are fine')
})

t.test('a batch\'s refused score gets exactly the body it would have got alone; a NUL agent name refuses only its score', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const agent = randomId('agent-')
  for (const score of [{ traceId, name: 'n', value: 'x' }, { traceId, name: 'n', value: 1, agentId: 'z\u0000' }, { name: 'n', value: 1 }]) {
    const alone = await postScore(app, key.secret, score)
    t.equal(alone.statusCode, 400, JSON.stringify(score))
    const batch = await postScores(app, key.secret, [score])
    t.same(batch.json().results, [{ status: 400, ...alone.json() }], JSON.stringify(score))
  }
  const batch = await postScores(app, key.secret, [{ traceId, name: 'n', value: 1, agentId: agent }, { traceId, name: 'n', value: 2, agentId: 'z\u0000' }])
  t.equal(batch.statusCode, 207)
  t.same(batch.json().results.map((r: { status: number }) => r.status), [202, 400])
  t.equal(batch.json().results[1].error, 'invalid_text')
  await shipped(app)
  const { scores } = await listScores(app, user, `?traceId=${traceId}`)
  t.same(scores.map((s) => s.value), [1], 'the other score is stored')
})

t.test('a trace\'s score is of its earliest live agent, not of a deleted agent of the trace', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceIds = [1, 2, 3, 4].map(() => randomId('trace-'))
  const agentOf = async (name: string, traceId: string, timestamp: string) => {
    const res = await sendEvent(app, key.secret, { agentId: name, timestamp, metadata: { traceId } })
    t.equal(res.statusCode, 202, res.body)
    return res.json().agentId as string
  }
  let gone = ''
  let live = ''
  let later = ''
  for (const traceId of traceIds) {
    gone = await agentOf('gone-bot', traceId, '2026-01-01T00:00:00.000Z')
    live = await agentOf('live-bot', traceId, '2026-01-01T00:00:01.000Z')
    later = await agentOf('later-bot', traceId, '2026-01-01T00:00:02.000Z')
  }
  await shipped(app)
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/me/agents/${gone}`, headers: user.auth })).statusCode, 204)
  for (const traceId of traceIds) t.equal((await postScore(app, key.secret, { traceId, name: 'helpfulness', value: 1 })).statusCode, 202)
  await shipped(app)
  const { scores } = await listScores(app, user, '?limit=100')
  t.equal(scores.length, traceIds.length, 'every score is visible')
  t.same(scores.map((s) => s.agent?.id), traceIds.map(() => live), 'of the earliest live agent')
  const { scores: ofLive } = await listScores(app, user, `?agentId=${live}`)
  t.equal(ofLive.length, traceIds.length)
  for (const id of [live, later]) t.equal((await app.inject({ method: 'DELETE', url: `/v1/me/agents/${id}`, headers: user.auth })).statusCode, 204)
  t.same((await listScores(app, user, '?limit=100')).scores, [], 'with every agent of the trace deleted, its score is hidden with them')
})

t.test('the summary\'s mean of values near the largest double is theirs, not 0', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const big = 1.5e308
  for (const value of [big, big, big / 3]) t.equal((await postScore(app, key.secret, { traceId, name: 'huge', value })).statusCode, 202)
  t.equal((await postScore(app, key.secret, { traceId, name: 'small', value: 0.25 })).statusCode, 202)
  await shipped(app)
  const summary = (await app.inject({ method: 'GET', url: '/v1/me/scores/summary', headers: user.auth })).json()
  const huge = summary.names.find((n: { name: string }) => n.name === 'huge')
  const expected = big / 9 * 7 // (2 big + big / 3) / 3, without overflowing here
  t.ok(Math.abs(huge.numeric.mean - expected) / expected < 1e-12, `mean ${huge.numeric.mean} ≈ ${expected}`)
  t.equal(summary.names.find((n: { name: string }) => n.name === 'small').numeric.mean, 0.25, 'small values keep their exact mean')
})

// The reads of scores take their query as the search lists do (docs/api.md#reading-scores).
const READS = ['/v1/me/scores', '/v1/me/scores/summary']
function read (user: TestUser, url: string) {
  return app.inject({ method: 'GET', url, headers: user.auth })
}

t.test('limit is clamped to 1..500 as on the search lists; a value that is not a number is the default', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const traceId = randomId('trace-')
  for (let i = 0; i < 3; i++) t.equal((await postScore(app, key.secret, { traceId, name: 'clamped', value: i })).statusCode, 202)
  const one = await listScores(app, user, '?limit=0')
  t.same(one.scores.map((s) => s.value), [2], 'limit=0 is 1')
  t.type(one.nextCursor, 'string')
  t.same((await listScores(app, user, '?limit=-5')).scores.length, 1, 'a negative limit is 1')
  t.same((await listScores(app, user, '?limit=9999')).scores.length, 3, 'above 500 is 500')
  t.same((await listScores(app, user, '?limit=abc')).scores.length, 3, 'not a number: the default, 50')
})

t.test('from not before to is a 400 naming from, on the list and the summary', async (t) => {
  const user = await newUser(app)
  for (const path of READS) {
    for (const [from, to] of [['2026-11-02T00:00:00Z', '2026-11-01T00:00:00Z'], ['2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z']]) {
      const res = await read(user, `${path}?from=${from}&to=${to}`)
      t.equal(res.statusCode, 400, `${path} ${from} ${to}`)
      t.same(res.json(), { error: 'validation_failed', message: 'the querystring is not valid', details: [{ path: ['from'], message: 'must be earlier than to' }] })
    }
  }
})

t.test('the summary\'s from with no to is said against now, which to defaults to', async (t) => {
  const user = await newUser(app)
  const tomorrow = new Date(Date.now() + 86_400_000).toISOString()
  const res = await read(user, `/v1/me/scores/summary?from=${tomorrow}`)
  t.equal(res.statusCode, 400)
  t.same(res.json().details, [{ path: ['from'], message: 'must be earlier than now (to defaults to now)' }])
  const long = await read(user, `/v1/me/scores/summary?from=${new Date(Date.now() - 400 * 86_400_000).toISOString()}`)
  t.same(long.json().details, [{ path: ['from'], message: 'must be at most 366 days before now (to defaults to now)' }])
})

t.test('an instant outside [1970, 2106) on the reads of scores says the range', async (t) => {
  const user = await newUser(app)
  for (const path of READS) {
    const res = await read(user, `${path}?from=1969-12-31T00:00:00Z&to=1970-01-02T00:00:00Z`)
    t.equal(res.statusCode, 400, path)
    t.same(res.json().details, [{ path: ['from'], message: 'must be an instant from 1970-01-01T00:00:00Z up to (not including) 2106-01-01T00:00:00Z' }], path)
  }
})

t.test('from and to take an ISO 8601 date-time or unix milliseconds, as on the search lists', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  t.equal((await postScore(app, key.secret, { traceId: randomId('trace-'), name: 'timed', value: 1 })).statusCode, 202)
  const now = Date.now()
  t.equal((await listScores(app, user, `?from=${now - 60_000}&to=${now + 60_000}`)).scores.length, 1)
  t.equal((await listScores(app, user, `?from=${now + 60_000}`)).scores.length, 0)
  const summary = await read(user, `/v1/me/scores/summary?from=${now - 60_000}&to=${now + 60_000}`)
  t.equal(summary.statusCode, 200, summary.body)
  t.equal(summary.json().names[0].count, 1)
  for (const path of READS) {
    const bad = await read(user, `${path}?to=yesterday`)
    t.equal(bad.statusCode, 400)
    t.same(bad.json().details, [{ path: ['to'], message: 'must be an ISO 8601 date-time (e.g. 2026-11-27T09:00:00Z) or unix milliseconds' }])
  }
})

t.test('unknown parameters are ignored, on the list and the summary', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  t.equal((await postScore(app, key.secret, { traceId: randomId('trace-'), name: 'kept', value: 1 })).statusCode, 202)
  t.equal((await listScores(app, user, '?bogus=1&q=x&name=kept')).scores.length, 1)
  const summary = await read(user, '/v1/me/scores/summary?bogus=1&limit=0&cursor=x&name=kept')
  t.equal(summary.statusCode, 200, summary.body)
  t.equal(summary.json().names[0].count, 1)
})

t.test('a filter that is not valid text is a 400 naming it, as the search\'s text filters', async (t) => {
  const user = await newUser(app)
  for (const path of READS) {
    for (const param of ['name', 'traceId', 'sessionId', 'agentId', 'from']) {
      if (path.endsWith('summary') && (param === 'traceId' || param === 'sessionId')) continue
      const res = await read(user, `${path}?${param}=%ED%A0%80`)
      t.equal(res.statusCode, 400, `${path} ${param}`)
      t.same(res.json().details, [{ path: [param], message: 'must be valid percent-encoded UTF-8 (a % itself is sent as %25)' }], `${path} ${param}`)
    }
    for (const name of ['a%01b', '%7F', 'a%C2%85']) {
      const res = await read(user, `${path}?name=${name}`)
      t.equal(res.statusCode, 400, `${path} name=${name}`)
      t.same(res.json().details.map((d: { path: string[] }) => d.path), [['name']], `${path} name=${name}`)
    }
  }
})

t.test('a filter given twice is a 400 saying it must be given once', async (t) => {
  const user = await newUser(app)
  for (const path of READS) {
    for (const param of ['name', 'source', 'from']) {
      const value = param === 'source' ? 'api' : param === 'from' ? '2026-11-01T00:00:00Z' : 'x'
      const res = await read(user, `${path}?${param}=${value}&${param}=${value}`)
      t.equal(res.statusCode, 400, `${path} ${param}`)
      t.same(res.json().details, [{ path: [param], message: 'must be given once' }], `${path} ${param}`)
    }
  }
})

t.test('a malformed agentId is dropped, as on the search lists: all scores, not none', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  t.equal((await postScore(app, key.secret, { traceId: randomId('trace-'), name: 'dropped', value: 1, agentId: 'dropped-bot' })).statusCode, 202)
  t.equal((await postScore(app, key.secret, { traceId: randomId('trace-'), name: 'dropped', value: 2 })).statusCode, 202)
  const agentId: string = (await listScores(app, user)).scores.find((s) => s.agent)!.agent.id
  for (const junk of ['not-a-cuid', 'x'.repeat(121), 'C' + agentId.slice(1)]) {
    t.same((await listScores(app, user, `?agentId=${junk}`)).scores.map((s) => s.value).sort(), [1, 2], `agentId=${junk.slice(0, 20)} is no filter`)
    const summary = await read(user, `/v1/me/scores/summary?agentId=${junk}`)
    t.equal(summary.statusCode, 200, summary.body)
    t.equal(summary.json().names[0].count, 2, `summary agentId=${junk.slice(0, 20)} is no filter`)
    t.same((await listScores(app, user, `?agentId=${junk}&agentId=${agentId}`)).scores.map((s) => s.value), [1], 'the cuid beside it still filters')
  }
})

t.test('traceId, sessionId and agentId repeat for any of several values, scoped to the caller', async (t) => {
  const user = await newUser(app)
  const other = await newUser(app)
  const key = await user.createKey()
  const otherKey = await other.createKey()
  const [ta, tb, tc] = [randomId('trace-'), randomId('trace-'), randomId('trace-')]
  const [sa, sb] = [randomId('session-'), randomId('session-')]
  for (const [i, target] of [{ traceId: ta, agentId: 'rep-a' }, { traceId: tb, agentId: 'rep-b' }, { traceId: tc, agentId: 'rep-c' }, { sessionId: sa }, { sessionId: sb }].entries()) {
    t.equal((await postScore(app, key.secret, { ...target, name: 'rep', value: i })).statusCode, 202)
  }
  // The other user's scores of the same trace and session ids are never the caller's.
  t.equal((await postScore(app, otherKey.secret, { traceId: ta, name: 'rep', value: 10 })).statusCode, 202)
  t.equal((await postScore(app, otherKey.secret, { sessionId: sa, name: 'rep', value: 11 })).statusCode, 202)
  const values = async (query: string) => (await listScores(app, user, query)).scores.map((s) => s.value).sort()
  t.same(await values(`?traceId=${ta}&traceId=${tb}`), [0, 1])
  t.same(await values(`?sessionId=${sa}&sessionId=${sb}&sessionId=${sa}`), [3, 4])
  t.same(await values(`?traceId=${ta}&traceId=${tc}&sessionId=${sa}`), [], 'AND across fields')
  const agents = new Map((await listScores(app, user, '?name=rep')).scores.filter((s) => s.agent).map((s) => [s.agent.displayName, s.agent.id]))
  t.same(await values(`?agentId=${agents.get('rep-a')}&agentId=${agents.get('rep-c')}`), [0, 2])
  const summary = await read(user, `/v1/me/scores/summary?agentId=${agents.get('rep-a')}&agentId=${agents.get('rep-b')}`)
  t.equal(summary.statusCode, 200, summary.body)
  t.same(summary.json().names.map((n: { name: string; count: number }) => [n.name, n.count]), [['rep', 2]])
  t.same((await listScores(app, other, `?traceId=${ta}&traceId=${tb}&sessionId=${sa}&sessionId=${sb}`)).scores.map((s) => s.value), [])
  t.same((await listScores(app, other, `?traceId=${ta}&traceId=${tb}`)).scores.map((s) => s.value), [10])
})

t.test('more than 50 values of a repeatable filter is the search lists\' 400 naming it', async (t) => {
  const user = await newUser(app)
  const cuids = Array.from({ length: 51 }, (_, i) => `c${String(i).padStart(24, '0')}`)
  for (const path of READS) {
    for (const param of ['traceId', 'sessionId', 'agentId']) {
      if (path.endsWith('summary') && param !== 'agentId') continue
      const values = param === 'agentId' ? cuids : cuids.map((_, i) => `id-${i}`)
      const res = await read(user, `${path}?${values.map((v) => `${param}=${v}`).join('&')}`)
      t.equal(res.statusCode, 400, `${path} ${param}`)
      t.same(res.json(), { error: 'validation_failed', message: 'the querystring is not valid', details: [{ path: [param], message: 'at most 50 values' }] }, `${path} ${param}`)
      t.equal((await read(user, `${path}?${values.slice(1).map((v) => `${param}=${v}`).join('&')}`)).statusCode, 200, `${path} 50 ${param} values`)
    }
    // Dropped agentId values do not count towards the limit, as on the search lists.
    t.equal((await read(user, `${path}?${[...cuids.slice(1), ...cuids.map((_, i) => `junk-${i}`)].map((v) => `agentId=${v}`).join('&')}`)).statusCode, 200)
  }
  const empty = await read(user, '/v1/me/scores?traceId=')
  t.same(empty.json().details, [{ path: ['traceId'], message: 'must be 1 to 200 characters' }], 'an empty traceId is the search\'s 400')
})

t.test('a name no score can have is a 400 saying what a name is, not a pattern', async (t) => {
  const user = await newUser(app)
  const message = NAME_RULE
  for (const path of READS) {
    for (const name of ['a%01b', '%20acc', 'acc%E2%80%8B', '', 'x'.repeat(201)]) {
      const res = await read(user, `${path}?name=${name}`)
      t.equal(res.statusCode, 400, `${path} name=${name.slice(0, 20)}`)
      t.same(res.json(), { error: 'validation_failed', message: 'the querystring is not valid', details: [{ path: ['name'], message }] }, `${path} name=${name.slice(0, 20)}`)
    }
    t.equal((await read(user, `${path}?name=${'x'.repeat(200)}`)).statusCode, 200, `${path} a name of 200 characters`)
  }
})

t.test('a scores batch over the burst: each refused score carries its retryAfter, as in the events batch', async (t) => {
  const user = await newUser(app, { burst: 3 })
  const key = await user.createKey()
  const traceId = randomId('trace-')
  const res = await postScores(app, key.secret, Array.from({ length: 5 }, (_, i) => ({ traceId, name: 'burst', value: i })))
  t.equal(res.statusCode, 207)
  const { results } = res.json()
  t.same(results.map((r: { status: number }) => r.status), [202, 202, 202, 429, 429])
  t.equal(results[3].error, 'rate_limited')
  const [first, second] = [results[3].retryAfter, results[4].retryAfter]
  t.ok(Number.isInteger(first) && first >= 1 && first <= 20, `the first refused fits within 20 s (${first})`)
  t.ok(second > first, `the next one later (${second})`)
  t.equal(res.headers['retry-after'], String(second), 'the answer\'s Retry-After is the longest')
  t.equal(results[0].retryAfter, undefined, 'an accepted score has none')
})

t.test('a label holding a control character is refused at ingest, as the filter would refuse it; a value meant as a number that is none is a 400', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const refused = await postScore(app, key.secret, { traceId: randomId('trace-'), name: 'ctl', label: 'a\u0001b' })
  t.equal(refused.statusCode, 400)
  t.match(JSON.stringify(refused.json()), /label.*must not contain control characters/)
  t.equal((await postScore(app, key.secret, { traceId: randomId('trace-'), name: 'ctl', label: 'two\nlines' })).statusCode, 202, 'a line break is text')
  for (const value of ['..1e999', '-1e999..', '1..2..3', '1e999']) {
    const res = await app.inject({ url: `/v1/me/traces?score.sq=${encodeURIComponent(value)}`, headers: user.auth })
    t.equal(res.statusCode, 400, value)
    t.match(res.json().details?.[0]?.message ?? '', /must be a number or a range of finite decimal numbers/, value)
  }
  for (const label of ['v1..2', 'good', '0.5..1', '..']) {
    t.equal((await app.inject({ url: `/v1/me/traces?score.sq=${encodeURIComponent(label)}`, headers: user.auth })).statusCode, 200, label)
  }
})
