import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, newUser, randomId, sendBatch, sendEvent, shipped, type TestUser } from '../helpers/app.ts'
import { TEST_DATA_DIR } from '../helpers/env.ts'
import { loadLocalSigningKey, signLocalToken } from '../../src/auth/local-signing-key.ts'

// Two instances of the service on one Redis prefix (and one Postgres and ClickHouse), as behind a
// load balancer; each listens on a port, since a stream never ends and inject waits for the end.
const prefix = `test:${randomId()}:`
const a = await buildTestApp(t, { REDIS_PREFIX: prefix, LIVE_HEARTBEAT_MS: '60000' })
const b = await buildTestApp(t, { REDIS_PREFIX: prefix, LIVE_HEARTBEAT_MS: '60000' })
const baseOf = async (app: FastifyInstance) => {
  await app.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
}
const baseA = await baseOf(a)
const baseB = await baseOf(b)

interface SseMessage { event: string; id: string | null; data: string }

/** A reader of GET /v1/me/events/stream: collects its messages; `next` waits for the next one that fits. */
async function openStream (base: string, user: TestUser, opts: { query?: string; lastEventId?: string } = {}) {
  const controller = new AbortController()
  const res = await fetch(`${base}/v1/me/events/stream${opts.query ? `?${opts.query}` : ''}`, {
    headers: { ...user.auth, ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}) },
    signal: controller.signal,
  })
  const messages: SseMessage[] = []
  const comments: string[] = []
  const waiter: { wake: (() => void) | null } = { wake: null }
  let ended = false
  const pump = (async () => {
    if (!res.body) return
    const decoder = new TextDecoder()
    let text = ''
    try {
      for await (const chunk of res.body) {
        text += decoder.decode(chunk as Uint8Array, { stream: true })
        let end: number
        while ((end = text.indexOf('\n\n')) !== -1) {
          const block = text.slice(0, end)
          text = text.slice(end + 2)
          const m: SseMessage = { event: 'message', id: null, data: '' }
          let isMessage = false
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim())
            else if (line.startsWith('event: ')) { m.event = line.slice(7); isMessage = true } else if (line.startsWith('id: ')) { m.id = line.slice(4); isMessage = true } else if (line.startsWith('data: ')) { m.data += line.slice(6); isMessage = true }
          }
          if (isMessage) messages.push(m)
          waiter.wake?.()
        }
      }
    } catch {
      // aborted
    }
    ended = true
    waiter.wake?.()
  })()
  let read = 0
  const waitFor = async (check: () => boolean, what: string) => {
    while (!check()) {
      if (ended) throw new Error(`the stream ended before ${what}`)
      await new Promise<void>((resolve) => { waiter.wake = resolve })
    }
  }
  await waitFor(() => comments.includes('ready') || res.status !== 200, 'it was ready')
  return {
    res,
    messages,
    /** The next message not read yet. */
    async next (): Promise<SseMessage> {
      await waitFor(() => messages.length > read, 'the next message')
      return messages[read++]!
    },
    async close () {
      controller.abort()
      await pump
    },
    /** Resolves once `count` comments `text` have come. */
    waitForComments: (text: string, count: number) => waitFor(() => comments.filter((c) => c === text).length >= count, `${count} ${text} comments`),
    /** Resolves once the server has ended the stream. */
    async ended () {
      await pump
    },
  }
}

/** A stream's first message for one event sent while it is open (on instance a), the stream closed after: a resume's starting id. */
async function oneDelivered (user: TestUser, secret: string, event: { agentId: string; reasoning: string }): Promise<SseMessage> {
  const stream = await openStream(baseA, user)
  await sendEvent(a, secret, event)
  const message = await stream.next()
  await stream.close()
  return message
}

async function eventsOf (app: FastifyInstance, user: TestUser) {
  const res = await app.inject({ url: '/v1/me/events?limit=1000', headers: user.auth })
  return res.json().events as Record<string, unknown>[]
}

t.test('an acknowledged event reaches the stream after its 202, as GET /v1/me/events shows it', async (t) => {
  const user = await newUser(a, { tier: 'enterprise' })
  const key = await user.createKey()
  const stream = await openStream(baseA, user)
  t.teardown(() => stream.close())
  t.equal(stream.res.status, 200)
  t.match(stream.res.headers.get('content-type'), /^text\/event-stream/)
  const sent = await sendEvent(a, key.secret, {
    agentId: 'live-agent', type: 'tool', toolExecuted: 'search', model: 'gpt-4o', outcome: 'success', durationMs: 12,
    input: { prompt: 'find it', context: { depth: 2 } }, reasoning: 'because', amount: { token: 'USDC', value: 1.5 },
    metadata: { sessionId: 's-1', traceId: 't-1', privacyLevel: 'standard', tokensBreakdown: { inputBase: 10, output: 5 }, git: { branch: 'main' } },
  })
  t.equal(sent.statusCode, 202)
  const m = await stream.next()
  t.equal(m.event, 'message')
  t.match(m.id, /^\d+-\d+:0$/, 'each event has an id to resume from')
  const live = JSON.parse(m.data)
  t.equal(live.eventId, sent.json().eventId)
  await shipped(a)
  const listed = (await eventsOf(a, user)).find((e) => e.eventId === live.eventId)
  t.same(live, listed, 'the same fields and values as GET /v1/me/events')
  t.strictSame(Object.keys(live).sort(), Object.keys(listed!).sort())
})

t.test('a batch larger than the stream buffer (256 KiB) reaches a reader that keeps up, every event once, without a gap', async (t) => {
  const user = await newUser(a, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const stream = await openStream(baseA, user)
  t.teardown(() => stream.close())
  // 500 events of about 1.2 KB each on the stream: about 600 KB in one batch.
  const events = Array.from({ length: 500 }, (_, i) => ({ agentId: 'big-batch', type: 'action', reasoning: `step ${i} ${'r'.repeat(400)}`, metadata: { k: i } }))
  const res = await sendBatch(a, key.secret, events)
  t.equal(res.statusCode, 207)
  const sent = (res.json().results as { eventId: string }[]).map((r) => r.eventId)
  const got: string[] = []
  while (got.length < sent.length) {
    const m = await stream.next()
    t.equal(m.event, 'message', `no ${m.event === 'gap' ? `gap (${m.data})` : m.event} told`)
    if (m.event !== 'message') break
    got.push(JSON.parse(m.data).eventId)
  }
  t.same(got, sent, 'all 500, in order')
})

t.test('two large batches of a new agent, sent together, reach a reader that keeps up, every event once, without a gap', async (t) => {
  const user = await newUser(a, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const stream = await openStream(baseA, user)
  t.teardown(() => stream.close())
  // An agent the stream has not seen: its name is looked up while both batches arrive.
  const agentId = randomId('pair-')
  const batch = (k: number) => Array.from({ length: 500 }, (_, i) => ({ agentId, type: 'action', reasoning: `b${k} ${i} ${'p'.repeat(1500)}` }))
  const [one, two] = await Promise.all([sendBatch(a, key.secret, batch(0)), sendBatch(a, key.secret, batch(1))])
  const sent = new Set([...one!.json().results, ...two!.json().results].map((r: { eventId: string }) => r.eventId))
  t.equal(sent.size, 1000)
  const got = new Set<string>()
  while (got.size < sent.size) {
    const m = await stream.next()
    if (m.event !== 'message') {
      t.fail(`${m.event} told: ${m.data}`)
      break
    }
    got.add(JSON.parse(m.data).eventId)
  }
  t.same([...got].sort(), [...sent].sort(), 'all 1,000, each once')
})

t.test('a stream sees only its user\'s events', async (t) => {
  const alice = await newUser(a, { tier: 'enterprise' })
  const bob = await newUser(a, { tier: 'enterprise' })
  const aliceKey = await alice.createKey()
  const bobKey = await bob.createKey()
  const bobs = await openStream(baseA, bob)
  t.teardown(() => bobs.close())
  t.equal((await sendBatch(a, aliceKey.secret, [{ agentId: 'alice-agent' }, { agentId: 'alice-agent' }])).statusCode, 207)
  const mine = await sendEvent(a, bobKey.secret, { agentId: 'bob-agent', reasoning: 'bob' })
  const first = JSON.parse((await bobs.next()).data)
  t.equal(first.eventId, mine.json().eventId, 'the first event on Bob\'s stream is Bob\'s: none of Alice\'s came before it')
})

t.test('an event sent to one instance reaches a stream held on another', async (t) => {
  const user = await newUser(a, { tier: 'enterprise' })
  const key = await user.createKey()
  const onB = await openStream(baseB, user)
  t.teardown(() => onB.close())
  const sent = await sendEvent(a, key.secret, { agentId: 'cross-agent', reasoning: 'sent to A' })
  t.equal(sent.statusCode, 202)
  const got = JSON.parse((await onB.next()).data)
  t.equal(got.eventId, sent.json().eventId)
  t.equal(got.agent.displayName, 'cross-agent', 'with the agent\'s name, though the agent was created after the stream opened')
})

t.test('Last-Event-ID resumes after the last event received, on any instance', async (t) => {
  const user = await newUser(a, { tier: 'enterprise' })
  const key = await user.createKey()
  const one = await oneDelivered(user, key.secret, { agentId: 'resume-agent', reasoning: 'one' })
  // Sent while no stream is open: within the replay window they are kept for a resume.
  const batch = await sendBatch(a, key.secret, [{ agentId: 'resume-agent', reasoning: 'two' }, { agentId: 'resume-agent', reasoning: 'three' }])
  const four = await sendEvent(b, key.secret, { agentId: 'resume-agent', reasoning: 'four' })
  const resumed = await openStream(baseB, user, { lastEventId: one.id! })
  t.teardown(() => resumed.close())
  const got = [await resumed.next(), await resumed.next(), await resumed.next()].map((m) => JSON.parse(m.data).eventId)
  t.same(got, [...batch.json().results.map((r: { eventId: string }) => r.eventId), four.json().eventId], 'the missed events, in order, once each')
  // Resuming from the middle of a batch sends the rest of it.
  const second = resumed.messages[0]!
  const fromMiddle = await openStream(baseA, user, { lastEventId: second.id! })
  t.teardown(() => fromMiddle.close())
  t.equal(JSON.parse((await fromMiddle.next()).data).reasoning, 'three')
  t.equal(JSON.parse((await fromMiddle.next()).data).reasoning, 'four')
})

t.test('a resume missing a backlog far larger than the stream buffer gets all of it, in order, without a gap', async (t) => {
  const user = await newUser(a, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const before = await oneDelivered(user, key.secret, { agentId: 'backlog-agent', reasoning: 'before' })
  // 4 batches of 500 events of about 3.5 KB: about 7 MB missed, 27 times the 256 KiB buffer.
  const sent: string[] = []
  for (let b = 0; b < 4; b++) {
    const res = await sendBatch(a, key.secret, Array.from({ length: 500 }, (_, i) => ({ agentId: 'backlog-agent', reasoning: `${b}-${i} ${'r'.repeat(3500)}` })))
    t.ok(res.json().results.every((r: { status: number }) => r.status === 202), `batch ${b} accepted`)
    sent.push(...res.json().results.map((r: { eventId: string }) => r.eventId))
  }
  const resumed = await openStream(baseB, user, { lastEventId: before.id! })
  t.teardown(() => resumed.close())
  const got: string[] = []
  const gaps: string[] = []
  while (got.length < sent.length) {
    const m = await resumed.next()
    if (m.event === 'gap') gaps.push(m.data)
    else got.push(JSON.parse(m.data).eventId)
    if (gaps.length) break
  }
  t.same(gaps, [], 'no gap')
  t.equal(got.length, sent.length, 'every missed event')
  t.ok(got.every((id, i) => id === sent[i]), 'in the order they were acknowledged')
})

t.test('a Last-Event-ID after every id the stream gave is a 400, not a stream from now', async (t) => {
  const user = await newUser(a, { tier: 'enterprise' })
  const key = await user.createKey()
  const one = await oneDelivered(user, key.secret, { agentId: 'ahead-agent', reasoning: 'one' })
  const [entry] = one.id!.split(':')
  const [ms, seq] = entry!.split('-').map(Number)
  const refused = async (id: string) => {
    const res = await a.inject({ url: '/v1/me/events/stream', headers: { ...user.auth, 'last-event-id': id } })
    t.equal(res.statusCode, 400, `Last-Event-ID: ${id}`)
    t.same(res.json().details, [{ path: ['Last-Event-ID'], message: 'must be an id this stream gave: it is after the newest one' }])
  }
  await refused(`${ms}-${seq! + 1}:0`)
  await refused(`${ms! + 1}-0:0`)
  await refused(`${entry}:1`) // the newest batch held one event: its place 0 only
  await refused(`${entry}:999`)
  // A user whose stream kept nothing: an id from further ahead than the window cannot have been given.
  const other = await newUser(a, { tier: 'enterprise' })
  const res = await a.inject({ url: '/v1/me/events/stream', headers: { ...other.auth, 'last-event-id': `${Date.now() + 3_600_000}-0:0` } })
  t.equal(res.statusCode, 400, 'an id an hour ahead, nothing kept')
  // The newest id itself still resumes.
  const resumed = await openStream(baseB, user, { lastEventId: one.id! })
  t.teardown(() => resumed.close())
  await sendEvent(a, key.secret, { agentId: 'ahead-agent', reasoning: 'two' })
  t.equal(JSON.parse((await resumed.next()).data).reasoning, 'two')
})

t.test('a Last-Event-ID older than the replay window starts with a gap of unknown size', async (t) => {
  const user = await newUser(a, { tier: 'enterprise' })
  const stream = await openStream(baseA, user, { lastEventId: `${Date.now() - 3_600_000}-0:0` })
  t.teardown(() => stream.close())
  const m = await stream.next()
  t.equal(m.event, 'gap')
  t.same(JSON.parse(m.data).missed, null)
})

t.test('filters: the same as GET /v1/me/events, q included', async (t) => {
  const user = await newUser(a, { tier: 'enterprise' })
  const key = await user.createKey()
  const errors = await openStream(baseA, user, { query: 'type=error&q=Timeout' })
  const bySession = await openStream(baseB, user, { query: `sessionId=${encodeURIComponent('s-live')}&outcome=failed` })
  t.teardown(() => Promise.all([errors.close(), bySession.close()]))
  const res = await sendBatch(a, key.secret, [
    { agentId: 'f-agent', type: 'error', errorMessage: 'connection refused' },
    { agentId: 'f-agent', type: 'tool', reasoning: 'a timeout was near', metadata: { sessionId: 's-live' }, outcome: 'success' },
    { agentId: 'f-agent', type: 'error', errorMessage: 'upstream timeout', metadata: { sessionId: 's-live' }, outcome: 'failed' },
  ])
  const third = res.json().results[2].eventId
  t.equal(JSON.parse((await errors.next()).data).eventId, third, 'type=error&q=Timeout: only the error whose text holds "timeout"')
  t.equal(JSON.parse((await bySession.next()).data).eventId, third, 'sessionId and outcome')
  // The other events were not sent: the next event on each stream is the next one that matches.
  const last = await sendEvent(a, key.secret, { agentId: 'f-agent', type: 'error', errorMessage: 'Timeout again', metadata: { sessionId: 's-live' }, outcome: 'failed' })
  t.equal(JSON.parse((await errors.next()).data).eventId, last.json().eventId)
  t.equal(JSON.parse((await bySession.next()).data).eventId, last.json().eventId)
})

t.test('a bad filter is a 400 naming it; no token is a 401; HEAD opens no stream', async (t) => {
  const user = await newUser(a)
  const bad = await a.inject({ url: '/v1/me/events/stream?type=nope', headers: user.auth })
  t.equal(bad.statusCode, 400)
  t.equal(bad.json().details[0].path[0], 'type', 'the error names the parameter')
  const anonymous = await a.inject({ url: '/v1/me/events/stream' })
  t.equal(anonymous.statusCode, 401)
  // HEAD answers at once (inject would wait for the end of a stream).
  const head = await a.inject({ method: 'HEAD', url: '/v1/me/events/stream', headers: user.auth })
  t.equal(head.statusCode, 200)
  t.match(head.headers['content-type'], /^text\/event-stream/)
})

t.test('score filters are refused on the live tail, naming each, while the search takes them', async (t) => {
  const user = await newUser(a)
  const res = await a.inject({ url: '/v1/me/events/stream?type=tool&score.accuracy=0.8..1&score.tone=polite', headers: user.auth })
  t.equal(res.statusCode, 400)
  t.same(res.json().details.map((d: { path: string[] }) => d.path[0]), ['score.accuracy', 'score.tone'], 'each score filter named')
  t.match(res.json().details[0].message, /not available on the live tail/)
  const head = await a.inject({ method: 'HEAD', url: '/v1/me/events/stream?score.accuracy=1', headers: user.auth })
  t.equal(head.statusCode, 400, 'HEAD says what a GET would answer')
  const malformed = await a.inject({ url: '/v1/me/events/stream?score.accuracy=2..1', headers: user.auth })
  t.equal(malformed.statusCode, 400)
  t.match(malformed.json().details[0], { path: ['score.accuracy'], message: /low end/ }, 'a malformed value says what is wrong with it')
  const search = await a.inject({ url: '/v1/me/events?type=tool&score.accuracy=0.8..1&score.tone=polite', headers: user.auth })
  t.equal(search.statusCode, 200, 'the same filters on the search')
})

t.test('an idle stream gets heartbeats past the request timeout; streams are limited per user; closing the instance ends them', async (t) => {
  const app = await buildTestApp(t, { LIVE_MAX_STREAMS_PER_USER: '1', REQUEST_TIMEOUT_MS: '1000', LIVE_HEARTBEAT_MS: '1000' })
  const base = await baseOf(app)
  const user = await newUser(app)
  const one = await openStream(base, user)
  t.teardown(() => one.close())
  const two = await fetch(`${base}/v1/me/events/stream`, { headers: user.auth })
  t.equal(two.status, 429)
  t.equal((await two.json()).reason, 'too_many_streams')
  // HEAD answers at once and takes no stream: it is answered while the user's one stream is held.
  t.equal(app.liveTail.open, 1)
  const head = await fetch(`${base}/v1/me/events/stream`, { method: 'HEAD', headers: user.auth })
  t.equal(head.status, 200, 'HEAD is not limited as a stream')
  t.match(head.headers.get('content-type'), /^text\/event-stream/)
  t.equal(app.liveTail.open, 1, 'HEAD held no stream')
  // Opened together, with a Last-Event-ID (looked up in Redis before the limit is checked): still one.
  const racer = await newUser(app)
  const controller = new AbortController()
  const raced = await Promise.all(Array.from({ length: 4 }, () => fetch(`${base}/v1/me/events/stream`, {
    headers: { ...racer.auth, 'last-event-id': `${Date.now() - 3_600_000}-0:0` }, signal: controller.signal,
  })))
  t.same(raced.map((r) => r.status).sort(), [200, 429, 429, 429], 'one stream of four opened at once')
  controller.abort()
  // Two heartbeats: the stream is open more than twice REQUEST_TIMEOUT_MS after its request.
  await one.waitForComments('heartbeat', 2)
  t.pass('two heartbeats on an idle stream')
  await app.close()
  await one.ended()
  t.pass('closing the instance ended the stream (it did not hold the shutdown)')
})

const NAME_RULE = 'must be 1 to 200 characters in composed Unicode form (NFC), without control or invisible characters (zero-width, bidi, fillers, variation selectors) and without whitespace at the start or end'

t.test('error answers name what is wrong, the same on the search and the stream', async (t) => {
  const user = await newUser(a)
  const bad = async (url: string, headers: Record<string, string> = {}) => {
    const res = await a.inject({ url, headers: { ...user.auth, ...headers } })
    t.equal(res.statusCode, 400, url)
    return res.json() as { message: string; details: { path: string[]; message: string }[] }
  }
  const long = await bad('/v1/me/events/stream', { 'last-event-id': `${Date.now()}-0:${'1'.repeat(60)}` })
  t.equal(long.message, 'the Last-Event-ID header is not valid')
  t.same(long.details, [{ path: ['Last-Event-ID'], message: 'must be at most 64 characters' }])
  for (const id of ['abc', '0', `${Date.now()}-0`, `${Date.now()}-0:x`]) {
    const never = await bad('/v1/me/events/stream', { 'last-event-id': id })
    t.same(never.details, [{ path: ['Last-Event-ID'], message: 'must be an id this stream gave, like 1764250000000-0:3' }], `Last-Event-ID: ${id}`)
  }
  for (const path of ['/v1/me/events', '/v1/me/events/stream', '/v1/me/sessions', '/v1/me/traces', '/v1/me/events/facets']) {
    for (const [query, name] of [['from=1&from=2', 'from'], ['q=a&q=b', 'q'], ['minCostUsd=1&minCostUsd=2', 'minCostUsd']]) {
      const twice = await bad(`${path}?${query}`)
      t.same(twice.details, [{ path: [name], message: 'must be given once' }], `${path}?${query}`)
    }
    for (const name of ['type', 'outcome', 'privacyLevel', 'costStatus']) {
      const wrong = await bad(`${path}?${name}=bogus&${name}=bogus2`)
      t.same(wrong.details.map((d) => d.path), [[name]], `${path}: a wrong ${name} named alone, once`)
    }
    const hasMeta = await bad(`${path}?${Array.from({ length: 21 }, (_, i) => `hasMeta=k${i}`).join('&')}`)
    t.same(hasMeta.details.map((d) => d.path), [['hasMeta']], `${path}: 21 hasMeta`)
    const metas = await bad(`${path}?${Array.from({ length: 21 }, (_, i) => `meta.k${String(i).padStart(2, '0')}=v`).join('&')}`)
    t.same(metas.details.map((d) => d.path), [['meta.k20']], `${path}: 21 meta.*, the first past the limit named`)
    const utf8 = await bad(`${path}?q=%ED%A0%80`)
    t.same(utf8.details, [{ path: ['q'], message: 'must be valid percent-encoded UTF-8 (a % itself is sent as %25)' }], `${path}: q not UTF-8`)
    const percent = await bad(`${path}?q=100%`)
    t.same(percent.details, [{ path: ['q'], message: 'must be valid percent-encoded UTF-8 (a % itself is sent as %25)' }], `${path}: a bare %`)
    const metaUtf8 = await bad(`${path}?meta.env=%FF`)
    t.same(metaUtf8.details.map((d) => d.path), [['meta.env']])
    for (const [query, name] of [['meta.env=prod%00', 'meta.env'], ['q=prod%00', 'q'], ['hasMeta=a%01b', 'hasMeta'], ['meta.a%00b=x', 'meta.a\u0000b']]) {
      const control = await bad(`${path}?${query}`)
      t.match(control.details, [{ path: [name], message: /control characters/ }], `${path}?${query}`)
    }
    // A score name no score can have would match nothing: refused by the name rule, the tail too.
    for (const [query, name] of [['score.%20acc=1', 'score. acc'], ['score.acc%E2%80%8B=1', 'score.acc\u200b']]) {
      const score = await bad(`${path}?${query}`)
      t.same(score.details, [{ path: [name], message: `the score name ${NAME_RULE}` }], `${path}?${query}`)
    }
  }
  // Encoded the right way, the same characters are plain text.
  const fine = await a.inject({ url: '/v1/me/events?q=%25ED%25A0%2580&meta.env=a%2Bb+c', headers: user.auth })
  t.equal(fine.statusCode, 200)
})

t.test('a stream ends when its token expires, saying so; reconnecting with that token is a 401', async (t) => {
  const user = await newUser(a)
  const token = await signLocalToken(await loadLocalSigningKey(TEST_DATA_DIR), user.subject, 2)
  const shortLived = { ...user, auth: { authorization: `Bearer ${token}` } }
  const stream = await openStream(baseA, shortLived)
  const started = Date.now()
  const message = await stream.next()
  t.equal(message.event, 'error')
  t.same(JSON.parse(message.data), { error: 'unauthorized', reason: 'token_expired', message: 'the token has expired: sign in again' })
  t.ok(Date.now() - started < 5000, 'at the expiry, not later')
  await stream.ended()
  const again = await fetch(`${baseA}/v1/me/events/stream`, { headers: shortLived.auth })
  t.equal(again.status, 401)
  t.equal((await again.json()).reason, 'token_expired')
})

t.test('an agent renamed on one instance is shown by its new name on a stream held on another; a deleted one\'s events are not replayed', async (t) => {
  const user = await newUser(a, { tier: 'enterprise' })
  const key = await user.createKey()
  const stream = await openStream(baseB, user)
  t.teardown(() => stream.close())
  const first = await sendEvent(a, key.secret, { agentId: 'renamed-agent', type: 'action' })
  const agentId = first.json().agentId as string
  const before = JSON.parse((await stream.next()).data)
  t.equal(before.agent.displayName, 'renamed-agent')
  const renamed = await a.inject({ method: 'PATCH', url: `/v1/me/agents/${agentId}`, headers: user.auth, payload: { displayName: 'new-name' } })
  t.equal(renamed.statusCode, 200)
  // The rename reaches b over the bus; an event sent after it is shown with the new name.
  await new Promise((resolve) => setTimeout(resolve, 200))
  await sendEvent(a, key.secret, { agentId, type: 'action' })
  const after = JSON.parse((await stream.next()).data)
  t.equal(after.agent.displayName, 'new-name')

  const resumeFrom = (await oneDelivered(user, key.secret, { agentId: 'deleted-agent', reasoning: 'first' })).id!
  const second = await sendEvent(a, key.secret, { agentId: 'deleted-agent', reasoning: 'second' })
  t.equal(second.statusCode, 202)
  t.equal((await a.inject({ method: 'DELETE', url: `/v1/me/agents/${second.json().agentId}`, headers: user.auth })).statusCode, 204)
  await sendEvent(a, key.secret, { agentId, reasoning: 'still here' })
  const resumed = await openStream(baseA, user, { lastEventId: resumeFrom })
  t.teardown(() => resumed.close())
  const replayed = JSON.parse((await resumed.next()).data)
  t.equal(replayed.reasoning, 'still here', 'the deleted agent\'s second event is left out of the replay')
})
