import t from 'tap'
import { gzipSync } from 'node:zlib'
import type { AddressInfo } from 'node:net'
import { context, trace, SpanStatusCode, type Attributes, type Span } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { ProtobufTraceSerializer, JsonTraceSerializer } from '@opentelemetry/otlp-transformer'
import { decodeResponse, decodeStatus } from '../../../src/domain/otlp-codec.ts'
import { buildTestApp, newUser, randomId, type TestUser } from '../../helpers/app.ts'

// Expected costs come from the providers' published list prices ($/Mtok; $1/Mtok = 1,000 nano-dollars a token).
const NANO_PER_MTOK = 1000

const app = await buildTestApp(t, { BATCH_BODY_LIMIT: String(5 * 1024 * 1024) })
await app.listen({ port: 0, host: '127.0.0.1' })
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`

/** A small instrumented program: a tracer whose finished spans are kept, to be exported on demand. */
function instrumented (resource: Attributes) {
  const memory = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes(resource), spanProcessors: [new SimpleSpanProcessor(memory)] })
  const tracer = provider.getTracer('test-instrumentation', '1.0.0')
  return {
    tracer,
    spans: () => memory.getFinishedSpans(),
    /** Starts a span, as a child of `parent` when given (explicit context: no context manager is registered). */
    span (name: string, attributes: Attributes, parent?: Span): Span {
      return tracer.startSpan(name, { attributes }, parent ? trace.setSpan(context.active(), parent) : undefined)
    },
  }
}

/** Exports spans with a real OTLP exporter over HTTP; resolves with the export result. */
function exportWith (exporter: ProtoExporter | JsonExporter, spans: ReadableSpan[]): Promise<{ code: number; error?: Error }> {
  return new Promise((resolve) => exporter.export(spans, resolve))
}

const get = (user: TestUser, url: string) => app.inject({ url, headers: user.auth })

async function userWithKey (opts: { burst?: number } = {}) {
  const user = await newUser(app, { tier: 'enterprise', burst: opts.burst ?? 100_000 })
  const key = await user.createKey()
  return { user, key, headers: { authorization: `Bearer ${key.secret}` } }
}

t.test('spans from the OpenTelemetry JS SDK (protobuf exporter) become a trace tree with model, tokens and cost', async (t) => {
  const { user, headers } = await userWithKey()
  const service = randomId('svc-')
  const otel = instrumented({ 'service.name': service })
  const conversation = randomId('conv-')
  const root = otel.span('invoke_agent support-bot', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'support-bot', 'gen_ai.conversation.id': conversation })
  const chat = otel.span('chat claude-sonnet-4-5', {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'anthropic',
    'gen_ai.request.model': 'claude-sonnet-4-5',
    'gen_ai.response.model': 'claude-sonnet-4-5-20250929',
    'gen_ai.conversation.id': conversation,
    // The conventions' input count includes cache reads and writes.
    'gen_ai.usage.input_tokens': 13_000,
    'gen_ai.usage.cache_read.input_tokens': 10_000,
    'gen_ai.usage.cache_creation.input_tokens': 2_000,
    'gen_ai.usage.output_tokens': 500,
    'gen_ai.input.messages': '[{"role":"user","parts":[{"type":"text","content":"secret prompt"}]}]',
  }, root)
  chat.end()
  const tool = otel.span('execute_tool search', { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search' }, root)
  tool.setStatus({ code: SpanStatusCode.OK })
  tool.end()
  const failing = otel.span('execute_tool fetch_url', { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'fetch_url' }, tool)
  failing.recordException(Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:443'), { name: 'FetchError' }))
  failing.setStatus({ code: SpanStatusCode.ERROR, message: 'fetch failed' })
  failing.end()
  root.end()

  const exporter = new ProtoExporter({ url: `${base}/v1/traces`, headers })
  t.teardown(() => exporter.shutdown())
  const result = await exportWith(exporter, otel.spans())
  t.equal(result.code, 0, `export succeeded ${result.error?.message ?? ''}`)

  const traceId = root.spanContext().traceId
  const res = await get(user, `/v1/me/traces/${traceId}`)
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.equal(body.eventCount, 4)
  const at = (span: { spanContext(): { spanId: string } }) => body.spans.findIndex((e: { spanId: string }) => e.spanId === span.spanContext().spanId)
  const [rootAt, chatAt, toolAt, failAt] = [root, chat, tool, failing].map(at) as [number, number, number, number]
  t.same(body.roots, [rootAt], 'one root: the agent span')
  t.match(body.spans[rootAt], { parent: null, depth: 0, type: 'action' })
  t.same(body.spans[rootAt].children.sort(), [chatAt, toolAt].sort())
  t.match(body.spans[chatAt], { parent: rootAt, depth: 1, type: 'reasoning' })
  t.notOk('parentSpanId' in body.spans[chatAt], 'a linked parent is a position, its span id is not repeated')
  t.match(body.spans[toolAt], { parent: rootAt, depth: 1, type: 'tool', toolExecuted: 'search', outcome: 'success' })
  t.match(body.spans[failAt], { parent: toolAt, depth: 2, type: 'error', toolExecuted: 'fetch_url', outcome: 'failed' })

  const chatEvent = body.spans[chatAt]
  t.equal(chatEvent.model, 'claude-sonnet-4-5-20250929', 'the response model')
  t.same(chatEvent.tokens, { inputBase: 1_000, cacheCreation: 2_000, cacheRead: 10_000, output: 500, total: 13_500 }, 'cache tokens counted once')
  // anthropic.com/pricing, Claude Sonnet 4.5: input $3, 5-minute cache write $3.75, cache hit $0.30, output $15 per Mtok.
  const cost = (1_000 * 3 + 2_000 * 3.75 + 10_000 * 0.3 + 500 * 15) * NANO_PER_MTOK
  t.equal(Math.round(chatEvent.costUsd * 1e9), cost)
  t.equal(chatEvent.costStatus, 'priced')
  t.equal(chatEvent.sessionId, conversation)
  t.equal(body.traceId, traceId)
  t.notOk('input' in chatEvent, 'no privacy level sent: prompts are not kept')
  t.notOk('gen_ai.input.messages' in chatEvent.metadata.otel.attributes)
  t.ok(chatEvent.durationMs >= 0)
  const failEvent = body.spans[failAt]
  t.equal(failEvent.errorMessage, 'FetchError: connect ECONNREFUSED 10.0.0.7:443')
  t.match(failEvent.errorFingerprint, /^[0-9a-f]{16}$/)
  t.notOk(JSON.stringify(failEvent.metadata).includes('stacktrace'), 'no stack trace (file paths) at minimal')
  t.equal(body.spans[rootAt].metadata.otel.operation, 'invoke_agent')

  const agents = (await get(user, '/v1/me/agents')).json().agents.map((a: { displayName: string }) => a.displayName).sort()
  t.same(agents, ['support-bot'], 'the spans under the agent\'s span are its own, not the service\'s')
  t.notOk(agents.includes(service))

  const spend = (await get(user, '/v1/me/spend-summary')).json()
  const row = spend.by_model.find((m: { model: string }) => m.model === 'claude-sonnet-4-5-20250929')
  t.equal(Math.round(row.costUsd * 1e9), cost)
  t.same(row.tokens, { inputBase: 1_000, cacheCreation: 2_000, cacheRead: 10_000, output: 500, total: 13_500 })
  t.equal(Math.round(spend.total.costUsd * 1e9), cost, 'only the model call costs anything')
  t.same(spend.unpriced_models, [])

  const clusters = (await get(user, '/v1/me/errors')).json().clusters
  t.equal(clusters.length, 1, 'the failed span is an error clustered like any other')
  t.equal(clusters[0].sampleMessage, 'FetchError: connect ECONNREFUSED 10.0.0.7:443')
})

t.test('OTLP JSON (http exporter, gzip) with deprecated names: OpenAI reasoning tokens, prompts kept at privacy level full', async (t) => {
  const { user, headers } = await userWithKey()
  const otel = instrumented({ 'service.name': randomId('json-'), 'agent_telemetry.privacy_level': 'full' })
  const span = otel.span('openai.chat', {
    'gen_ai.system': 'openai',
    'llm.request.type': 'chat',
    'gen_ai.request.model': 'o4-mini',
    'gen_ai.usage.prompt_tokens': 1_000,
    'gen_ai.usage.cache_read.input_tokens': 200,
    'gen_ai.usage.completion_tokens': 500,
    'gen_ai.usage.reasoning.output_tokens': 300,
    'gen_ai.prompt.0.role': 'user',
    'gen_ai.prompt.0.content': 'What is 2+2?',
    'gen_ai.completion.0.role': 'assistant',
    'gen_ai.completion.0.content': '4',
  })
  span.end()
  const exporter = new JsonExporter({ url: `${base}/v1/traces`, headers, compression: 'gzip' as never })
  t.teardown(() => exporter.shutdown())
  const result = await exportWith(exporter, otel.spans())
  t.equal(result.code, 0, `export succeeded ${result.error?.message ?? ''}`)
  const body = (await get(user, `/v1/me/traces/${span.spanContext().traceId}`)).json()
  const event = body.spans[0]
  t.equal(event.model, 'o4-mini')
  t.same(event.tokens, { inputBase: 800, cacheCreation: 0, cacheRead: 200, output: 500, total: 1_500 })
  // openai.com/api/pricing, o4-mini: input $1.10, cached input $0.275, output $4.40 per Mtok; reasoning is output.
  t.equal(Math.round(event.costUsd * 1e9), Math.round((800 * 1.1 + 200 * 0.275 + 500 * 4.4) * NANO_PER_MTOK))
  t.equal(event.metadata.tokensBreakdown.reasoning, 300)
  t.equal(event.metadata.provider, 'openai')
  t.same(event.input, { messages: [{ role: 'user', content: 'What is 2+2?' }] }, 'prompts kept at full')
  t.equal(event.reasoning, '4', 'the completion')
  t.equal(event.privacyChip, 'FULL')
})

t.test('OpenLLMetry fixture (deprecated names, traceloop kinds) and a Vercel AI SDK fixture (ai.* and gen_ai.*)', async (t) => {
  const { user, headers } = await userWithKey()
  const exporter = new ProtoExporter({ url: `${base}/v1/traces`, headers })
  t.teardown(() => exporter.shutdown())

  // OpenLLMetry (traceloop) names, as its Anthropic instrumentation sets them.
  const ll = instrumented({ 'service.name': randomId('openllmetry-') })
  const workflow = ll.span('support.workflow', { 'traceloop.span.kind': 'workflow', 'traceloop.entity.name': 'support' })
  const agent = ll.span('triage.agent', { 'traceloop.span.kind': 'agent', 'traceloop.entity.name': 'triage' }, workflow)
  const call = ll.span('anthropic.chat', {
    'llm.request.type': 'chat', 'gen_ai.system': 'Anthropic', 'gen_ai.request.model': 'claude-haiku-4-5',
    'gen_ai.response.model': 'claude-haiku-4-5-20251001', 'gen_ai.usage.prompt_tokens': 3_000,
    'gen_ai.usage.cache_read_input_tokens': 2_000, 'gen_ai.usage.cache_creation_input_tokens': 0,
    'gen_ai.usage.completion_tokens': 100, 'llm.usage.total_tokens': 3_100,
  }, agent)
  call.end()
  const lookup = ll.span('lookup_order.tool', { 'traceloop.span.kind': 'tool', 'traceloop.entity.name': 'lookup_order' }, agent)
  lookup.end()
  agent.end()
  workflow.end()
  t.equal((await exportWith(exporter, ll.spans())).code, 0)
  const llTrace = (await get(user, `/v1/me/traces/${workflow.spanContext().traceId}`)).json()
  t.equal(llTrace.eventCount, 4)
  const llCall = llTrace.spans.find((e: { spanId: string }) => e.spanId === call.spanContext().spanId)
  t.equal(llCall.type, 'reasoning')
  t.same(llCall.tokens, { inputBase: 1_000, cacheCreation: 0, cacheRead: 2_000, output: 100, total: 3_100 })
  // anthropic.com/pricing, Claude Haiku 4.5: input $1, cache hit $0.10, output $5 per Mtok.
  t.equal(Math.round(llCall.costUsd * 1e9), (1_000 * 1 + 2_000 * 0.1 + 100 * 5) * NANO_PER_MTOK)
  t.equal(llTrace.spans.find((e: { spanId: string }) => e.spanId === lookup.spanContext().spanId).toolExecuted, 'lookup_order')
  t.equal(llCall.depth, 2)

  // Vercel AI SDK: ai.generateText wraps ai.generateText.doGenerate (the provider call) and ai.toolCall.
  const ai = instrumented({ 'service.name': randomId('vercel-') })
  const outer = ai.span('ai.generateText', {
    'ai.operationId': 'ai.generateText', 'operation.name': 'ai.generateText', 'ai.model.id': 'gpt-4o', 'ai.model.provider': 'openai.chat',
    'ai.usage.promptTokens': 1_200, 'ai.usage.completionTokens': 80, 'ai.telemetry.functionId': 'answer',
  })
  const inner = ai.span('ai.generateText.doGenerate', {
    'ai.operationId': 'ai.generateText.doGenerate', 'ai.model.id': 'gpt-4o', 'ai.model.provider': 'openai.chat',
    'gen_ai.system': 'openai.chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.response.model': 'gpt-4o-2024-08-06',
    'gen_ai.usage.input_tokens': 1_200, 'gen_ai.usage.output_tokens': 80, 'ai.usage.promptTokens': 1_200, 'ai.usage.completionTokens': 80,
  }, outer)
  inner.end()
  const toolCall = ai.span('ai.toolCall', { 'ai.operationId': 'ai.toolCall', 'ai.toolCall.name': 'weather', 'ai.toolCall.id': 'call_1' }, outer)
  toolCall.end()
  outer.end()
  t.equal((await exportWith(exporter, ai.spans())).code, 0)
  const aiTrace = (await get(user, `/v1/me/traces/${outer.spanContext().traceId}`)).json()
  const aiInner = aiTrace.spans.find((e: { spanId: string }) => e.spanId === inner.spanContext().spanId)
  const aiOuter = aiTrace.spans.find((e: { spanId: string }) => e.spanId === outer.spanContext().spanId)
  t.equal(aiInner.type, 'reasoning')
  t.equal(aiInner.model, 'gpt-4o-2024-08-06')
  // openai.com/api/pricing, gpt-4o: input $2.50, output $10 per Mtok.
  t.equal(Math.round(aiInner.costUsd * 1e9), (1_200 * 2.5 + 80 * 10) * NANO_PER_MTOK)
  t.equal(aiOuter.tokens, undefined, 'the wrapper span repeats the usage in ai.* names: not counted twice')
  t.equal(Math.round(aiTrace.costUsd * 1e9), (1_200 * 2.5 + 80 * 10) * NANO_PER_MTOK, 'the trace costs one model call')
  t.equal(aiTrace.spans.find((e: { spanId: string }) => e.spanId === toolCall.spanContext().spanId).toolExecuted, 'weather')
})

/** A serialized export request of one span with these attributes. */
function requestOf (attributes: Attributes, encoding: 'protobuf' | 'json', service = randomId('raw-')): Buffer {
  const otel = instrumented({ 'service.name': service })
  otel.span('raw', attributes).end()
  const serializer = encoding === 'protobuf' ? ProtobufTraceSerializer : JsonTraceSerializer
  return Buffer.from(serializer.serializeRequest(otel.spans())!)
}

const post = (headers: Record<string, string>, payload: Buffer | string) => app.inject({ method: 'POST', url: '/v1/traces', headers, payload })

t.test('bad inputs get the right status and a Status body in the request encoding, never a 5xx', async (t) => {
  const { user, headers } = await userWithKey()
  const proto = { ...headers, 'content-type': 'application/x-protobuf' }
  const json = { ...headers, 'content-type': 'application/json' }
  const good = requestOf({ 'gen_ai.request.model': 'gpt-4o' }, 'protobuf')

  const truncated = await post(proto, good.subarray(0, good.length - 5))
  t.equal(truncated.statusCode, 400, 'truncated protobuf')
  t.equal(truncated.headers['content-type'], 'application/x-protobuf')
  t.match(decodeStatus(truncated.rawPayload).message, /bad_request: the body is not a protobuf ExportTraceServiceRequest/)

  const text = await post({ ...headers, 'content-type': 'text/plain' }, 'hello')
  t.equal(text.statusCode, 415, 'wrong content type')
  t.match(decodeStatus(text.rawPayload).message, /application\/x-protobuf or application\/json/)

  const huge = await post(proto, Buffer.alloc(10 * 1024 * 1024, 1))
  t.equal(huge.statusCode, 413, '10 MB body')

  const bomb = await post({ ...proto, 'content-encoding': 'gzip' }, gzipSync(Buffer.alloc(10 * 1024 * 1024)))
  t.equal(bomb.statusCode, 413, 'a small gzip body inflating past the limit')

  const notGzip = await post({ ...proto, 'content-encoding': 'gzip' }, good)
  t.equal(notGzip.statusCode, 400, 'Content-Encoding gzip on a body that is not')
  const br = await post({ ...proto, 'content-encoding': 'br' }, good)
  t.equal(br.statusCode, 415, 'an encoding other than gzip')
  t.equal(decodeStatus(br.rawPayload).message, 'unsupported_media_type: Content-Encoding must be gzip or identity', 'the encoding is named, not the content type')

  const latin1 = await post({ ...headers, 'content-type': 'application/json; charset=ISO-8859-1' }, Buffer.from('{"resourceSpans":[]}', 'latin1'))
  t.equal(latin1.statusCode, 415, 'JSON declared in another charset')
  t.equal(latin1.headers['content-type'], 'application/json')
  t.equal(latin1.json().message, 'unsupported_media_type: send the JSON body as UTF-8 (charset=iso-8859-1 is not taken here)', 'the charset is named')
  t.equal((await post({ ...headers, 'content-type': 'application/json; charset=utf-8' }, '{"resourceSpans":[]}')).statusCode, 200, 'JSON as UTF-8')
  t.equal((await post({ ...headers, 'content-type': 'application/protobuf' }, good)).statusCode, 200, 'application/protobuf')
  const gzipped = await post({ ...proto, 'content-encoding': 'gzip' }, gzipSync(good))
  t.equal(gzipped.statusCode, 200, 'gzip protobuf')
  t.equal(decodeResponse(gzipped.rawPayload), null, 'full success: no partial_success')

  t.equal((await post(json, '{"resourceSpans": 5}')).statusCode, 400, 'JSON of the wrong shape')
  t.equal((await post(json, '{not json')).statusCode, 400, 'not JSON')
  t.equal((await post(json, '{}')).statusCode, 200, 'an empty request is a success')

  const unauth = await post({ 'content-type': 'application/x-protobuf' }, good)
  t.equal(unauth.statusCode, 401)
  t.match(decodeStatus(unauth.rawPayload), { code: 16, message: /unauthorized \(missing_bearer\)/ })
  t.equal((await post({ authorization: 'Bearer vk_nope', 'content-type': 'application/json' }, '{}')).statusCode, 401)

  // A span with no trace id: alone it is refused (400); next to a good span it is reported in partial_success.
  const spanJson = JSON.parse(requestOf({ 'gen_ai.request.model': 'gpt-4o' }, 'json').toString())
  const goodSpan = spanJson.resourceSpans[0].scopeSpans[0].spans[0]
  const noTrace = { ...goodSpan, traceId: '', spanId: 'aaaaaaaaaaaaaaaa' }
  const alone = await post(json, JSON.stringify({ resourceSpans: [{ ...spanJson.resourceSpans[0], scopeSpans: [{ scope: { name: 'x' }, spans: [noTrace] }] }] }))
  t.equal(alone.statusCode, 400, 'a span with no trace id')
  t.match(alone.json().message, /no valid trace id/)
  const mixed = await post(json, JSON.stringify({ resourceSpans: [{ ...spanJson.resourceSpans[0], scopeSpans: [{ scope: { name: 'x' }, spans: [goodSpan, noTrace] }] }] }))
  t.equal(mixed.statusCode, 200)
  t.match(mixed.json(), { partialSuccess: { rejectedSpans: '1', errorMessage: /1 of 2 spans refused: 1 invalid_span \(span has no valid trace id/ } })
  const resent = await post(json, JSON.stringify({ resourceSpans: [{ ...spanJson.resourceSpans[0], scopeSpans: [{ scope: { name: 'x' }, spans: [goodSpan, noTrace] }] }] }))
  t.equal(resent.statusCode, 200, 'its re-send is answered as the first send was, not refused whole')
  t.same(resent.json(), mixed.json())
  const noSpanId = { ...goodSpan, spanId: '' }
  const twoKinds = await post(json, JSON.stringify({ resourceSpans: [{ ...spanJson.resourceSpans[0], scopeSpans: [{ scope: { name: 'x' }, spans: [goodSpan, noTrace, noSpanId, { ...noTrace, spanId: 'bbbbbbbbbbbbbbbb' }] }] }] }))
  t.equal(twoKinds.json().partialSuccess.errorMessage,
    '3 of 4 spans refused: 2 invalid_span (span has no valid trace id (16 bytes, not all zero)); 1 invalid_span (span has no valid span id (8 bytes, not all zero))',
    'refusals for different reasons are told apart, the most frequent first')

  // Values the event store cannot hold are cleaned, not refused: NUL in the service name, NaN attributes.
  const odd = JSON.parse(requestOf({ x: 1 }, 'json', 'with\u0000nul').toString())
  odd.resourceSpans[0].scopeSpans[0].spans[0].attributes.push({ key: 'nan', value: { doubleValue: 'NaN' } }, { key: 'deep', value: { kvlistValue: { values: [{ key: 'a', value: { stringValue: '\ud800' } }] } } })
  // Attributes of the agent's own are kept above `minimal` (at `minimal` only those that describe the call).
  odd.resourceSpans[0].resource.attributes.push({ key: 'agent_telemetry.privacy_level', value: { stringValue: 'standard' } })
  const oddRes = await post(json, JSON.stringify(odd))
  t.equal(oddRes.statusCode, 200, `odd values: ${oddRes.body}`)
  const oddTrace = (await get(user, `/v1/me/traces/${odd.resourceSpans[0].scopeSpans[0].spans[0].traceId}`)).json()
  t.equal(oddTrace.eventCount, 1, 'stored, not quarantined')
  t.same(oddTrace.spans[0].metadata.otel.attributes.deep, { a: '\ufffd' }, 'an unpaired surrogate becomes U+FFFD')
  t.equal(oddTrace.spans[0].metadata.otel.attributes.nan, null)
  t.ok((await get(user, '/v1/me/agents')).json().agents.some((a: { displayName: string }) => a.displayName === 'withnul'), 'NUL removed from the agent name')
})

t.test('burst limit per span: a request over it is partly accepted, the next gets 429 with Retry-After', async (t) => {
  const { user, headers } = await userWithKey({ burst: 3 })
  const otel = instrumented({ 'service.name': randomId('burst-') })
  for (let i = 0; i < 5; i++) otel.span(`s${i}`, { i }).end()
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(otel.spans())!)
  const first = await post({ ...headers, 'content-type': 'application/x-protobuf' }, body)
  t.equal(first.statusCode, 200)
  t.match(decodeResponse(first.rawPayload), { rejectedSpans: 2, errorMessage: /2 of 5 spans refused: 2 rate_limited \(retry after \d+ s\)/ })
  // 3 a minute, a span every 20 s: the second refused fits about 40 s on, and that is the wait told.
  const told = Number(/retry after (\d+) s/.exec(decodeResponse(first.rawPayload)!.errorMessage)![1])
  t.ok(told > 20 && told <= 40, `the wait until both refused spans fit (${told} s)`)
  const second = await post({ ...headers, 'content-type': 'application/x-protobuf' }, body)
  t.equal(second.statusCode, 429)
  t.match(second.headers['retry-after'], /^\d+$/)
  t.match(decodeStatus(second.rawPayload).message, /rate_limited/)
  t.equal((await get(user, '/v1/me/events?limit=100')).json().events.length, 3, 'three spans stored')
})

t.test('a deleted agent answers 410; another user\'s spans stay theirs', async (t) => {
  const { user, headers } = await userWithKey()
  const service = randomId('gone-')
  const body = requestOf({ x: 1 }, 'protobuf', service)
  const proto = { ...headers, 'content-type': 'application/x-protobuf' }
  t.equal((await post(proto, body)).statusCode, 200)
  const agent = (await get(user, '/v1/me/agents')).json().agents.find((a: { displayName: string }) => a.displayName === service)
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/me/agents/${agent.id}`, headers: user.auth })).statusCode, 204)
  const gone = await post(proto, requestOf({ x: 2 }, 'protobuf', service))
  t.equal(gone.statusCode, 410)
  t.match(decodeStatus(gone.rawPayload).message, /agent_deleted/)

  const other = await userWithKey()
  const theirs = requestOf({ x: 3 }, 'protobuf', service)
  t.equal((await post({ ...other.headers, 'content-type': 'application/x-protobuf' }, theirs)).statusCode, 200, 'the same name is a new agent of the other user')
  t.equal((await get(user, '/v1/me/events?limit=10')).json().events.length, 0, 'the first user sees neither their deleted agent\'s span nor the other user\'s')
  t.equal((await get(other.user, '/v1/me/events?limit=10')).json().events.length, 1)
})

t.test('a key bound to an agent sends for it the spans that name no agent; a span naming another agent is refused', async (t) => {
  const { user, headers } = await userWithKey()
  const agentName = randomId('planner-')
  const named = instrumented({ 'service.name': randomId('svc-') })
  named.span('invoke_agent', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': agentName }).end()
  const proto = { 'content-type': 'application/x-protobuf' }
  t.equal((await post({ ...headers, ...proto }, Buffer.from(ProtobufTraceSerializer.serializeRequest(named.spans())!))).statusCode, 200)
  const agent = (await get(user, '/v1/me/agents')).json().agents.find((a: { displayName: string }) => a.displayName === agentName)
  const bound = await user.createKey('bound', agent.id)

  // A chat span exported before its agent's span: no agent of its own nor above it in the export.
  const service = randomId('support-app-')
  const app2 = instrumented({ 'service.name': service })
  const chat = app2.span('chat gpt-4o', { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o' })
  chat.end()
  const other = app2.span('invoke_agent', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': randomId('someone-else-') })
  other.end()
  const res = await post({ authorization: `Bearer ${bound.secret}`, ...proto }, Buffer.from(ProtobufTraceSerializer.serializeRequest(app2.spans())!))
  t.equal(res.statusCode, 200)
  t.match(decodeResponse(res.rawPayload), { rejectedSpans: 1, errorMessage: /1 of 2 spans refused: 1 forbidden \(key_bound_to_other_agent\)/ })
  const stored = (await get(user, `/v1/me/traces/${chat.spanContext().traceId}`)).json()
  t.same(stored.spans.map((s: { spanId: string; agentId: string }) => [s.spanId, s.agentId]), [[chat.spanContext().spanId, agent.id]],
    'the span that named no agent is the bound agent\'s, not the service\'s')
  const agents = (await get(user, '/v1/me/agents')).json().agents.map((a: { displayName: string }) => a.displayName)
  t.notOk(agents.includes(service), 'no agent was made of the service')
})

t.test('a key bound to one agent cannot claim another agent\'s span ids first: that agent\'s real span is stored', async (t) => {
  const { user, headers } = await userWithKey()
  const proto = { 'content-type': 'application/x-protobuf' }
  const agentOf = async (name: string) => {
    const named = instrumented({ 'service.name': randomId('svc-') })
    named.span('invoke_agent', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': name }).end()
    t.equal((await post({ ...headers, ...proto }, Buffer.from(ProtobufTraceSerializer.serializeRequest(named.spans())!))).statusCode, 200)
    return (await get(user, '/v1/me/agents')).json().agents.find((a: { displayName: string }) => a.displayName === name).id as string
  }
  const [mine, theirs] = [await agentOf(randomId('mine-')), await agentOf(randomId('theirs-'))]
  const [keyMine, keyTheirs] = [await user.createKey('mine', mine), await user.createKey('theirs', theirs)]
  // The other agent's real span, and a copy of its ids sent first by the key bound to the first agent.
  const real = instrumented({ 'service.name': randomId('svc-') })
  real.span('chat gpt-4o', { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o' }).end()
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(real.spans())!)
  const traceId = real.spans()[0]!.spanContext().traceId
  t.equal((await post({ authorization: `Bearer ${keyMine.secret}`, ...proto }, body)).statusCode, 200)
  t.equal((await post({ authorization: `Bearer ${keyTheirs.secret}`, ...proto }, body)).statusCode, 200)
  const spans = (await get(user, `/v1/me/traces/${traceId}`)).json().spans.map((s: { agentId: string }) => s.agentId).sort()
  t.same(spans, [mine, theirs].sort(), 'each agent\'s span is stored, the real one included')
  t.equal((await post({ authorization: `Bearer ${keyTheirs.secret}`, ...proto }, body)).statusCode, 200)
  t.equal((await get(user, `/v1/me/traces/${traceId}`)).json().spans.length, 2, 'a re-send by the same agent\'s key is still recognised')
})

t.test('a full ingest log answers 503 with Retry-After', async (t) => {
  const small = await buildTestApp(t, { INGEST_LOG_MAX_BYTES: '65536' })
  const user = await newUser(small, { tier: 'enterprise', burst: 1_000_000 })
  const key = await user.createKey()
  await small.clickhouse.command({ query: 'RENAME TABLE events TO events_away_otlp' })
  t.teardown(() => small.clickhouse.command({ query: 'RENAME TABLE events_away_otlp TO events' }))
  const otel = instrumented({ 'service.name': randomId('full-') })
  for (let i = 0; i < 200; i++) otel.span(`s${i}`, { pad: 'x'.repeat(400) }).end()
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(otel.spans())!)
  let res
  for (let i = 0; i < 20; i++) {
    res = await small.inject({ method: 'POST', url: '/v1/traces', headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/x-protobuf' }, payload: body })
    if (res.statusCode !== 200) break
  }
  t.equal(res!.statusCode, 503)
  t.match(res!.headers['retry-after'], /^\d+$/)
  t.match(decodeStatus(res!.rawPayload), { code: 14, message: /unavailable \(ingest_log_full\)/ })
})

t.test('an export sent again (its answer was lost) does not store its spans twice, nor double the spend', async (t) => {
  const { user, headers } = await userWithKey()
  const otel = instrumented({ 'service.name': randomId('resend-') })
  const root = otel.span('invoke_agent planner', { 'gen_ai.operation.name': 'invoke_agent' })
  otel.span('chat gpt-4o', { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 1000, 'gen_ai.usage.output_tokens': 100 }, root).end()
  root.end()
  const spans = otel.spans()
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!)
  const protobuf = { ...headers, 'content-type': 'application/x-protobuf' }
  for (let i = 0; i < 3; i++) {
    const res = await post(protobuf, body)
    t.equal(res.statusCode, 200, `export ${i + 1} answered 200`)
    t.equal(decodeResponse(res.rawPayload), null, `export ${i + 1}: full success (no partial_success)`)
  }
  const traceId = spans[0]!.spanContext().traceId
  const detail = (await get(user, `/v1/me/traces/${traceId}`)).json()
  t.equal(detail.eventCount, 2, 'each span once')
  const spend = (await get(user, '/v1/me/spend-summary?days=1')).json()
  t.equal(spend.total.eventCount, 2)
  t.equal(Math.round(spend.total.costUsd * 1e9), (1000 * 2.5 + 100 * 10) * NANO_PER_MTOK, 'gpt-4o priced once: 1,000 in at $2.50/Mtok, 100 out at $10/Mtok')
})

t.test('the facets of spans leave out what is unique to a span: ids, token counts, conversation, content', async (t) => {
  const { user, headers } = await userWithKey()
  // Privacy level full: the prompts are kept in metadata.otel.attributes, and would be counted.
  const otel = instrumented({ 'service.name': randomId('facets-'), 'agent_telemetry.privacy_level': 'full' })
  const start = Date.now() - 5 * 3_600_000 // whole hours before now: the facets come from the hourly counts
  for (let i = 0; i < 30; i++) {
    const span = otel.tracer.startSpan('chat gpt-4o', {
      startTime: start + i * 1000,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.response.id': `chatcmpl-${i}`,
        'gen_ai.conversation.id': `conv-${i % 10}`,
        'gen_ai.usage.input_tokens': 1000 + i,
        'gen_ai.usage.output_tokens': 100 + i,
        'gen_ai.input.messages': `[{"role":"user","parts":[{"type":"text","content":"question ${i}"}]}]`,
        'deployment.environment': i % 3 === 0 ? 'staging' : 'prod',
      },
    })
    span.end(start + i * 1000 + 500)
  }
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(otel.spans())!)
  t.equal((await post({ ...headers, 'content-type': 'application/x-protobuf' }, body)).statusCode, 200)
  const hidden = /^otel\.attributes\.gen_ai\.(response\.id|conversation\.id|usage\.|input\.messages)/
  for (const filter of ['', '&type=reasoning']) {
    const label = filter === '' ? 'hourly counts' : 'counted from events'
    const res = await get(user, `/v1/me/events/facets?since=all${filter}`)
    t.equal(res.statusCode, 200)
    const facets = res.json() as { total: number; metadata: { key: string; count: number; values: { value: string; count: number }[] }[] }
    t.equal(facets.total, 30, `30 spans (${label})`)
    const keys = facets.metadata.map((m) => m.key)
    t.same(keys.filter((k) => hidden.test(k)), [], `no per-span path listed (${label})`)
    t.ok(keys.includes('otel.attributes.gen_ai.provider.name'), `a shared attribute is listed (${label})`)
    // The paths left out stay filterable.
    const one = await get(user, `/v1/me/events?since=all&meta.otel.attributes.gen_ai.response.id=chatcmpl-7${filter}`)
    t.equal(one.json().events.length, 1, `meta.otel.attributes.gen_ai.response.id still filters (${label})`)
  }
  const env = await get(user, '/v1/me/events/facets?since=all&hasMeta=otel.attributes.deployment.environment')
  t.same(env.json().metadata.find((m: { key: string }) => m.key === 'otel.attributes.deployment.environment')?.values,
    [{ value: 'prod', count: 20 }, { value: 'staging', count: 10 }], 'an attribute shared by spans is counted per value')
})

t.test('q finds what a span\'s prompt and system instructions say (arrays in input), in the lists and on the live tail', async (t) => {
  const { user, headers } = await userWithKey()
  const otel = instrumented({ 'service.name': randomId('prompts-'), 'agent_telemetry.privacy_level': 'full' })
  const word = randomId('quokka').replace(/[^a-z0-9]/gi, '')
  otel.span('chat gpt-4o', {
    'gen_ai.operation.name': 'chat',
    'gen_ai.request.model': 'gpt-4o',
    'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: `Where is my ${word}? 订单支付失败 ☕` }] }]),
    'gen_ai.system_instructions': JSON.stringify([{ type: 'text', content: `You answer about ${word}s politely.` }]),
  }).end()
  otel.span('chat gpt-4o', { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'nothing to see' }] }]) }).end()
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(otel.spans())!)
  t.equal((await post({ ...headers, 'content-type': 'application/x-protobuf' }, body)).statusCode, 200)
  for (const q of [word, '支付失败', '☕', `"${word}s politely"`]) {
    const events = (await get(user, `/v1/me/events?q=${encodeURIComponent(q)}`)).json().events as { input: { messages: unknown[] } }[]
    t.equal(events.length, 1, `q=${q}: the one span`)
    t.ok(Array.isArray(events[0]?.input.messages), 'its messages kept as a list')
  }
  const traces = (await get(user, `/v1/me/traces?q=${encodeURIComponent(word)}`)).json().traces as unknown[]
  t.equal(traces.length, 1, 'and its trace')
})
