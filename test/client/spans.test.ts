import './built-client.ts'
import t from 'tap'
import { AgentTelemetry, hasAsyncContext } from 'agent-telemetry-client'
import { accept, upstream } from './upstream.ts'

// trace() and span() in Node: ids, parents across awaits (AsyncLocalStorage), timing and outcome.

t.test('spans nest across awaits, time themselves and report failures', async (t) => {
  t.ok(hasAsyncContext, 'Node carries the active span across awaits')
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, agentId: 'a', onError: () => {} })
  const tick = () => new Promise((resolve) => setTimeout(resolve, 2))
  const result = await client.trace('plan', async () => {
    await tick()
    client.track({ type: 'decision', reasoning: 'inside' })
    await client.span('search', async (span) => {
      span.set({ model: 'gpt-4o', metadata: { tokensBreakdown: { output: 7 } } })
      await tick()
    }, { type: 'tool' })
    await t.rejects(client.span('charge', async () => { await tick(); throw new Error('card declined') }), /card declined/, 'the error is thrown on')
    return 42
  })
  t.equal(result, 42, 'trace() returns what its function returns')
  await client.shutdown()
  const sent = up.got.flatMap((g) => g.events)
  const byName = (name: string) => sent.find((e) => e.metadata.spanName === name)!
  const root = byName('plan')
  const search = byName('search')
  const charge = byName('charge')
  const inside = sent.find((e) => e.reasoning === 'inside')!
  t.match(root, { type: 'action', outcome: 'success', metadata: { traceId: /^[0-9a-f]{32}$/, spanId: /^[0-9a-f]{16}$/ } })
  t.notOk('parentSpanId' in root.metadata, 'the root has no parent')
  t.ok(Number(root.durationMs) >= 2, 'timed')
  t.match(search, { type: 'tool', toolExecuted: 'search', model: 'gpt-4o', outcome: 'success', metadata: { parentSpanId: root.metadata.spanId, traceId: root.metadata.traceId, tokensBreakdown: { output: 7 } } })
  t.match(charge, { outcome: 'failed', errorMessage: 'Error: card declined', metadata: { parentSpanId: root.metadata.spanId } })
  t.match(inside, { metadata: { traceId: root.metadata.traceId, parentSpanId: root.metadata.spanId } }, 'track() inside a span joins it')
  t.equal(typeof root.timestamp, 'number')
})

t.test('an explicit parent, and startSpan() for code that cannot be wrapped', async (t) => {
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, agentId: 'a', onError: () => {} })
  const root = client.startSpan('request')
  const child = client.startSpan('db', { type: 'tool' }, root)
  child.track({ reasoning: 'query planned' })
  child.end({ outcome: 'failed', errorMessage: 'timeout' })
  child.end()
  root.end()
  await client.shutdown()
  const sent = up.got.flatMap((g) => g.events)
  t.equal(sent.length, 3, 'end() tracks once')
  t.match(sent.find((e) => e.metadata.spanName === 'db'), { outcome: 'failed', errorMessage: 'timeout', metadata: { traceId: root.traceId, parentSpanId: root.spanId } })
  t.match(sent.find((e) => e.reasoning === 'query planned'), { metadata: { traceId: root.traceId, parentSpanId: child.spanId } })
})

t.test('minimal: a span name loses its paths and personal data, as a tool name does', async (t) => {
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, agentId: 'a', privacyLevel: 'minimal', onError: () => {} })
  await client.trace('summarise /home/bob/medical-records.pdf for jane@example.com', async () => {
    await client.span('cat /home/bob/secret.txt', async () => {}, { type: 'tool' })
  })
  await client.shutdown()
  const sent = up.got.flatMap((g) => g.events)
  t.same(sent.map((e) => e.metadata.spanName).sort(), ['cat [redacted:path]', 'summarise [redacted:path] for [redacted:email]'])
  t.notMatch(JSON.stringify(sent), /home\/bob|jane@example/, 'nothing of either is sent')
})

t.test('an event naming a privacy level that is not one is refused, not sent at the client\'s level', async (t) => {
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const errors: unknown[] = []
  const client = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: up.baseUrl, agentId: 'a', onError: (e) => { errors.push(e) } })
  for (const privacyLevel of ['MINIMAL', 'none', 5, null]) {
    t.equal(client.track({ type: 'decision', input: { prompt: 'the prompt' }, metadata: { privacyLevel: privacyLevel as never, cwd: '/home/x' } }), false, `privacyLevel ${JSON.stringify(privacyLevel)}`)
  }
  t.equal(errors.length, 4, 'each refusal is told')
  t.match(errors[0], { message: /privacyLevel/ })
  t.ok(client.track({ type: 'decision', input: { prompt: 'kept out' }, metadata: { privacyLevel: 'minimal' } }), 'a level spelt right is taken')
  await client.shutdown()
  const sent = up.got.flatMap((g) => g.events)
  t.equal(sent.length, 1)
  t.notOk('input' in sent[0]!, 'and applied')
})
