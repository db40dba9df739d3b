import t from 'tap'
import { decodeTraces, encodeRequest, type OtlpSpan } from '../../src/domain/otlp-codec.ts'
import { inheritWithinExport, isContentAttribute, spanRole, spanToEvent } from '../../src/domain/otlp-mapping.ts'
import protobuf from 'protobufjs'
import { traceTree } from '../../src/domain/trace-tree.ts'

const TRACE = '0af7651916cd43dd8448eb211c80319c'
const span = (over: Partial<OtlpSpan> = {}): OtlpSpan => ({
  traceId: TRACE, spanId: 'b7ad6b7169203331', parentSpanId: '', name: 'span', kind: 1, startMs: 1_700_000_000_000,
  endMs: 1_700_000_000_250, attributes: {}, events: [], status: { code: 0, message: '' }, resource: { 'service.name': 'svc' },
  scope: { name: 'scope', version: '1' }, ...over,
})

t.test('OTLP JSON: hex ids in any case, 64-bit integers as strings or numbers, enums as integers', async (t) => {
  const body = {
    resourceSpans: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'svc' } }] },
      scopeSpans: [{
        scope: { name: 'sc' },
        spans: [
          { traceId: TRACE.toUpperCase(), spanId: 'B7AD6B7169203331', parentSpanId: '', name: 'a', kind: 3, startTimeUnixNano: '1700000000000000000', endTimeUnixNano: 1700000000500000000, status: { code: 2, message: 'bad' }, attributes: [{ key: 'n', value: { intValue: '42' } }, { key: 'l', value: { arrayValue: { values: [{ boolValue: true }, { doubleValue: 1.5 }] } } }] },
          { traceId: '00000000000000000000000000000000', spanId: 'b7ad6b7169203331', name: 'zero' },
        ],
      }],
    }],
  }
  const [a, zero] = decodeTraces(Buffer.from(JSON.stringify(body)), 'json')
  t.match(a, { traceId: TRACE, spanId: 'b7ad6b7169203331', parentSpanId: '', kind: 3, startMs: 1_700_000_000_000, endMs: 1_700_000_000_500, status: { code: 2, message: 'bad' } })
  t.same(a!.attributes, { n: 42, l: [true, 1.5] })
  t.equal(zero!.traceId, '', 'an all-zero trace id is no trace id')
  t.throws(() => decodeTraces(Buffer.from('{"resourceSpans":[{"scopeSpans":{}}]}'), 'json'), { name: 'OtlpDecodeError' })
  t.throws(() => decodeTraces(Buffer.from([0x0a, 0xff, 0xff]), 'protobuf'), { name: 'OtlpDecodeError' })
})

t.test('OTLP JSON: enums by name, as the protobuf JSON mapping writes them; an error status by name is an error', async (t) => {
  const jsonSpan = (kind: unknown, code: unknown) => ({ traceId: TRACE, spanId: 'b7ad6b7169203331', name: 'a', kind, status: { code } })
  const body = { resourceSpans: [{ scopeSpans: [{ spans: [
    jsonSpan('SPAN_KIND_CLIENT', 'STATUS_CODE_ERROR'),
    jsonSpan('SPAN_KIND_SERVER', 'STATUS_CODE_OK'),
    jsonSpan('client', 'error'),
    jsonSpan(2.5, 'STATUS_CODE_UNSET'),
  ] }] }] }
  const spans = decodeTraces(Buffer.from(JSON.stringify(body)), 'json')
  t.same(spans.map((s) => [s.kind, s.status.code]), [[3, 2], [2, 1], [0, 0], [0, 0]], 'names map to their numbers; anything else is the zero value')
  const event = spanToEvent(spans[0]!)
  t.ok(typeof event !== 'string' && event.outcome === 'failed' && event.type === 'error', 'STATUS_CODE_ERROR makes a failed event')
})

t.test('64-bit integer attributes past 2^53 keep their digits, from JSON and from protobuf', async (t) => {
  const values = ['9007199254740993', '-9223372036854775808', '18446744073709551615', '9007199254740991']
  const attributes = values.map((v, i) => ({ key: `n${i}`, value: { intValue: v } }))
  const json = decodeTraces(Buffer.from(JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE, spanId: 'b7ad6b7169203331', name: 'a', attributes }] }] }] })), 'json')[0]!
  t.strictSame(json.attributes, { n0: '9007199254740993', n1: '-9223372036854775808', n2: '18446744073709551615', n3: 9007199254740991 })
  const proto = decodeTraces(encodeRequest({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: Buffer.from(TRACE, 'hex'), spanId: Buffer.from('b7ad6b7169203331', 'hex'), name: 'a', attributes: attributes.slice(0, 2).concat(attributes.slice(3)) }] }] }] }), 'protobuf')[0]!
  t.strictSame(proto.attributes, { n0: '9007199254740993', n1: '-9223372036854775808', n3: 9007199254740991 })
})

t.test('attribute values of every kind read the same from protobuf and from JSON, unset ones and defaults included', async (t) => {
  const attributes = [
    { key: 's', value: { stringValue: 'x' } },
    { key: 'empty', value: { stringValue: '' } },
    { key: 'no', value: { boolValue: false } },
    { key: 'zero', value: { intValue: 0 } },
    { key: 'big', value: { intValue: '9007199254740991' } },
    { key: 'neg', value: { intValue: '-5' } },
    { key: 'd', value: { doubleValue: 0.25 } },
    { key: 'list', value: { arrayValue: { values: [{ stringValue: 'a' }, { intValue: 1 }, { arrayValue: { values: [] } }] } } },
    { key: 'map', value: { kvlistValue: { values: [{ key: 'k', value: { boolValue: true } }, { key: 'inner', value: { kvlistValue: { values: [] } } }] } } },
    { key: 'bytes', value: { bytesValue: 'AQID' } },
    { key: 'unset', value: {} },
  ]
  const request = (attrs: unknown[]) => ({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE, spanId: 'b7ad6b7169203331', name: 'a', attributes: attrs }] }] }] })
  const proto = decodeTraces(encodeRequest({
    resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: Buffer.from(TRACE, 'hex'), spanId: Buffer.from('b7ad6b7169203331', 'hex'), name: 'a', attributes }] }] }],
  }), 'protobuf')[0]!.attributes
  const json = decodeTraces(Buffer.from(JSON.stringify(request(attributes))), 'json')[0]!.attributes
  t.same(proto, {
    s: 'x', empty: '', no: false, zero: 0, big: 9007199254740991, neg: -5, d: 0.25, list: ['a', 1, []], map: { k: true, inner: {} }, bytes: 'AQID',
    // An AnyValue with no member set: protobuf reads the first member's default, JSON has nothing.
    unset: '',
  })
  t.same(json, { ...proto, unset: null })
})

t.test('OTLP JSON: an attribute nested past 16 levels is cut to null there, never refused, whatever its depth', async (t) => {
  for (const levels of [20, 5_000]) {
    // Written out as text: JSON.stringify itself would run out of stack on such a value.
    const value = '{"kvlistValue":{"values":[{"key":"k","value":'.repeat(levels) + '{"stringValue":"bottom"}' + '}]}}'.repeat(levels)
    const body = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"${TRACE}","spanId":"b7ad6b7169203331","name":"a","attributes":[{"key":"deep","value":${value}}]}]}]}]}`
    let attr: unknown = decodeTraces(Buffer.from(body), 'json')[0]!.attributes.deep
    let kept = 0
    while (attr !== null && typeof attr === 'object') {
      attr = (attr as Record<string, unknown>).k
      kept++
    }
    t.equal(kept, 17, `${levels} levels: the value itself and 16 levels below it are kept`)
    t.equal(attr, null, 'and below them a null')
  }
})

t.test('an attribute named __proto__ is left out: its keys never read as the span\'s attributes', async (t) => {
  const proto = '{"key":"__proto__","value":{"kvlistValue":{"values":[{"key":"gen_ai.agent.name","value":{"stringValue":"someone-else"}}]}}}'
  const nested = '{"key":"meta","value":{"kvlistValue":{"values":[' + proto + ',{"key":"kept","value":{"stringValue":"yes"}}]}}}'
  const body = `{"resourceSpans":[{"resource":{"attributes":[${proto},{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeSpans":[{"spans":[{"traceId":"${TRACE}","spanId":"b7ad6b7169203331","name":"a","attributes":[${proto},${nested}]}]}]}]}`
  const span = decodeTraces(Buffer.from(body), 'json')[0]!
  t.equal(Object.getPrototypeOf(span.attributes), Object.prototype, 'the attributes\' prototype is untouched')
  t.equal(Object.getPrototypeOf(span.resource), Object.prototype, 'and the resource\'s')
  t.equal(Object.getPrototypeOf(span.attributes.meta), Object.prototype, 'and a kvlist\'s')
  t.same(span.attributes.meta, { kept: 'yes' })
  const event = spanToEvent(span)
  t.ok(typeof event !== 'string')
  t.equal((event as { agentId: string }).agentId, 'svc', 'the agent is the resource\'s, not the one under __proto__')
  // Names made from part of an attribute's name: OpenLLMetry's and OpenInference's flattened messages.
  const flat = `{"resourceSpans":[{"resource":{"attributes":[{"key":"agent_telemetry.privacy_level","value":{"stringValue":"standard"}}]},"scopeSpans":[{"spans":[{"traceId":"${TRACE}","spanId":"b7ad6b7169203332","name":"chat","attributes":[` +
    '{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},' +
    '{"key":"gen_ai.completion.0.__proto__","value":{"kvlistValue":{"values":[{"key":"content","value":{"stringValue":"inherited"}}]}}},' +
    '{"key":"gen_ai.completion.0.role","value":{"stringValue":"assistant"}},' +
    '{"key":"llm.input_messages.0.message.__proto__","value":{"kvlistValue":{"values":[{"key":"role","value":{"stringValue":"user"}}]}}},' +
    '{"key":"llm.input_messages.0.message.content","value":{"stringValue":"hello"}}]}]}]}]}'
  const mapped = spanToEvent(decodeTraces(Buffer.from(flat), 'json')[0]!) as { input?: { messages?: unknown[] }; reasoning?: unknown }
  t.same(mapped.input?.messages, [{ content: 'hello' }], 'an OpenInference message keeps its own keys, nothing under __proto__')
  t.equal(Object.getPrototypeOf(mapped.input!.messages![0]), Object.prototype)
  t.not(mapped.reasoning, 'inherited', 'no completion read through a prototype')
})

t.test('span roles: current, deprecated (OpenLLMetry) and Vercel AI SDK names', async (t) => {
  t.equal(spanRole(span({ attributes: { 'gen_ai.operation.name': 'chat' } })), 'model')
  t.equal(spanRole(span({ attributes: { 'gen_ai.operation.name': 'generate_content' } })), 'model')
  t.equal(spanRole(span({ attributes: { 'llm.request.type': 'completion' } })), 'model')
  t.equal(spanRole(span({ name: 'ai.streamText.doStream' })), 'model')
  t.equal(spanRole(span({ attributes: { 'gen_ai.operation.name': 'execute_tool' } })), 'tool')
  t.equal(spanRole(span({ attributes: { 'traceloop.span.kind': 'tool' } })), 'tool')
  t.equal(spanRole(span({ attributes: { 'gen_ai.operation.name': 'create_agent' } })), 'agent')
  t.equal(spanRole(span({ name: 'GET /health' })), 'other')
})

t.test('tokens: cache counts come out of the input once; an input smaller than its cache counts was sent apart', async (t) => {
  const included = spanToEvent(span({ attributes: { 'gen_ai.usage.input_tokens': 100, 'gen_ai.usage.cache_read.input_tokens': 60, 'gen_ai.usage.output_tokens': 5 } }))
  t.match(included, { metadata: { tokensBreakdown: { inputBase: 40, cacheRead: 60, cacheCreation: 0, output: 5 } } })
  const apart = spanToEvent(span({ attributes: { 'gen_ai.usage.input_tokens': 10, 'gen_ai.usage.cache_read.input_tokens': 60 } }))
  t.match(apart, { metadata: { tokensBreakdown: { inputBase: 10, cacheRead: 60 } } })
  t.notOk((spanToEvent(span()) as { metadata: Record<string, unknown> }).metadata.tokensBreakdown, 'no usage, no breakdown')
})

t.test('identity, time, errors and privacy', async (t) => {
  const e = spanToEvent(span({
    attributes: { 'gen_ai.agent.id': 'asst_1', 'gen_ai.conversation.id': 'c1', 'gen_ai.input.messages': '[{"role":"user"}]', 'code.function': 'f' },
    status: { code: 2, message: 'upstream 502' },
  })) as any
  t.equal(e.agentId, 'asst_1')
  t.equal(e.timestamp, 1_700_000_000_000)
  t.equal(e.durationMs, 250)
  t.match(e, { type: 'error', outcome: 'failed', errorMessage: 'upstream 502' })
  t.equal(e.metadata.sessionId, 'c1')
  t.equal(e.metadata.privacyLevel, 'minimal')
  t.equal(e.input, undefined)
  t.same(Object.keys(e.metadata.otel.attributes).sort(), ['code.function', 'gen_ai.agent.id', 'gen_ai.conversation.id'])
  const standard = spanToEvent(span({ resource: { 'service.name': 'svc', 'agent_telemetry.privacy_level': 'standard' }, attributes: { 'gen_ai.input.messages': '[{"role":"user"}]' } })) as any
  t.same(standard.input, { messages: [{ role: 'user' }] })
  t.equal(standard.agentId, 'svc')
  t.equal(spanToEvent(span({ spanId: '' })), 'span has no valid span id (8 bytes, not all zero)')
  t.equal((spanToEvent(span({ resource: {} })) as any).agentId, 'unknown_service')
})

t.test('minimal keeps only the attributes that describe a call, whatever names the content goes by', async (t) => {
  const e = spanToEvent(span({
    resource: { 'service.name': 'svc', 'process.command_args': ['node', '/home/jane/agent.js', '--token=abc'], 'host.name': 'h1' },
    attributes: {
      'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 10, 'gen_ai.conversation.id': 'c1',
      'input.value': 'my SSN is 078-05-1120', 'output.value': 'noted', 'llm.input_messages.0.message.content': 'secret prompt',
      'langfuse.observation.input': 'secret', 'pydantic_ai.all_messages': '[{"content":"secret"}]', 'http.url': 'https://x.test/?api_key=abc',
      'mlflow.spanInputs': 'secret', 'crewai.task.description': 'secret', 'my.custom': 'secret', 'code.function': 'run', 'code.filepath': '/home/jane/agent.js',
    },
    events: [
      { name: 'gen_ai.client.inference.operation.details', timeMs: 1, attributes: { 'gen_ai.input.messages': '[{"content":"secret"}]', 'gen_ai.response.id': 'r1' } },
      { name: 'exception', timeMs: 2, attributes: { 'exception.type': 'ValueError', 'exception.message': 'bad input', 'exception.stacktrace': 'at /home/jane/agent.js:1' } },
    ],
  })) as any
  t.equal(e.metadata.privacyLevel, 'minimal')
  t.same(Object.keys(e.metadata.otel.attributes).sort(), ['code.function', 'gen_ai.conversation.id', 'gen_ai.operation.name', 'gen_ai.request.model', 'gen_ai.usage.input_tokens'])
  t.same(e.metadata.otel.resource, { 'service.name': 'svc', 'host.name': 'h1' }, 'no command line or paths from the resource')
  t.same(e.metadata.otel.events.map((x: any) => [x.name, x.attributes]), [
    ['gen_ai.client.inference.operation.details', { 'gen_ai.response.id': 'r1' }],
    ['exception', { 'exception.type': 'ValueError', 'exception.message': 'bad input' }],
  ])
  t.notMatch(JSON.stringify(e), /secret|078-05-1120|api_key|jane/, 'nothing of the content anywhere in the event')
  t.equal(e.input, undefined)
  t.equal(e.reasoning, undefined)
  t.equal(e.metadata.userId, undefined)
  t.match(e, { model: 'gpt-4o', errorMessage: 'ValueError: bad input', metadata: { sessionId: 'c1', tokensBreakdown: { inputBase: 10 } } })
})

t.test('minimal keeps a described name only with its kind of value, and no namespace whole', async (t) => {
  const mark = 'ZQXMARK123'
  const e = spanToEvent(span({
    resource: { 'service.name': 'svc', 'k8s.pod.annotation.note': mark, 'service.anything': mark, 'cloud.region': 'eu-west-1', 'host.name': ['a', mark] as never },
    attributes: {
      'gen_ai.usage.note': mark, [`gen_ai.usage.${mark}`]: 5, 'gen_ai.usage.details': { note: mark } as never, 'ai.usage.text': mark, 'llm.token_count.custom': mark,
      'gen_ai.request.temperature': mark, 'gen_ai.request.max_tokens': { n: mark } as never, 'gen_ai.usage.output_tokens': mark,
      'http.response.status_code': mark, 'gen_ai.output.type': `${mark}\nsecond line`, 'langfuse.observation.usage_details': `{"input":3,"note":"${mark}"}`,
      'langfuse.trace.name': mark, 'agent_telemetry.privacy_level': mark, 'http.route': `/api/items?q=${mark}`,
      'gen_ai.response.finish_reasons': ['stop', { x: mark }] as never,
      'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 12, 'gen_ai.request.temperature_kept': 1, 'gen_ai.request.top_p': '0.9', 'llm.is_streaming': true,
    },
    events: [{ name: 'exception', timeMs: 1, attributes: { 'exception.type': 'E', 'gen_ai.usage.note': mark } }],
  })) as any
  t.notMatch(JSON.stringify(e.metadata), new RegExp(mark), 'the marker is nowhere in the event\'s metadata')
  t.same(e.metadata.otel.attributes, { 'http.route': '/api/items', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 12, 'gen_ai.request.top_p': '0.9', 'llm.is_streaming': true })
  t.same(e.metadata.otel.resource, { 'service.name': 'svc', 'cloud.region': 'eu-west-1' })
  t.same(e.metadata.otel.events[0].attributes, { 'exception.type': 'E' })
})

t.test('usage counts once: not on agent runs, tools or non-generation observations, which repeat their model calls\' usage', async (t) => {
  const usage = { 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 2200, 'gen_ai.usage.output_tokens': 300 }
  const tokens = (attributes: Record<string, unknown>) => (spanToEvent(span({ attributes: attributes as never })) as any).metadata.tokensBreakdown
  t.notOk(tokens({ 'gen_ai.operation.name': 'invoke_agent', ...usage }), 'an agent run (Strands, Pydantic AI) repeats its calls\' usage')
  t.notOk(tokens({ 'langfuse.observation.type': 'agent', ...usage }), 'a Langfuse agent observation')
  t.notOk(tokens({ 'langfuse.observation.type': 'span', ...usage }), 'a Langfuse span observation')
  t.notOk(tokens({ 'openinference.span.kind': 'CHAIN', 'llm.token_count.prompt': 100 }), 'an OpenInference chain')
  t.match(tokens({ 'gen_ai.operation.name': 'chat', ...usage }), { inputBase: 2200, output: 300 }, 'a model call counts')
  t.match(tokens({ 'langfuse.observation.type': 'generation', ...usage }), { inputBase: 2200 }, 'a Langfuse generation counts')
  t.match(tokens(usage), { inputBase: 2200 }, 'a span of no known kind with usage counts, as before')
  const agent = spanToEvent(span({ attributes: { 'gen_ai.operation.name': 'invoke_agent', ...usage } as never })) as any
  t.equal(agent.metadata.otel.attributes['gen_ai.usage.input_tokens'], 2200, 'the repeated usage stays in the attributes')
})

t.test('OpenInference: LLM and TOOL spans with their model, tokens, tool and content; EMBEDDING is a model call', async (t) => {
  const standard = { 'service.name': 'oi-app', 'agent_telemetry.privacy_level': 'standard' }
  const llm = spanToEvent(span({ resource: standard, attributes: {
    'openinference.span.kind': 'LLM', 'llm.model_name': 'gpt-4o-2024-08-06', 'llm.provider': 'openai', 'llm.token_count.prompt': 900,
    'llm.token_count.completion': 60, 'llm.token_count.prompt_details.cache_read': 400, 'llm.token_count.completion_details.reasoning': 20,
    'llm.input_messages.0.message.role': 'user', 'llm.input_messages.0.message.content': 'hello', 'llm.output_messages.0.message.role': 'assistant',
    'llm.output_messages.0.message.content': 'hi there', 'input.value': '{"q":"hello"}',
  } })) as any
  t.match(llm, { type: 'reasoning', model: 'gpt-4o-2024-08-06', reasoning: 'hi there', metadata: { provider: 'openai', tokensBreakdown: { inputBase: 500, cacheRead: 400, output: 60, reasoning: 20 } } })
  t.same(llm.input.messages, [{ role: 'user', content: 'hello' }])
  t.notOk('llm.input_messages.0.message.content' in llm.metadata.otel.attributes, 'content moved to input, not kept twice')
  const tool = spanToEvent(span({ resource: standard, attributes: { 'openinference.span.kind': 'TOOL', 'tool.name': 'get_order', 'tool.parameters': '{"id":7}', 'output.value': 'shipped' } })) as any
  t.match(tool, { type: 'tool', toolExecuted: 'get_order', input: { arguments: { id: 7 } }, reasoning: 'shipped' })
  t.equal(spanRole(span({ attributes: { 'openinference.span.kind': 'EMBEDDING' } })), 'model')
  t.equal(spanRole(span({ attributes: { 'openinference.span.kind': 'AGENT' } })), 'agent')
  t.equal(spanRole(span({ attributes: { 'llm.request.type': 'embedding' } })), 'model', 'OpenLLMetry\'s embedding request')
})

t.test('Langfuse, Vercel, OpenLLMetry, Pydantic AI and Sentry names: model, usage details, errors, session and user', async (t) => {
  const standard = { 'service.name': 'svc', 'agent_telemetry.privacy_level': 'standard' }
  const lf = spanToEvent(span({ attributes: {
    'langfuse.observation.type': 'generation', 'langfuse.observation.model.name': 'gpt-4o',
    'langfuse.observation.usage_details': '{"input":700,"output":70,"cache_read_input_tokens":200}', 'langfuse.session.id': 'lf-s',
  } })) as any
  t.match(lf, { type: 'reasoning', model: 'gpt-4o', metadata: { sessionId: 'lf-s', tokensBreakdown: { inputBase: 500, cacheRead: 200, output: 70 } } })
  const failed = spanToEvent(span({ attributes: { 'langfuse.observation.type': 'tool', 'langfuse.observation.level': 'ERROR', 'langfuse.observation.status_message': 'card declined' } })) as any
  t.match(failed, { type: 'error', outcome: 'failed', errorMessage: 'card declined' })
  const vercel = spanToEvent(span({ name: 'ai.streamText.doStream', resource: standard, attributes: {
    'ai.operationId': 'ai.streamText.doStream', 'gen_ai.usage.input_tokens': 500, 'gen_ai.usage.output_tokens': 40, 'ai.usage.cachedInputTokens': 100,
    'ai.usage.reasoningTokens': 10, 'ai.telemetry.metadata.sessionId': 'v-s', 'ai.telemetry.metadata.userId': 'v-u',
  } })) as any
  t.match(vercel, { metadata: { sessionId: 'v-s', userId: 'v-u', tokensBreakdown: { inputBase: 400, cacheRead: 100, output: 40, reasoning: 10 } } })
  const traceloop = spanToEvent(span({ resource: standard, attributes: {
    'llm.request.type': 'chat', 'llm.request.model': 'gpt-4', 'llm.usage.prompt_tokens': 30, 'llm.usage.completion_tokens': 3,
    'traceloop.association.properties.session_id': 'tl-s', 'traceloop.association.properties.user_id': 'tl-u',
  } })) as any
  t.match(traceloop, { model: 'gpt-4', metadata: { sessionId: 'tl-s', userId: 'tl-u', tokensBreakdown: { inputBase: 30, output: 3 } } })
  const pydantic = spanToEvent(span({ attributes: {
    'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'claude-sonnet-4-5', 'gen_ai.usage.input_tokens': 1000, 'gen_ai.usage.output_tokens': 10,
    'gen_ai.usage.details.cache_read_tokens': 800, 'gen_ai.usage.details.cache_write_tokens': 100,
  } })) as any
  t.match(pydantic.metadata.tokensBreakdown, { inputBase: 100, cacheRead: 800, cacheCreation: 100, output: 10 })
  const sentry = spanToEvent(span({ attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.usage.input_tokens': 100, 'gen_ai.usage.input_tokens.cached': 40, 'gen_ai.usage.output_tokens': 9, 'gen_ai.usage.output_tokens.reasoning': 4 } })) as any
  t.match(sentry.metadata.tokensBreakdown, { inputBase: 60, cacheRead: 40, output: 9, reasoning: 4 })
  const minimalUser = spanToEvent(span({ attributes: { 'user.id': 'jane@example.com', 'session.id': 's' } })) as any
  t.equal(minimalUser.metadata.userId, undefined, 'the end user is kept above minimal only')
  t.notOk('user.id' in minimalUser.metadata.otel.attributes)
})

t.test('the tools offered to the model are its toolsConsidered, by name, at every level', async (t) => {
  const offered = (attributes: Record<string, unknown>) => (spanToEvent(span({ attributes: attributes as never })) as any).toolsConsidered
  t.same(offered({ 'gen_ai.tool.definitions': JSON.stringify([{ type: 'function', name: 'search', description: 'd' }, { type: 'function', function: { name: 'lookup' } }]) }), ['search', 'lookup'])
  t.same(offered({ 'ai.prompt.tools': [JSON.stringify({ type: 'function', name: 'weather', parameters: {} })] }), ['weather'])
  t.same(offered({ 'llm.request.functions.0.name': 'a', 'llm.request.functions.0.description': 'x', 'llm.request.functions.1.name': 'b' }), ['a', 'b'])
  t.equal(offered({ 'gen_ai.tool.definitions': 'not json' }), undefined)
})

t.test('within an export, a span without an agent or session takes its nearest ancestor\'s; a trace\'s one session reaches its other spans', async (t) => {
  const at = (spanId: string, parentSpanId: string, attributes: Record<string, unknown> = {}, traceId = TRACE) =>
    span({ traceId, spanId, parentSpanId, attributes: attributes as never, resource: { 'service.name': 'my-fastapi-app' } })
  const spans = [
    at('a000000000000001', '', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'triage', 'gen_ai.conversation.id': 'conv-1' }),
    at('a000000000000002', 'a000000000000001', { 'gen_ai.operation.name': 'chat', 'gen_ai.usage.input_tokens': 100 }),
    at('a000000000000003', 'a000000000000002', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'billing' }),
    at('a000000000000004', 'a000000000000003', { 'gen_ai.operation.name': 'chat' }),
    at('a000000000000005', 'not-here-0000001', { 'gen_ai.operation.name': 'execute_tool' }),
    at('b000000000000001', '', { 'gen_ai.operation.name': 'chat' }, 'b'.repeat(32)),
  ]
  const mapped = spans.map((s) => spanToEvent(s))
  inheritWithinExport(spans, mapped)
  const events = mapped as any[]
  t.same(events.map((e) => e.agentId), ['triage', 'triage', 'billing', 'billing', 'my-fastapi-app', 'my-fastapi-app'],
    'a model call under an agent\'s span is that agent\'s; a span with no agent above it stays the service\'s')
  t.same(events.map((e) => e.metadata.sessionId ?? null), ['conv-1', 'conv-1', 'conv-1', 'conv-1', 'conv-1', null],
    'the session reaches the spans under it, and an orphan of the same trace by the trace\'s one session; another trace keeps none')
})

t.test('gen_ai.output.messages: text parts kept as their text, anything else as the JSON sent', async (t) => {
  const full = { 'service.name': 'svc', 'agent_telemetry.privacy_level': 'full' }
  const output = (messages: unknown) => (spanToEvent(span({ resource: full, attributes: { 'gen_ai.output.messages': JSON.stringify(messages) } })) as any).reasoning
  t.equal(output([{ role: 'assistant', parts: [{ type: 'text', content: 'Paris.' }, { type: 'text', content: 'It is "the capital".' }], finish_reason: 'stop' }]),
    'Paris.\nIt is "the capital".', 'the text, not its JSON')
  t.equal(output([{ role: 'assistant', parts: [{ type: 'text', content: 'a' }] }, { role: 'assistant', parts: [{ type: 'text', content: 'b' }] }]), 'a\nb')
  const call = [{ role: 'assistant', parts: [{ type: 'text', content: 'calling' }, { type: 'tool_call', id: 'c1', name: 'search', arguments: { q: 'x' } }] }]
  t.equal(output(call), JSON.stringify(call), 'a tool call keeps the whole JSON')
  for (const other of [[], [{ role: 'assistant' }], [{ parts: [] }], [{ parts: [{ type: 'text', content: 3 }] }], { parts: [] }]) {
    t.equal(output(other), JSON.stringify(other), `kept as sent: ${JSON.stringify(other)}`)
  }
  t.equal((spanToEvent(span({ resource: full, attributes: { 'gen_ai.output.messages': 'not json' } })) as any).reasoning, 'not json')
})

t.test('the Vercel AI SDK\'s ai.prompt (the JSON of system, prompt and messages) is read into input', async (t) => {
  const full = { 'service.name': 'svc', 'agent_telemetry.privacy_level': 'full' }
  const call = spanToEvent(span({ resource: full, attributes: { 'ai.prompt': JSON.stringify({ system: 'be brief', prompt: 'open C:\\Users\\me\nnow' }) } })) as any
  t.same(call.input, { prompt: 'open C:\\Users\\me\nnow', system: 'be brief' }, 'the prompt as text, not its JSON')
  const messages = spanToEvent(span({ resource: full, attributes: { 'ai.prompt': JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) } })) as any
  t.same(messages.input, { messages: [{ role: 'user', content: 'hi' }] })
  const plain = spanToEvent(span({ resource: full, attributes: { 'ai.prompt': 'just text' } })) as any
  t.same(plain.input, { prompt: 'just text' }, 'a prompt that is no such JSON is kept as it is')
  const other = spanToEvent(span({ resource: full, attributes: { 'ai.prompt': '{"question":"why"}' } })) as any
  t.same(other.input, { prompt: '{"question":"why"}' }, 'nor is JSON of other keys')
  const list = spanToEvent(span({ resource: full, attributes: { 'ai.prompt': JSON.stringify({ system: 's', prompt: [{ role: 'user', content: 'hi' }] }) } })) as any
  t.same(list.input, { system: 's', messages: [{ role: 'user', content: 'hi' }] }, 'a prompt that is a list of messages (AI SDK 5) is the messages')
  const both = spanToEvent(span({ resource: full, attributes: { 'ai.prompt': JSON.stringify({ prompt: [{ role: 'user', content: 'a' }], messages: [{ role: 'user', content: 'b' }] }) } })) as any
  t.same(both.input, { prompt: '[{"role":"user","content":"a"}]', messages: [{ role: 'user', content: 'b' }] }, 'beside messages, as its JSON text')
  const number = spanToEvent(span({ resource: full, attributes: { 'ai.prompt': '{"prompt":42}' } })) as any
  t.same(number.input, { prompt: '42' }, 'a prompt is always text')
})

t.test('the Vercel AI SDK\'s call spans are steps: their repeated model and usage are not another model call', async (t) => {
  const wrapper = spanToEvent(span({ name: 'ai.generateText', attributes: {
    'ai.operationId': 'ai.generateText', 'ai.model.id': 'gpt-4o', 'ai.usage.promptTokens': 10_000, 'ai.usage.cachedInputTokens': 8_000,
  } })) as any
  t.equal(spanRole(span({ attributes: { 'ai.operationId': 'ai.streamObject' } })), 'step')
  t.equal(wrapper.type, 'action')
  t.equal(wrapper.model, undefined, 'no model: spend by model counts the call once')
  t.equal(wrapper.metadata.tokensBreakdown, undefined, 'its repeat of the cache tokens is not counted')
  t.equal(wrapper.metadata.otel.attributes['ai.model.id'], 'gpt-4o', 'both stay in its attributes')
  const call = spanToEvent(span({ name: 'ai.generateText.doGenerate', attributes: {
    'ai.operationId': 'ai.generateText.doGenerate', 'ai.model.id': 'gpt-4o', 'gen_ai.usage.input_tokens': 10_000, 'ai.usage.cachedInputTokens': 8_000,
  } })) as any
  t.match(call, { type: 'reasoning', model: 'gpt-4o', metadata: { tokensBreakdown: { inputBase: 2_000, cacheRead: 8_000 } } })
  t.equal(spanRole(span({ attributes: { 'ai.operationId': 'ai.toolCall' } })), 'tool')
})

t.test('an OpenLLMetry agent span names its agent by traceloop.entity.name, and the spans under it take it', async (t) => {
  const agentSpan = span({ spanId: 'a000000000000001', attributes: { 'traceloop.span.kind': 'agent', 'traceloop.entity.name': 'researcher' } })
  const chat = span({ spanId: 'a000000000000002', parentSpanId: 'a000000000000001', attributes: { 'llm.request.type': 'chat' } })
  const task = span({ spanId: 'a000000000000003', attributes: { 'traceloop.span.kind': 'task', 'traceloop.entity.name': 'summarise' } })
  const spans = [agentSpan, chat, task]
  const mapped = spans.map((s) => spanToEvent(s))
  const unnamed = inheritWithinExport(spans, mapped)
  t.same(mapped.map((e) => (e as { agentId: string }).agentId), ['researcher', 'researcher', 'svc'], 'a task\'s entity name is no agent')
  t.same([...unnamed], [2], 'only the task fell back to the service')
})

t.test('an exception event is a failure unless the span\'s status says OK', async (t) => {
  const exception = { name: 'exception', timeMs: 1_700_000_000_100, attributes: { 'exception.type': 'RateLimitError', 'exception.message': '429 retrying', 'exception.escaped': false } }
  const handled = spanToEvent(span({ events: [exception], status: { code: 1, message: '' } })) as any
  t.match(handled, { type: 'action', outcome: 'success' })
  t.equal(handled.errorMessage, undefined)
  t.equal(handled.metadata.otel.events[0].name, 'exception', 'the exception stays among its events')
  t.match(spanToEvent(span({ events: [exception] })), { type: 'error', outcome: 'failed', errorMessage: 'RateLimitError: 429 retrying' }, 'status unset: a failure')
  t.match(spanToEvent(span({ events: [exception], status: { code: 2, message: '' } })), { type: 'error', outcome: 'failed' })
})

t.test('trace tree: parents by span id, orphans and events without spans are roots, cycles are cut', async (t) => {
  const ev = (spanId: string | null, parentSpanId: string | null) => ({ spanId, parentSpanId })
  // r ← c ← g, o names a parent that is not there, flat has no span.
  const tree = traceTree([ev('s1', null), ev('s2', 's1'), ev('s3', 's2'), ev('s4', 'missing'), ev(null, null)])
  t.same(tree.roots, [0, 3, 4])
  t.same(tree.parent, [null, 0, 1, null, null])
  t.same(tree.children, [[1], [2], [], [], []])
  t.same(tree.depth, [0, 1, 2, 0, 0])
  const cycle = traceTree([ev('x', 'y'), ev('y', 'x')])
  t.same(cycle.roots, [0], 'the earliest event of a cycle becomes a root')
  t.same(cycle.parent, [null, 0])
  t.same(cycle.children, [[1], []])
  t.same(cycle.depth, [0, 1])
  const self = traceTree([ev('z', 'z')])
  t.same(self.roots, [0], 'a span that is its own parent is a root')
  t.same(traceTree([ev('d', null), ev('d', 'd')]).parent, [null, 0], 'the first event naming a span id is that span')
})

t.test('protobuf: nanosecond times to exact milliseconds (no floating-point rounding at a millisecond edge)', async (t) => {
  const root = protobuf.Root.fromJSON({ nested: { S: { fields: { t: { type: 'fixed64', id: 1 } } } } })
  const S = root.lookupType('S')
  for (const nanos of ['1795320225622999999', '1795320225623000000', '1700000000000000001', '18446744073709551615', '999999', '0']) {
    const decoded = S.decode(S.encode({ t: (protobuf.util.Long as unknown as { fromString(s: string, unsigned: boolean): unknown }).fromString(nanos, true) }).finish()) as unknown as { t: unknown }
    const body = { resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE, spanId: 'b7ad6b7169203331', startTimeUnixNano: nanos }] }] }] }
    const fromJson = decodeTraces(Buffer.from(JSON.stringify(body)), 'json')[0]!.startMs
    t.equal(fromJson, Number(BigInt(nanos) / 1_000_000n), `${nanos} from JSON`)
    // The same value through the protobuf path's Long handling.
    const request = { resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: Buffer.from(TRACE, 'hex'), spanId: Buffer.from('b7ad6b7169203331', 'hex'), startTimeUnixNano: decoded.t }] }] }] }
    t.equal(decodeTraces(encodeRequest(request), 'protobuf')[0]!.startMs, Number(BigInt(nanos) / 1_000_000n), `${nanos} from protobuf`)
  }
})

t.test('content attributes are recognised by prefix, not by substring', async (t) => {
  t.ok(isContentAttribute('gen_ai.prompt.0.content'))
  t.ok(isContentAttribute('gen_ai.input.messages'))
  t.ok(isContentAttribute('ai.prompt'))
  t.notOk(isContentAttribute('gen_ai.promptx'))
  t.notOk(isContentAttribute('gen_ai.usage.input_tokens'))
})
