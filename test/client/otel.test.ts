import './built-client.ts'
import t from 'tap'
import type { AddressInfo } from 'node:net'
import { context, trace, type Attributes, type Span } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace-base'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { AgentSpanProcessor } from 'agent-telemetry-client'
import { buildTestApp, newUser, randomId } from '../helpers/app.ts'

// An agent instrumented with the OpenTelemetry SDK, its spans exported as the BatchSpanProcessor
// exports them: the model calls and tools of a run before the run's own `invoke_agent` span, in
// an export of their own. The real SDK, its protobuf exporter, and the service.

const app = await buildTestApp(t)
await app.listen({ port: 0, host: '127.0.0.1' })
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`

/** A program's tracer with `processors` before the one that keeps its finished spans. */
function program (service: string, processors: SpanProcessor[]) {
  const memory = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': service }), spanProcessors: [...processors, new SimpleSpanProcessor(memory)] })
  const tracer = provider.getTracer('agent-app', '1.0.0')
  return {
    span: (name: string, attributes: Attributes, parent?: Span) => tracer.startSpan(name, { attributes }, parent ? trace.setSpan(context.active(), parent) : undefined),
    /** The spans finished since the last call. */
    take: () => { const spans = memory.getFinishedSpans(); memory.reset(); return spans },
  }
}

/** One run: planner → (chat, search tool, coder sub-agent → chat), the run's span ending last. */
function run (p: ReturnType<typeof program>) {
  const planner = p.span('invoke_agent planner', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'planner', 'gen_ai.conversation.id': 'conv-1' })
  const chat = p.span('chat gpt-4o', { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 100, 'gen_ai.usage.output_tokens': 10 }, planner)
  chat.end()
  const tool = p.span('execute_tool search', { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search' }, planner)
  tool.end()
  const coder = p.span('invoke_agent coder', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'coder' }, planner)
  const coderChat = p.span('chat gpt-4o', { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o' }, coder)
  coderChat.end()
  coder.end()
  const early = p.take()
  planner.end()
  return { early, late: p.take(), ids: { planner, chat, tool, coder, coderChat } }
}

async function send (key: string, spans: ReadableSpan[]) {
  const exporter = new OTLPTraceExporter({ url: `${base}/v1/traces`, headers: { authorization: `Bearer ${key}` } })
  const code = await new Promise<number>((resolve) => exporter.export(spans, (r) => resolve(r.code)))
  await exporter.shutdown()
  return code
}

async function stored (user: Awaited<ReturnType<typeof newUser>>, traceId: string) {
  const names = new Map<string, string>(((await app.inject({ url: '/v1/me/agents', headers: user.auth })).json().agents as { id: string; displayName: string }[]).map((a) => [a.id, a.displayName]))
  const detail = (await app.inject({ url: `/v1/me/traces/${traceId}`, headers: user.auth })).json()
  return new Map<string, { agent: string; session: string | null }>(detail.spans.map((s: { spanId: string; agentId: string; sessionId: string | null }) => [s.spanId, { agent: names.get(s.agentId)!, session: s.sessionId }]))
}

t.test('without the processor, a run\'s spans exported before its own span go to the service and lose the conversation', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const service = randomId('support-app-')
  const { early, late, ids } = run(program(service, []))
  t.equal(await send(key.secret, early), 0)
  t.equal(await send(key.secret, late), 0)
  const spans = await stored(user, ids.planner.spanContext().traceId)
  t.same(spans.get(ids.chat.spanContext().spanId), { agent: service, session: null }, 'the case the processor is for')
  t.same(spans.get(ids.coderChat.spanContext().spanId), { agent: 'coder', session: null })
})

t.test('with AgentSpanProcessor, every span of the run is its agent\'s, in its conversation; a sub-agent keeps its own', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const key = await user.createKey()
  const service = randomId('support-app-')
  const { early, late, ids } = run(program(service, [new AgentSpanProcessor()]))
  t.equal(early.length, 4, 'four spans exported before the run\'s own')
  t.equal(await send(key.secret, early), 0)
  t.equal(await send(key.secret, late), 0)
  const spans = await stored(user, ids.planner.spanContext().traceId)
  const of = (span: Span) => spans.get(span.spanContext().spanId)
  t.same(of(ids.planner), { agent: 'planner', session: 'conv-1' })
  t.same(of(ids.chat), { agent: 'planner', session: 'conv-1' })
  t.same(of(ids.tool), { agent: 'planner', session: 'conv-1' })
  t.same(of(ids.coder), { agent: 'coder', session: 'conv-1' }, 'the sub-agent keeps its name, takes the conversation')
  t.same(of(ids.coderChat), { agent: 'coder', session: 'conv-1' }, 'and the spans under it are its')
  const agents = ((await app.inject({ url: '/v1/me/agents', headers: user.auth })).json().agents as { displayName: string }[]).map((a) => a.displayName)
  t.notOk(agents.includes(service), 'no agent was made of the service')
  const session = (await app.inject({ url: '/v1/me/sessions/conv-1', headers: user.auth })).json()
  t.equal(session.events.length, 5, 'the conversation holds the whole run')
})

t.test('the processor never throws into the application, and forgets ended spans', async (t) => {
  const processor = new AgentSpanProcessor()
  t.doesNotThrow(() => processor.onStart({ spanContext: () => { throw new Error('odd span') }, setAttribute: () => {} }))
  const set: [string, string][] = []
  const parent = { spanContext: () => ({ spanId: 'p' }), attributes: { 'gen_ai.agent.name': 'a' }, setAttribute: () => {} }
  processor.onStart(parent)
  processor.onStart({ spanContext: () => ({ spanId: 'c1' }), parentSpanId: 'p', attributes: {}, setAttribute: (k: string, v: string) => { set.push([k, v]) } })
  t.same(set, [['gen_ai.agent.name', 'a']], 'a 1.x span (parentSpanId) takes its parent\'s agent')
  // A group is kept whole: a span named by its agent id alone is not given the parent's name (which
  // the service reads first), nor a span with its own session.id the parent's conversation.
  const grouped: [string, string][] = []
  processor.onStart({ spanContext: () => ({ spanId: 'p2' }), attributes: { 'gen_ai.agent.name': 'planner', 'gen_ai.conversation.id': 'c1' }, setAttribute: () => {} })
  processor.onStart({ spanContext: () => ({ spanId: 'c3' }), parentSpanId: 'p2', attributes: { 'gen_ai.agent.id': 'researcher', 'session.id': 's2' }, setAttribute: (k: string, v: string) => { grouped.push([k, v]) } })
  t.same(grouped, [], 'nothing copied into a group the span has')
  processor.onEnd(parent)
  processor.onStart({ spanContext: () => ({ spanId: 'c2' }), parentSpanId: 'p', attributes: {}, setAttribute: (k: string, v: string) => { set.push([k, v]) } })
  t.equal(set.length, 1, 'an ended parent is forgotten')
  await processor.shutdown()
})
