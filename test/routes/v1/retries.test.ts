import t from 'tap'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { context, trace, type Attributes, type Span } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer'
import { buildApp } from '../../../src/app.ts'
import { newCuid } from '../../../src/domain/ids.ts'
import { decodeStatus } from '../../../src/domain/otlp-codec.ts'
import { buildTestApp, newUser, randomId, sendBatch, sendEvent, shipped, testConfig, TEST_DATA_DIR } from '../../helpers/app.ts'
import { storedCounts } from '../../helpers/stored-events.ts'

// Two instances behind one load balancer: one Redis (the same REDIS_PREFIX), one ClickHouse (the
// embedded engine is one per process, as instances share a server), each with its own ingest log.
const shared = `test:${randomId()}:`
const a = await buildTestApp(t, { REDIS_PREFIX: shared })
await a.listen({ port: 0, host: '127.0.0.1' })
const bLogDir = `${TEST_DATA_DIR}/ingest-log-${randomId('b-')}`
let b = await instanceB()
t.teardown(() => b.close())

/** Instance B, on its own ingest log; built again (same log, same Redis) to restart it. */
async function instanceB (): Promise<FastifyInstance> {
  const app = await buildApp(testConfig({ REDIS_PREFIX: shared, INGEST_LOG_DIR: bLogDir }), { logger: false })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return app
}

async function restartB (): Promise<void> {
  await b.close()
  b = await instanceB()
}

const baseOf = (app: FastifyInstance) => `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`

async function userWithKey (opts: { burst?: number } = {}) {
  const user = await newUser(a, { tier: 'enterprise', burst: opts.burst ?? 100_000 })
  const key = await user.createKey()
  return { user, secret: key.secret }
}

/** POSTs a JSON body with an Idempotency-Key. */
function sendKeyed (app: FastifyInstance, url: string, secret: string, key: string, payload: unknown) {
  return app.inject({
    method: 'POST',
    url,
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': key },
    payload: JSON.stringify(payload),
  })
}

/** Spans of one agent turn made with the OpenTelemetry SDK: an agent span, a priced gpt-4o call and a tool call. */
function agentTurn (agent: string): ReadableSpan[] {
  const memory = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': agent }), spanProcessors: [new SimpleSpanProcessor(memory)] })
  const tracer = provider.getTracer('test-instrumentation', '1.0.0')
  const child = (name: string, attributes: Attributes, parent: Span) => tracer.startSpan(name, { attributes }, trace.setSpan(context.active(), parent)).end()
  const root = tracer.startSpan('invoke_agent planner', { attributes: { 'gen_ai.operation.name': 'invoke_agent' } })
  child('chat gpt-4o', { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 1000, 'gen_ai.usage.output_tokens': 100 }, root)
  child('execute_tool search', { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search' }, root)
  root.end()
  return memory.getFinishedSpans()
}

/** Exports spans to an instance with the real OTLP/HTTP protobuf exporter (which retries 503 and 429 by itself). */
async function exportTo (app: FastifyInstance, secret: string, spans: ReadableSpan[]): Promise<number> {
  const exporter = new OTLPTraceExporter({ url: `${baseOf(app)}/v1/traces`, headers: { authorization: `Bearer ${secret}` } })
  try {
    return await new Promise<number>((resolve) => exporter.export(spans, (result) => resolve(result.code)))
  } finally {
    await exporter.shutdown()
  }
}

/** Events of one agent in ClickHouse. */
async function storedOf (app: FastifyInstance, userId: string, agentId: string): Promise<number> {
  const rows = await (await app.clickhouse.query({
    query: 'SELECT count() AS n FROM events WHERE user_id = {u:String} AND agent_id = {a:String}',
    query_params: { u: userId, a: agentId },
    format: 'JSONEachRow',
  })).json<{ n: string }>()
  return Number(rows[0]!.n)
}

/**
 * Holds a request under way: a transaction that creates agent `name` for the user and does not
 * commit, so a request creating that agent waits for it (Postgres' unique index). Resolves once a
 * request is waiting; `release()` rolls back and lets it go on.
 */
async function holdAgentCreation (userId: string, name: string, start: () => Promise<unknown>) {
  const holder = await a.db.connect()
  await holder.query('BEGIN')
  await holder.query("INSERT INTO agents (id, owner_id, display_name, source) VALUES ($1, $2, $3, 'ingest')", [newCuid(), userId, name])
  const { rows: [{ pid }] } = await holder.query('SELECT pg_backend_pid() AS pid')
  const started = start()
  for (let waited = 0; ; waited += 10) {
    const { rows: [{ n }] } = await a.db.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])
    if (n > 0) break
    if (waited > 5000) throw new Error('the request never reached the agent creation')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return {
    started,
    async release () {
      await holder.query('ROLLBACK')
      holder.release()
    },
  }
}

t.test('an export re-sent to another instance and to a restarted one is stored once, and its spend counted once', async (t) => {
  const { user, secret } = await userWithKey()
  const spans = agentTurn(randomId('otel-agent-'))
  t.equal(await exportTo(a, secret, spans), 0, 'instance A accepts the export')
  t.equal(await exportTo(b, secret, spans), 0, 'the re-send to instance B is answered as accepted')
  await restartB()
  t.equal(await exportTo(b, secret, spans), 0, 'the re-send to B after its restart too')
  await shipped(a)
  await shipped(b)

  const stored = await storedCounts(a.clickhouse, user.id)
  t.equal(stored.events, 3, 'each span stored once')
  t.equal(stored.spendEvents, 3, 'and counted once in spend_daily')
  t.same([stored.hourlyEvents, stored.traceEvents], [3, 3], 'and in the hourly and trace rollups')
  const spend = (await a.inject({ url: '/v1/me/spend-summary?days=1', headers: user.auth })).json()
  t.equal(spend.total.eventCount, 3)
  t.equal(Math.round(spend.total.costUsd * 1e9), (1000 * 2.5 + 100 * 10) * 1000, 'gpt-4o priced once: 1,000 in at $2.50/Mtok, 100 out at $10/Mtok')
})

t.test('a batch retried with its Idempotency-Key on another instance gets the first answer and stores nothing', async (t) => {
  const { user, secret } = await userWithKey()
  const agent = randomId('batch-agent-')
  const events = [
    { agentId: agent, type: 'reasoning', model: 'gpt-4o', metadata: { tokensBreakdown: { inputBase: 1000, output: 100 } } },
    { agentId: agent, type: 'tool', toolExecuted: 'search' },
    { agentId: agent, type: 'action' },
  ]
  const key = randomId('batch-')
  const first = await sendKeyed(a, '/v1/events/batch', secret, key, { events })
  t.equal(first.statusCode, 207)
  t.equal(first.headers['idempotent-replayed'], undefined, 'the first answer is not a replay')
  const retry = await sendKeyed(b, '/v1/events/batch', secret, key, { events })
  t.equal(retry.statusCode, 207)
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.equal(retry.body, first.body, 'the same results: same statuses, same event ids')
  await restartB()
  const late = await sendKeyed(b, '/v1/events/batch', secret, key, { events })
  t.equal(late.body, first.body, 'after a restart too')

  const single = { agentId: agent, type: 'decision' }
  const singleKey = randomId('one-')
  const one = await sendKeyed(b, '/v1/events', secret, singleKey, single)
  t.equal(one.statusCode, 202)
  const oneAgain = await sendKeyed(a, '/v1/events', secret, singleKey, single)
  t.equal(oneAgain.statusCode, 202)
  t.equal(oneAgain.json().eventId, one.json().eventId, 'a single event retried gets its event id again')

  await shipped(a)
  await shipped(b)
  t.equal(await storedOf(a, user.id, first.json().results[0].agentId), 4, 'three events and one, each stored once')
  t.equal((await storedCounts(a.clickhouse, user.id)).spendEvents, 4)
})

t.test('the same key with another body, or on the other route, is refused with 422', async (t) => {
  const { secret } = await userWithKey()
  const key = randomId('reused-')
  t.equal((await sendKeyed(a, '/v1/events', secret, key, { agentId: 'x', reasoning: 'first' })).statusCode, 202)
  const other = await sendKeyed(b, '/v1/events', secret, key, { agentId: 'x', reasoning: 'second' })
  t.equal(other.statusCode, 422)
  t.match(other.json(), { error: 'idempotency_key_reused', message: /another request/ })
  const otherRoute = await sendKeyed(b, '/v1/events/batch', secret, key, { events: [{ agentId: 'x', reasoning: 'first' }] })
  t.equal(otherRoute.statusCode, 422)
})

t.test('a 207 with refused events is replayed with its Retry-After', async (t) => {
  const { secret } = await userWithKey({ burst: 2 })
  const key = randomId('partly-')
  const events = [{ agentId: 'partly' }, { agentId: 'partly' }, { agentId: 'partly' }]
  const first = await sendKeyed(a, '/v1/events/batch', secret, key, { events })
  t.equal(first.statusCode, 207)
  t.same(first.json().results.map((r: { status: number }) => r.status), [202, 202, 429], 'the burst of 2 admits two of the three')
  t.match(first.headers['retry-after'], /^\d+$/)
  const retry = await sendKeyed(b, '/v1/events/batch', secret, key, { events })
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.equal(retry.headers['retry-after'], first.headers['retry-after'], 'the same Retry-After as the first answer')
  t.equal(retry.body, first.body)
})

t.test('keys bound to two agents: the same Idempotency-Key and body are two requests, each the agent\'s own', async (t) => {
  const { user, secret } = await userWithKey()
  const [one, two] = [randomId('bound-one-'), randomId('bound-two-')]
  for (const name of [one, two]) t.equal((await sendKeyed(a, '/v1/events', secret, randomId(), { agentId: name })).statusCode, 202)
  const ids = (await a.db.query('SELECT id, display_name FROM agents WHERE owner_id = $1', [user.id])).rows
  const idOf = (name: string) => ids.find((r) => r.display_name === name)!.id as string
  const keyOne = await user.createKey('one', idOf(one))
  const keyTwo = await user.createKey('two', idOf(two))
  const key = randomId('bound-')
  const first = await sendKeyed(a, '/v1/events', keyOne.secret, key, { type: 'decision' })
  t.equal(first.statusCode, 202)
  // The first agent's key took the Idempotency-Key before the second agent's request came: that
  // request is the second agent's own, stored, neither refused nor answered with the first's event.
  const other = await sendKeyed(b, '/v1/events', keyTwo.secret, key, { type: 'decision' })
  t.equal(other.statusCode, 202, 'the second agent\'s request is taken')
  t.equal(other.headers['idempotent-replayed'], undefined)
  t.not(other.json().eventId, first.json().eventId)
  const again = await sendKeyed(b, '/v1/events', keyOne.secret, key, { type: 'decision' })
  t.equal(again.headers['idempotent-replayed'], 'true', 'the same key bound to the same agent replays')
  t.equal(again.json().eventId, first.json().eventId)
  const otherAgain = await sendKeyed(a, '/v1/events', keyTwo.secret, key, { type: 'decision' })
  t.equal(otherAgain.json().eventId, other.json().eventId, 'and so does the second agent\'s')
  const unbound = await sendKeyed(a, '/v1/events', secret, key, { agentId: one, type: 'decision' })
  t.equal(unbound.statusCode, 202, 'an unbound key\'s records are the user\'s, apart from the bound keys\'')
})

t.test('a request still under way on one instance: its key answers 409 on another, then the first answer', async (t) => {
  const { user, secret } = await userWithKey()
  const key = randomId('slow-')
  const event = { agentId: 'held-agent', reasoning: 'slow' }
  const held = await holdAgentCreation(user.id, 'held-agent', () => sendKeyed(a, '/v1/events', secret, key, event))
  const during = await sendKeyed(b, '/v1/events', secret, key, event)
  t.equal(during.statusCode, 409)
  t.match(during.json(), { error: 'conflict', reason: 'idempotency_key_in_flight', message: /still under way/ })
  await held.release()
  const first = await held.started as Awaited<ReturnType<typeof sendKeyed>>
  t.equal(first.statusCode, 202)
  const after = await sendKeyed(b, '/v1/events', secret, key, event)
  t.equal(after.statusCode, 202)
  t.equal(after.json().eventId, first.json().eventId)
  await shipped(a)
  t.equal(await storedOf(a, user.id, first.json().agentId), 1)
})

t.test('an export whose spans another instance is still storing answers 503; the exporter\'s retry stores nothing twice', async (t) => {
  const { user, secret } = await userWithKey()
  const agent = randomId('held-otel-')
  const spans = agentTurn(agent)
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!)
  const post = (app: FastifyInstance) => app.inject({ method: 'POST', url: '/v1/traces', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/x-protobuf' }, payload: body })
  const held = await holdAgentCreation(user.id, agent, () => post(a))
  const during = await post(b)
  t.equal(during.statusCode, 503)
  t.equal(during.headers['retry-after'], '1', 'exporters retry a 503 after Retry-After')
  t.match(decodeStatus(during.rawPayload), { code: 14, message: /spans_in_flight/ })
  await held.release()
  t.equal(((await held.started) as Awaited<ReturnType<typeof post>>).statusCode, 200)
  t.equal(await exportTo(b, secret, spans), 0)
  await shipped(a)
  await shipped(b)
  t.equal((await storedCounts(a.clickhouse, user.id)).events, 3)
})

t.test('without the header nothing is recorded; a refused request does not poison its key', async (t) => {
  const { user, secret } = await userWithKey({ burst: 1 })
  t.equal((await sendEvent(a, secret, { agentId: 'x' })).statusCode, 202)
  t.equal((await sendBatch(a, secret, [{ agentId: 'x' }])).statusCode, 207)
  t.same(await a.redis.keys(`${shared}idem:${user.id}:*`), [], 'no record without an Idempotency-Key')

  const key = randomId('limited-')
  const limited = await sendKeyed(a, '/v1/events', secret, key, { agentId: 'x' })
  t.equal(limited.statusCode, 429, 'the burst of 1 a minute is spent')
  t.equal(await a.redis.exists(`${shared}idem:${user.id}:${key}`), 0, 'the 429 is not kept')
  const retry = await sendKeyed(b, '/v1/events', secret, key, { agentId: 'x' })
  t.equal(retry.statusCode, 429)
  t.equal(retry.headers['idempotent-replayed'], undefined, 'the retry ran again rather than replaying a refusal')
})

t.test('an Idempotency-Key that is too long or not printable ASCII is refused with 400', async (t) => {
  const { secret } = await userWithKey()
  for (const bad of ['k'.repeat(256), 'clé', '']) {
    const res = await sendKeyed(a, '/v1/events', secret, bad, { agentId: 'x' })
    t.equal(res.statusCode, 400, JSON.stringify(bad.slice(0, 10)))
    t.match(res.json(), { error: 'validation_failed', message: /headers/, details: [{ path: ['idempotency-key'] }] })
  }
  t.equal((await sendKeyed(a, '/v1/events', secret, 'k'.repeat(255), { agentId: 'x' })).statusCode, 202, '255 characters are fine')
})

t.test('the OpenAPI document describes the header, the replay and the 409 and 422 answers', async (t) => {
  const doc = (await a.inject({ url: '/openapi.json' })).json()
  for (const [path, ok] of [['/v1/events', '202'], ['/v1/events/batch', '207']] as const) {
    const op = doc.paths[path].post
    t.match(op.parameters.find((p: { name: string }) => p.name === 'idempotency-key'), { in: 'header', required: false, schema: { maxLength: 255 } }, path)
    t.ok(op.responses[ok].headers['idempotent-replayed'], `${path} ${ok} names the replay header`)
    t.ok(op.responses['409'] && op.responses['422'], `${path} 409 and 422`)
  }
})

t.test('Redis down during a retry: ingestion goes on, the retry is stored again, one warning for the outage', async (t) => {
  const lines: { level: number; msg: string }[] = []
  const app = await buildApp(testConfig({ BURST_LEASE_MS: '10000' }), {
    logger: { level: 'info', stream: { write: (line: string) => { lines.push(JSON.parse(line)) } } },
  })
  t.teardown(() => app.close())
  await app.ready()
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const { secret } = await user.createKey()
  // The burst step needs Redis unless this instance holds leased tokens: two batches make it lease
  // a stock (held for BURST_LEASE_MS), as an instance under steady load holds one.
  for (let i = 0; i < 2; i++) t.equal((await sendBatch(app, secret, Array.from({ length: 100 }, () => ({ agentId: 'warm-up' })))).statusCode, 207)
  const key = randomId('outage-')
  const event = { agentId: 'retried', reasoning: 'sent, then retried while Redis is down' }
  const first = await sendKeyed(app, '/v1/events', secret, key, event)
  t.equal(first.statusCode, 202)
  const spans = agentTurn(randomId('outage-otel-'))
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!)
  const exportSpans = () => app.inject({ method: 'POST', url: '/v1/traces', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/x-protobuf' }, payload: body })

  app.redis.disconnect()
  const retries = [await sendKeyed(app, '/v1/events', secret, key, event), await sendKeyed(app, '/v1/events', secret, key, event)]
  t.same(retries.map((r) => r.statusCode), [202, 202], 'ingestion goes on')
  t.not(retries[0]!.json().eventId, first.json().eventId, 'the retry is stored again: at least once during the outage')
  t.same((await exportSpans()).statusCode, 200)
  t.same((await exportSpans()).statusCode, 200, 'a re-sent export reaching the same instance')
  const warnings = lines.filter((l) => l.level === 40 && /^Redis unreachable: re-sent spans/.test(l.msg))
  t.equal(warnings.length, 1, 'one warning, not one per request')

  await app.redis.connect()
  await new Promise((resolve) => setTimeout(resolve, 1100)) // Redis is left alone for a second after a failure
  const later = randomId('after-')
  t.equal((await sendKeyed(app, '/v1/events', secret, later, event)).statusCode, 202)
  t.equal(await app.redis.exists(`${app.redisPrefix}idem:${user.id}:${later}`), 1, 'recorded again once Redis is back')
  t.equal(lines.filter((l) => /^Redis answers again/.test(l.msg)).length, 1)

  await shipped(app)
  t.equal(await storedOf(app, user.id, first.json().agentId), 4, 'the first send, the two retries during the outage, the later one')
  t.equal((await storedCounts(app.clickhouse, user.id)).events, 200 + 4 + 3, 'the re-sent export\'s spans once: this instance remembers them itself')
})
