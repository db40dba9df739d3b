import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, newUser, sendBatch, shipped, type TestUser } from '../../../helpers/app.ts'
import { ScoresRepository } from '../../../../src/storage/scores-repository.ts'
import { HOUR, matches, newestFirst, query, randomFilters, rng, setUp, walk, type Ev, type Filters } from './search-fixture.ts'

// The score filters of the search (docs/api.md#scores-in-the-search): events, traces, sessions and
// facets compared with a brute-force filter over the same events and the scores as sent (the latest
// write of each id), another user's scores on the same trace and session ids, replaced scores.

type Score = Record<string, any>

/** The app of the tests that need few events (the first test has one of its own, from the fixture). */
const small = await buildTestApp(t)

async function postScores (app: FastifyInstance, secret: string, scores: Score[]) {
  for (let i = 0; i < scores.length; i += 500) {
    const res = await app.inject({
      method: 'POST', url: '/v1/scores/batch', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, payload: JSON.stringify({ scores: scores.slice(i, i + 500) }),
    })
    if (res.statusCode !== 207 || !res.json().results.every((x: Ev) => x.accepted)) throw new Error(`${res.statusCode} ${res.body}`)
  }
}

/** Whether a score is of this event: of the event, its span, its whole trace or its session. */
function isOf (e: Ev, s: Score): boolean {
  if (s.eventId !== undefined) return s.eventId === e.eventId
  if (s.sessionId !== undefined) return s.sessionId === e.sessionId
  if (s.spanId !== undefined) return s.traceId === e.traceId && s.spanId === e.spanId
  return s.traceId === e.traceId
}

/** Whether a score has a value as docs/api.md states it: its label, or its value (booleans 1 and 0) in a range or equal to a number. */
function hasValue (s: Score, v: string): boolean {
  const label = s.label ?? (s.boolean === undefined ? undefined : String(s.boolean))
  if (label === v) return true
  const n: number | undefined = s.value ?? (s.boolean === undefined ? undefined : s.boolean ? 1 : 0)
  if (n === undefined) return false
  const range = /^(.*?)\.\.(.*)$/.exec(v)
  if (!range) return v.trim() !== '' && Number(v) === n
  const lo = range[1] === '' ? -Infinity : Number(range[1])
  const hi = range[2] === '' ? Infinity : Number(range[2])
  return n >= lo && n <= hi
}

/** The brute-force score filter: every score.<name> has a score of the event with one of its values. */
function scoreMatches (e: Ev, f: Filters, scores: Score[]): boolean {
  for (const [k, v] of Object.entries(f)) {
    if (!k.startsWith('score.')) continue
    const name = k.slice(6)
    const values = ([] as string[]).concat(v)
    if (!scores.some((s) => s.name === name && isOf(e, s) && values.some((x) => hasValue(s, x)))) return false
  }
  return true
}

/** The latest write of each score id, in the order sent. */
function latestOf (writes: Score[]): Score[] {
  return [...new Map(writes.map((s) => [s.scoreId, s])).values()]
}

/** Groups (traces or sessions) with a matching event, as the API lists them: `id:eventCount`, latest activity first. */
function groupsOf (stored: Ev[], column: 'traceId' | 'sessionId', match: (e: Ev) => boolean): string[] {
  const ids = new Set(stored.filter((e) => e[column] && match(e)).map((e) => e[column]))
  const groups = new Map<string, { last: number; n: number }>()
  for (const e of stored.filter((x) => x[column] && ids.has(x[column]))) {
    const g = groups.get(e[column]) ?? { last: 0, n: 0 }
    groups.set(e[column], { last: Math.max(g.last, Date.parse(e.timestamp)), n: g.n + 1 })
  }
  return [...groups].sort((a, b) => b[1].last - a[1].last || (a[0] < b[0] ? -1 : 1)).map(([id, g]) => `${id}:${g.n}`)
}

const TONES = ['polite', 'rude', 'neutral', '5', '1..2']

/** Scores of the events' targets of every kind (and of a few targets that never arrive), deterministic. */
function generateScores (r: () => number, events: Ev[], prefix: string, n: number): Score[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!
  const spans = events.filter((e) => e.spanId)
  return Array.from({ length: n }, (_, i) => {
    const e = pick(events)
    const kind = r()
    const target = kind < 0.3
      ? { eventId: e.eventId }
      : kind < 0.55 && e.traceId
        ? { traceId: e.traceId }
        : kind < 0.75 && spans.length > 0
          ? (({ traceId, spanId }) => ({ traceId, spanId }))(pick(spans))
          : kind < 0.95 && e.sessionId
            ? { sessionId: e.sessionId }
            : pick([{ traceId: 'tr-never' }, { eventId: 'evt_never' }, { sessionId: 'se-never' }])
    const which = r()
    const value = which < 0.45
      ? { name: 'accuracy', value: Math.round(r() * 100) / 100 }
      : which < 0.7 ? { name: 'thumbs', boolean: r() < 0.5 } : { name: 'tone', label: pick(TONES) }
    return { scoreId: `${prefix}-${i}`, ...target, ...value }
  })
}

async function setUpScores (t: Test) {
  const base = await setUp(t)
  const { app, alice, bob, now } = base
  const aliceKey = (await alice.createKey()).secret
  const bobKey = (await bob.createKey()).secret
  // Spans of some of the fixture's traces, so that span scores have events to count for.
  const spanEvents = Array.from({ length: 40 }, (_, i) => ({
    agentId: 'search-agent-1', type: i % 2 ? 'tool' : 'reasoning', reasoning: 'span work',
    timestamp: new Date(now - 3 * HOUR - i * 60_000).toISOString(),
    metadata: { traceId: `tr-${i % 9}`, spanId: `sp-${i % 13}`, ...(i % 3 ? { sessionId: `se-${i % 7}` } : {}) },
  }))
  for (const [key, events] of [[aliceKey, spanEvents], [bobKey, spanEvents]] as const) {
    const res = await sendBatch(app, key, events)
    if (res.statusCode !== 207) throw new Error(res.body)
  }
  await shipped(app)
  const stored = await walk(app, alice, '/v1/me/events?since=all&limit=1000', 'events')
  const bobs = await walk(app, bob, '/v1/me/events?since=all&limit=1000', 'events')

  const r = rng(5)
  const first = generateScores(r, stored, 'a', 400)
  await postScores(app, aliceKey, first)
  await shipped(app)
  // Re-sent ids: a new value, and for some a new name or target; the store keeps both writes.
  const again = generateScores(r, stored, 'a', 400).filter(() => r() < 0.15)
  await postScores(app, aliceKey, again)
  // Bob scores his events: his trace and session ids are the same strings as Alice's.
  const bobScores = generateScores(rng(6), bobs, 'b', 300)
  await postScores(app, bobKey, [...bobScores, ...bobs.slice(0, 50).map((e, i) => ({ scoreId: `only-${i}`, traceId: e.traceId ?? 'tr-1', name: 'bob-only', value: 1 }))])
  await shipped(app)
  return { ...base, stored, bobs, scores: latestOf([...first, ...again]), replaced: again.length }
}

t.test('score filters answer what a brute-force filter over the latest writes does, on every list, paged once through', async (t) => {
  const { app, alice, bob, stored, scores, replaced } = await setUpScores(t)
  t.ok(replaced >= 30, `some scores were re-sent (${replaced})`)
  const r = rng(9)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!
  const accuracy = scores.filter((s) => s.name === 'accuracy')
  const scoreChoices: ((f: Filters) => void)[] = [
    (f) => { const lo = Math.round(r() * 70) / 100; f['score.accuracy'] = `${lo}..${(lo * 100 + 30) / 100}` },
    (f) => { f['score.accuracy'] = `${Math.round(r() * 100) / 100}..` },
    (f) => { f['score.accuracy'] = `..${Math.round(r() * 100) / 100}` },
    (f) => { f['score.accuracy'] = String(pick(accuracy).value) },
    (f) => { f['score.accuracy'] = ['..0.1', '0.9..'] },
    (f) => { f['score.thumbs'] = pick(['true', 'false']) },
    (f) => { f['score.thumbs'] = pick(['1', '0..0.5', ['true', 'false']]) },
    (f) => { f['score.tone'] = pick(['polite', 'rude', '5', '1..2', ['neutral', 'polite']]) },
    (f) => { f['score.tone'] = 'high' },
    (f) => { f['score.bob-only'] = '1' },
  ]
  const expectEvents = (f: Filters) => (e: Ev) => matches(e, f) && scoreMatches(e, f, scores)
  let nonEmpty = 0
  for (let i = 0; i < 16; i++) {
    const f: Filters = r() < 0.5 ? {} : randomFilters(r, stored)
    delete f.from
    delete f.to
    for (let n = 1 + Math.floor(r() * 2); n > 0; n--) pick(scoreChoices)(f)
    const match = expectEvents(f)
    const expected = stored.filter(match).sort(newestFirst).map((e) => e.eventId)
    const got = (await walk(app, alice, `/v1/me/events?limit=40&${query(f)}`, 'events')).map((e) => e.eventId)
    t.same(got, expected, `events ${query(f)} (${expected.length})`)
    if (expected.length > 0) nonEmpty++
    const traces = (await walk(app, alice, `/v1/me/traces?since=all&limit=8&${query(f)}`, 'traces')).map((x) => `${x.traceId}:${x.eventCount}`)
    t.same(traces, groupsOf(stored, 'traceId', match), `traces ${query(f)}`)
    const sessions = (await walk(app, alice, `/v1/me/sessions?limit=6&${query(f)}`, 'sessions')).map((x) => `${x.sessionId}:${x.eventCount}`)
    t.same(sessions, groupsOf(stored, 'sessionId', match), `sessions ${query(f)}`)
    const facets = await app.inject({ url: `/v1/me/events/facets?${query(f)}`, headers: alice.auth })
    t.equal(facets.json().total, expected.length, `facets ${query(f)}`)
  }
  t.ok(nonEmpty >= 7, `most combinations match something (${nonEmpty} of 16)`)

  // Each kind of target alone: a score of an event, a span, a whole trace, a session.
  for (const [kind, of] of [['event', (s: Score) => s.eventId], ['span', (s: Score) => s.spanId], ['trace', (s: Score) => s.traceId && !s.spanId], ['session', (s: Score) => s.sessionId]] as const) {
    const s = scores.find((x) => of(x) && x.name === 'accuracy' && stored.some((e) => isOf(e, x)))!
    t.ok(s, `an accuracy score of a ${kind}`)
    const f = { 'score.accuracy': String(s.value) }
    const got = (await walk(app, alice, `/v1/me/events?limit=50&${query(f)}`, 'events')).map((e) => e.eventId)
    t.ok(stored.filter((e) => isOf(e, s)).every((e) => got.includes(e.eventId)), `every event the ${kind} score is of matches`)
    t.same(got, stored.filter(expectEvents(f)).sort(newestFirst).map((e) => e.eventId), `events of ${kind} score ${s.scoreId}`)
  }

  // Labels that read as numbers, booleans as labels and as 1 and 0, alone.
  for (const f of [{ 'score.tone': '5' }, { 'score.tone': '1..2' }, { 'score.thumbs': 'true' }, { 'score.thumbs': '1' }, { 'score.thumbs': '0' }] as Filters[]) {
    const expected = stored.filter(expectEvents(f)).sort(newestFirst).map((e) => e.eventId)
    t.ok(expected.length > 0, `${query(f)} matches some events`)
    t.same((await walk(app, alice, `/v1/me/events?limit=100&${query(f)}`, 'events')).map((e) => e.eventId), expected, `events ${query(f)} (${expected.length})`)
  }

  // Isolation: only Bob has bob-only scores, on trace ids Alice also has.
  const mine = await walk(app, bob, '/v1/me/traces?since=all&score.bob-only=1', 'traces')
  t.ok(mine.length > 0, 'Bob finds his traces by his score')
  t.same(await walk(app, alice, '/v1/me/traces?since=all&score.bob-only=1', 'traces'), [], 'Alice finds none by Bob\'s score')
  t.equal((await app.inject({ url: '/v1/me/events/facets?score.bob-only=1', headers: alice.auth })).json().total, 0, 'nor do her facets count any')
})

t.test('a replaced score matches on its latest write only: a new value, a new target, a new name', async (t) => {
  const app = small
  // The older writes stay stored while the test reads (a merge would leave only the latest).
  await app.clickhouse.command({ query: 'SYSTEM STOP MERGES scores' })
  t.teardown(() => app.clickhouse.command({ query: 'SYSTEM START MERGES scores' }))
  const carol: TestUser = await newUser(app)
  const key = (await carol.createKey()).secret
  const sent = await sendBatch(app, key, ['r-1', 'r-2', 'r-3', 'r-4'].map((traceId) => ({ agentId: 'replacer', type: 'tool', metadata: { traceId } })))
  t.equal(sent.statusCode, 207)
  await postScores(app, key, [
    { scoreId: 'q', traceId: 'r-1', name: 'quality', value: 0.2 },
    { scoreId: 'moved', traceId: 'r-2', name: 'quality', value: 0.3 },
    { scoreId: 'renamed', traceId: 'r-3', name: 'quality', value: 0.1 },
  ])
  await shipped(app)
  const traces = async (qs: string) => (await walk(app, carol, `/v1/me/traces?${qs}`, 'traces')).map((x) => x.traceId).sort()
  t.same(await traces('score.quality=..0.5'), ['r-1', 'r-2', 'r-3'], 'before: the first writes match')
  await postScores(app, key, [
    { scoreId: 'q', traceId: 'r-1', name: 'quality', value: 0.9 },
    { scoreId: 'moved', traceId: 'r-4', name: 'quality', value: 0.3 },
    { scoreId: 'renamed', traceId: 'r-3', name: 'tone', label: 'polite' },
  ])
  await shipped(app)
  const stored = new ScoresRepository(app.clickhouse)
  t.equal(await stored.writesOf(carol.id, 'q'), 2, 'both writes are still stored (not merged)')
  t.same(await traces('score.quality=..0.5'), ['r-4'], 'the old value, the old target and the old name match no more')
  t.same(await traces('score.quality=0.8..1'), ['r-1'], 'the new value matches')
  t.same(await traces('score.tone=polite'), ['r-3'], 'the new name matches')
  const events = await walk(app, carol, '/v1/me/events?score.quality=0.9', 'events')
  t.same(events.map((e) => e.traceId), ['r-1'], 'an exact value, on the events list')
})

t.test('a score-filtered walk while scores arrive, change and merge: each match at most once, every one still matching, then the scores as they are', async (t) => {
  const app = small
  const dave = await newUser(app, { burst: 1_000_000 })
  const key = (await dave.createKey()).secret
  const now = Date.now()
  const sent = await sendBatch(app, key, Array.from({ length: 40 }, (_, i) => ({ agentId: 'pager', type: 'tool', timestamp: new Date(now - HOUR - (i % 10) * 1000).toISOString(), metadata: { traceId: `p-${i}` } })))
  const ids: string[] = sent.json().results.map((x: Ev) => x.eventId as string)
  await postScores(app, key, Array.from({ length: 20 }, (_, i) => ({ scoreId: `s-${i}`, traceId: `p-${i}`, name: 'm', value: 1 })))
  await shipped(app)
  const latest = new Map<string, number>(Array.from({ length: 20 }, (_, i) => [`p-${i}`, 1]))
  // Between two pages, from the oldest (the last pages) on: p-i re-scored out of the range,
  // p-(10+i) re-scored still in it, p-(20+i) newly in it (p-30..p-39 never are); then the parts
  // merged, as the engine does in the background.
  const change = async (n: number) => {
    const i = 9 - n
    await postScores(app, key, [
      { scoreId: `s-${i}`, traceId: `p-${i}`, name: 'm', value: 0 },
      { scoreId: `s-${10 + i}`, traceId: `p-${10 + i}`, name: 'm', value: 0.8 },
      { scoreId: `n-${i}`, traceId: `p-${20 + i}`, name: 'm', value: 1 },
    ])
    for (const [trace, v] of [[`p-${i}`, 0], [`p-${10 + i}`, 0.8], [`p-${20 + i}`, 1]] as const) latest.set(trace, v)
    await shipped(app)
    await app.clickhouse.command({ query: 'OPTIMIZE TABLE scores FINAL' })
  }
  const got: string[] = []
  let cursor: string | null = null
  let changes = 0
  do {
    const res: { json(): any } = await app.inject({ url: `/v1/me/events?score.m=0.5..&limit=3${cursor ? `&cursor=${cursor}` : ''}`, headers: dave.auth })
    got.push(...res.json().events.map((e: Ev) => e.eventId as string))
    cursor = res.json().nextCursor
    if (cursor && changes < 10) await change(changes++)
  } while (cursor)
  t.ok(changes >= 3, `scores changed between pages (${changes} times)`)
  t.equal(new Set(got).size, got.length, 'no event twice')
  t.same(ids.slice(10, 20).filter((id) => !got.includes(id)), [], 'every event whose score matched all along, re-sent or not')
  t.ok(got.every((id) => ids.indexOf(id) < 30), 'none that never had a matching score')
  const again = (await walk(app, dave, '/v1/me/events?score.m=0.5..&limit=3', 'events')).map((e) => e.eventId as string)
  t.same([...again].sort(), ids.filter((_, i) => (latest.get(`p-${i}`) ?? 0) >= 0.5).sort(), 'the next walk: the scores as they are now')
})

t.test('a malformed score filter is a 400 naming it, on every list', async (t) => {
  const app = small
  const alice = await newUser(app)
  const bad: [string, string][] = [
    ['score.=1', 'score.'], ['score.x=', 'score.x'], ['score.x=2..1', 'score.x'], ['score.x=0.9..0.1&score.x=1', 'score.x'],
    [`score.x=${'v'.repeat(201)}`, 'score.x'], [`score.${'n'.repeat(201)}=1`, `score.${'n'.repeat(201)}`],
    ['score.x=a%01b', 'score.x'], ['score.a%01b=1', 'score.a\u0001b'], ['score.x=%ED%A0%80', 'score.x'],
    [Array.from({ length: 11 }, (_, i) => `score.n${String(i).padStart(2, '0')}=1`).join('&'), 'score.n10'],
  ]
  for (const path of ['/v1/me/events', '/v1/me/traces', '/v1/me/sessions', '/v1/me/events/facets']) {
    for (const [qs, name] of bad) {
      const res = await app.inject({ url: `${path}?${qs}`, headers: alice.auth })
      t.equal(res.statusCode, 400, `${path}?${qs.slice(0, 40)}`)
      t.ok(res.json().details?.some((d: Ev) => d.path[0] === name), `names ${name.slice(0, 20)}: ${res.body.slice(0, 300)}`)
    }
  }
  for (const qs of ['score.x=..', 'score.x=1..x', 'score.x=-1..1e-3', 'score.a.b=true']) {
    const res = await app.inject({ url: `/v1/me/events?${qs}`, headers: alice.auth })
    t.equal(res.statusCode, 200, `${qs}: a label or a range`)
  }
})
