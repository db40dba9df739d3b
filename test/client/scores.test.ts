import './built-client.ts'
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AgentTelemetry, type TelemetryError } from 'agent-telemetry-client'
import { buildTestApp, newUser, randomId, shipped, type TestUser } from '../helpers/app.ts'
import { bodyAjv } from '../../src/validation.ts'
import { scoreName } from '../../schemas/score.ts'

// score(): scores checked at the call, queued beside events, sent to /v1/scores/batch and stored once.

const app = await buildTestApp(t)
await app.listen({ port: 0, host: '127.0.0.1' })
const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`

async function listScores (user: TestUser, name: string) {
  const res = await app.inject({ method: 'GET', url: `/v1/me/scores?limit=500&name=${encodeURIComponent(name)}`, headers: user.auth })
  if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`)
  return (res.json() as { scores: Record<string, any>[] }).scores
}

/** Rows written, before ClickHouse merges replaced writes away: a score stored twice shows here. */
async function rowsWritten (userId: string, name: string): Promise<number> {
  await shipped(app)
  const rs = await app.clickhouse.query({ query: 'SELECT count() AS n FROM scores WHERE user_id = {u:String} AND name = {n:String}', query_params: { u: userId, n: name }, format: 'JSONEachRow' })
  const [row] = await rs.json<{ n: string }>()
  return Number(row?.n ?? 0)
}

t.test('200 scores, then shutdown(): each stored once; an invalid score is dropped and counted', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 10_000_000 })
  const key = await user.createKey('client-scores')
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: key.secret, baseUrl, agentId: randomId('client-'), flushAt: 50, onError: (e) => errors.push(e) })
  const name = randomId('quality-')
  const traceId = randomId('trace-')
  for (let i = 0; i < 200; i++) {
    const score = i % 3 === 0 ? { traceId, name, value: i / 200 } : i % 3 === 1 ? { sessionId: `s-${i}`, name, label: 'good', source: 'llm' as const } : { traceId, spanId: `span-${i}`, name, boolean: true }
    if (!client.score({ ...score, metadata: { i } })) t.fail(`score ${i} was not queued`)
  }
  t.notOk(client.score({ traceId, sessionId: 's', name, value: 1 } as never), 'two targets')
  t.notOk(client.score({ traceId, name, value: 1, label: 'x' } as never), 'two values')
  t.notOk(client.score({ traceId, value: 1 } as never), 'no name')
  t.notOk(client.score({ traceId, name, value: Number.NaN }), 'not a finite number')
  t.notOk(client.score(null as never), 'not an object')
  t.ok(client.track({ reasoning: 'an event beside the scores' }))
  await client.shutdown()

  const stats = client.stats()
  t.match(stats.scores, { sent: 200, queued: 0, inFlight: 0, dropped: { invalid: 5 } })
  t.same(Object.entries(stats.scores.dropped).filter(([, n]) => n > 0), [['invalid', 5]], 'nothing else dropped')
  t.equal(stats.sent, 1, 'events are counted apart')
  t.equal(stats.dropped.invalid, 0)
  t.same(errors.map((e) => [e.reason, e.kind]), Array(5).fill(['invalid', 'score']))
  t.match(errors[0]!.message, 'exactly one of traceId, sessionId, eventId')
  t.match(errors[1]!.message, 'exactly one of value, label, boolean')
  t.match(errors[2]!.message, 'name is required')

  const scores = await listScores(user, name)
  t.equal(scores.length, 200, 'each score once')
  t.equal(new Set(scores.map((s) => s.metadata.i)).size, 200)
  t.equal(await rowsWritten(user.id, name), 200, 'written once each')
  const bySource = scores.reduce<Record<string, number>>((n, s) => ({ ...n, [s.source]: (n[s.source] ?? 0) + 1 }), {})
  t.same(bySource, { code: 133, llm: 67 }, 'source defaults to code')
  t.ok(scores.every((s) => /^sc-/.test(s.scoreId)), 'the client named each score')
  t.ok(scores.find((s) => s.spanId === 'span-2' && s.boolean === true))
  await shipped(app)
})

t.test('score names: the client refuses at the call exactly the names the service refuses', async (t) => {
  const serviceTakes = bodyAjv.compile(scoreName)
  const client = new AgentTelemetry({ apiKey: 'at_live_unused', baseUrl: 'http://127.0.0.1:9', agentId: 'names', onError: () => {} })
  t.teardown(() => client.shutdown(10).catch(() => {}))
  const names = [
    'helpfulness', 'café', 'cafe\u0301', 'acc ', ' acc', 'a c', 'acc\u200b', 'acc\u034f', 'acc\ufe0f', 'acc\u115f', 'acc\u2800', 'acc\u202e',
    'acc\u0000', 'acc\n', 'acc\t', '', ' ', '🙂', '🙂'.repeat(200), '🙂'.repeat(201), 'x'.repeat(200), 'x'.repeat(201), '支付失败', 'Ａ', 'a\u00a0b', 'a\u00a0',
  ]
  for (const name of names) {
    const takes = serviceTakes(name)
    t.equal(client.score({ traceId: 'trace-names', name, value: 1 }), takes, `${JSON.stringify(name)}: ${takes ? 'accepted' : 'refused'} by both`)
  }
})

t.test('an answer lost on the way back: the retried score batch is stored once', async (t) => {
  let requests = 0
  const keys: string[] = []
  const paths: string[] = []
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', async () => {
      const n = ++requests
      keys.push(String(req.headers['idempotency-key']))
      paths.push(String(req.url))
      const answer = await fetch(`${baseUrl}${req.url}`, { method: 'POST', headers: req.headers as Record<string, string>, body: Buffer.concat(chunks) })
      const body = await answer.text()
      if (n === 1) return req.socket.destroy()
      res.writeHead(answer.status, Object.fromEntries(answer.headers)).end(body)
    })
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => proxy.close())
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('client-scores-lost')
  const client = new AgentTelemetry({ apiKey: key.secret, baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, retryBaseMs: 10, onError: () => {} })
  const name = randomId('lost-')
  for (let i = 0; i < 20; i++) client.score({ traceId: `t-${i}`, name, value: i, scoreId: i < 10 ? `mine-${i}` : undefined })
  await client.flush()
  t.same(paths, ['/v1/scores/batch', '/v1/scores/batch'])
  t.equal(keys[0], keys[1], 'the retry carried the same Idempotency-Key')
  t.match(client.stats(), { retries: 1, replayed: 1, scores: { sent: 20 } })
  t.equal(await rowsWritten(user.id, name), 20, 'written once')
  const scores = await listScores(user, name)
  t.equal(scores.length, 20)
  t.ok(scores.find((s) => s.scoreId === 'mine-3' && s.value === 3), 'a scoreId given is kept')
})

t.test('a batch the service no longer knows by its key is sent again: its scores replace themselves, counted once', async (t) => {
  // The proxy passes the first request on under another Idempotency-Key (as if the service had
  // forgotten the key by the time of the retry) and cuts the connection instead of answering.
  let requests = 0
  const answers: { results: { status: number; id: string; scoreId: string }[] }[] = []
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', async () => {
      const n = ++requests
      const headers = { ...req.headers as Record<string, string>, ...(n === 1 ? { 'idempotency-key': `other-${req.headers['idempotency-key']}` } : {}) }
      const answer = await fetch(`${baseUrl}${req.url}`, { method: 'POST', headers, body: Buffer.concat(chunks) })
      const body = await answer.text()
      answers.push(JSON.parse(body))
      if (n === 1) return req.socket.destroy()
      res.writeHead(answer.status, Object.fromEntries(answer.headers)).end(body)
    })
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => proxy.close())
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('client-scores-resent')
  const client = new AgentTelemetry({ apiKey: key.secret, baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, retryBaseMs: 10, onError: () => {} })
  const name = randomId('resent-')
  for (let i = 0; i < 20; i++) client.score({ traceId: `t-${i}`, name, value: i })
  await client.flush()
  t.equal(requests, 2)
  t.match(client.stats(), { retries: 1, replayed: 0, scores: { sent: 20 } })
  const [first, second] = answers.map((a) => a.results)
  t.ok(first!.every((r, i) => r.status === 202 && second![i]!.status === 202 && r.id !== second![i]!.id), 'the service took the batch twice: two writes of each')
  t.same(first!.map((r) => r.scoreId), second!.map((r) => r.scoreId), 'of the same scoreIds')
  const scores = await listScores(user, name)
  t.equal(scores.length, 20, 'but each score counts once: the second write replaced the first')
  const summary = (await app.inject({ method: 'GET', url: `/v1/me/scores/summary?name=${name}`, headers: user.auth })).json() as { names: { count: number }[] }
  t.equal(summary.names[0]!.count, 20)
})

t.test('privacy: the comment is scrubbed at standard and not sent at minimal', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('client-scores-privacy')
  const name = randomId('priv-')
  const comment = 'mail jane.doe@example.com about it'
  for (const privacyLevel of ['full', 'standard', 'minimal'] as const) {
    const client = new AgentTelemetry({ apiKey: key.secret, baseUrl, privacyLevel, onError: () => {} })
    t.ok(client.score({ scoreId: `${name}-${privacyLevel}`, sessionId: 's', name, value: 1, comment, metadata: { note: comment } }))
    await client.shutdown()
    t.equal(client.stats().scores.sent, 1)
  }
  const byId = Object.fromEntries((await listScores(user, name)).map((s) => [s.scoreId.slice(name.length + 1), s]))
  t.equal(byId.full!.comment, comment)
  t.equal(byId.full!.metadata.note, comment)
  t.notMatch(byId.standard!.comment, 'jane.doe@example.com')
  t.match(byId.standard!.comment, /^mail \[redacted:[a-z_]+\] about it$/)
  t.notMatch(byId.standard!.metadata.note, 'jane.doe')
  t.equal(byId.minimal!.comment, null)
  t.same(byId.minimal!.metadata, {})
})

t.test('span.score(): a score of the span, stored with its trace and span ids beside the span\'s event', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey('client-span-scores')
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: key.secret, baseUrl, agentId: randomId('client-'), onError: (e) => errors.push(e) })
  const name = randomId('span-score-')
  let ids: { traceId: string; root: string; child: string } | undefined
  await client.trace('answer', async (root) => {
    await client.span('search', async (span) => {
      t.ok(span.score({ name, value: 0.25, comment: 'weak sources' }), 'queued')
      ids = { traceId: span.traceId, root: root.spanId, child: span.spanId }
    }, { type: 'tool' })
    t.ok(root.score({ name, label: 'correct', source: 'llm' }))
    // A target given anyway is refused as score() refuses two targets, not silently replaced.
    t.notOk(root.score({ name, value: 1, sessionId: 's' } as never), 'a second target is refused')
  })
  await client.shutdown()
  t.match(client.stats(), { sent: 2, scores: { sent: 2, dropped: { invalid: 1 } } })
  t.same(errors.map((e) => [e.reason, e.kind]), [['invalid', 'score']])
  await shipped(app)

  const res = await app.inject({ method: 'GET', url: `/v1/me/traces/${encodeURIComponent(ids!.traceId)}/scores`, headers: user.auth })
  t.equal(res.statusCode, 200, 'the trace\'s scores are listed')
  const scores = (res.json() as { scores: Record<string, any>[] }).scores.filter((s) => s.name === name)
  t.equal(scores.length, 2)
  t.match(scores.find((s) => s.spanId === ids!.child), { traceId: ids!.traceId, value: 0.25, comment: 'weak sources', source: 'code' }, 'the child span\'s score')
  t.match(scores.find((s) => s.spanId === ids!.root), { traceId: ids!.traceId, label: 'correct', source: 'llm' }, 'the root span\'s score')
  // The ids are those of the spans' own events, as the service stored them.
  const rs = await app.clickhouse.query({ query: 'SELECT span_id FROM events WHERE user_id = {u:String} AND trace_id = {tr:String} ORDER BY span_id', query_params: { u: user.id, tr: ids!.traceId }, format: 'JSONEachRow' })
  t.same((await rs.json<{ span_id: string }>()).map((r) => r.span_id), [ids!.root, ids!.child].sort())
})
