import './built-client.ts'
import t from 'tap'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AgentTelemetry, applyPrivacy, scrubText, type TelemetryError } from 'agent-telemetry-client'

// What an agent developer embedding the client ran into: each case here failed before its fix.

const KEY = 'vk_live_embedding_0123456789'

/** A service that answers every batch with one result per item, of `status`; it records what it was sent. */
async function upstream (status = 202): Promise<{ server: Server; url: string; events: Record<string, any>[] }> {
  const events: Record<string, any>[] = []
  const server = createServer((req: IncomingMessage, res) => {
    let body = ''
    req.on('data', (c) => { body += c })
    req.on('end', () => {
      const items = (JSON.parse(body).events ?? JSON.parse(body).scores) as Record<string, any>[]
      events.push(...items)
      res.writeHead(207, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ results: items.map(() => (status < 300 ? { status, id: 'evt_x', accepted: true } : { status, error: 'payload_too_large', message: 'too big' })) }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, events }
}

t.test('an event over maxItemBytes is dropped at the call, before its text is scrubbed', async (t) => {
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: 'http://127.0.0.1:9', agentId: 'a', onError: (e) => errors.push(e) })
  // 3 MB dense with what the scrubbers replace: scrubbed in full, it took over a second.
  const prompt = 'mail jane.doe@example.com card 4111 1111 1111 1111 '.repeat(60_000)
  t.notOk(client.track({ type: 'action', input: { prompt } }))
  t.equal(client.stats().dropped.too_large, 1)
  t.match(errors[0]!.message, /over maxItemBytes \(1048576/)
  t.equal(client.stats().redactions, 0, 'nothing was scrubbed: dropped before')
  // At minimal the prompt is removed, so a large one is no reason to drop the event.
  t.ok(client.track({ type: 'action', input: { prompt }, metadata: { privacyLevel: 'minimal' } }), 'kept at minimal')
  await client.shutdown(10)
})

t.test('shutdown() with no usable limit waits as flush() does instead of dropping everything', async (t) => {
  const { server, url, events } = await upstream()
  t.teardown(() => server.close())
  for (const timeout of [Infinity, Number.NaN, 2 ** 31, 1e10]) {
    const client = new AgentTelemetry({ apiKey: KEY, baseUrl: url, agentId: 'a', onError: () => {} })
    for (let i = 0; i < 20; i++) client.track({ type: 'action', metadata: { n: i } })
    await client.shutdown(timeout)
    t.equal(client.stats().sent, 20, `shutdown(${timeout}) sent all`)
    t.equal(client.stats().dropped.shutdown, 0)
  }
  t.equal(events.length, 80)
  // A negative limit is time already up: what is left is given up at once, not waited on.
  const late = new AgentTelemetry({ apiKey: KEY, baseUrl: 'http://127.0.0.1:9', agentId: 'a', onError: () => {} })
  late.track({ type: 'action' })
  await late.shutdown(-500)
  t.equal(late.stats().dropped.shutdown + late.stats().dropped.retries_exhausted, 1, 'given up, not waited on without a limit')
})

t.test('span methods given null never throw into the agent\'s code', async (t) => {
  const errors: TelemetryError[] = []
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: 'http://127.0.0.1:9', agentId: 'a', onError: (e) => errors.push(e) })
  const span = client.startSpan('x', null as never)
  t.doesNotThrow(() => span.track(null as never))
  t.doesNotThrow(() => span.track(undefined as never))
  t.doesNotThrow(() => span.end(null))
  t.equal(client.stats().dropped.invalid, 2, 'the two non-events are dropped and told')
  t.equal(client.stats().queued, 1, 'the span itself is queued')
  await client.shutdown(10)
})

t.test('a tool span\'s long name is cut to 200 code points, never inside a surrogate pair', async (t) => {
  const { server, url, events } = await upstream()
  t.teardown(() => server.close())
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: url, agentId: 'a', privacyLevel: 'full', onError: () => {} })
  t.equal(client.trace('a' + '😀'.repeat(150), () => 1, { type: 'tool' }), 1)
  t.equal(client.trace('b' + '😀'.repeat(250), () => 2, { type: 'tool' }), 2)
  await client.shutdown()
  t.equal(client.stats().dropped.invalid, 0)
  t.equal(events[0]!.toolExecuted, 'a' + '😀'.repeat(150), '151 code points: whole')
  t.equal(events[1]!.toolExecuted, 'b' + '😀'.repeat(199), 'cut to 200 code points')
})

t.test('a span\'s session reaches its children and the events tracked in them', async (t) => {
  const { server, url, events } = await upstream()
  t.teardown(() => server.close())
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: url, agentId: 'a', onError: () => {} })
  await client.trace('run', async (root) => {
    root.set({ metadata: { sessionId: 'conv-1' } })
    await client.span('step', async (step) => {
      step.track({ type: 'decision' })
      client.track({ type: 'action' })
    })
    root.track({ type: 'action', metadata: { sessionId: 'other' } })
  })
  await client.shutdown()
  t.equal(events.length, 5)
  t.same(events.map((e) => e.metadata.sessionId), ['conv-1', 'conv-1', 'conv-1', 'other', 'conv-1'], 'inherited unless an event names its own')
})

t.test('an agentId with NUL is refused at the call; a 413 in the answer is too_large', async (t) => {
  const { server, url } = await upstream(413)
  t.teardown(() => server.close())
  const client = new AgentTelemetry({ apiKey: KEY, baseUrl: url, agentId: 'a', onError: () => {} })
  t.notOk(client.track({ type: 'action', agentId: 'a\u0000b' }))
  t.equal(client.stats().dropped.invalid, 1)
  client.track({ type: 'action' })
  await client.shutdown()
  t.equal(client.stats().dropped.too_large, 1, 'refused by the service as too large')
  t.equal(client.stats().dropped.rejected, 0)
})

t.test('minimal sends no path or address in a model, transaction, token or provider', async (t) => {
  const e: Record<string, any> = {
    agentId: 'a', type: 'tx', model: '/home/bob/models/llama-jane.gguf', transaction: 'cp /home/bob/.ssh/id_rsa for jane@example.com',
    amount: { value: 1, token: 'jane@example.com' }, metadata: { provider: 'C:\\models\\local', dedupKey: 'k-1' },
  }
  applyPrivacy(e, 'minimal')
  t.equal(e.model, 'llama-jane.gguf', 'a local model keeps its file name')
  t.equal(e.transaction, 'cp [redacted:path] for [redacted:email]')
  t.equal(e.amount.token, '[redacted:email]')
  t.equal(e.metadata.provider, '[redacted:path]')
  t.equal(e.metadata.dedupKey, 'k-1', 'an id goes as it is')
  const plain: Record<string, any> = { agentId: 'a', model: 'meta-llama/Llama-3.1-8B-Instruct', metadata: { provider: 'openai' } }
  applyPrivacy(plain, 'minimal')
  t.same([plain.model, plain.metadata.provider], ['meta-llama/Llama-3.1-8B-Instruct', 'openai'], 'model names are not paths')
})

t.test('standard: ids that pass Luhn by chance stay; cards stay redacted', async (t) => {
  t.equal(scrubText('run r2-1795970456749 done'), 'run r2-1795970456749 done', 'epoch milliseconds')
  t.equal(scrubText('thread 1712346270.100112 x'), 'thread 1712346270.100112 x', 'a Slack timestamp')
  t.equal(scrubText('id 1000000000000000009 end'), 'id 1000000000000000009 end', 'a 19-digit id starting with 1')
  t.equal(scrubText('card 4111 1111 1111 1111 ok'), 'card [redacted:card_number] ok')
  t.equal(scrubText('mc 2221000000000009 ok'), 'mc [redacted:card_number] ok', 'Mastercard 2-series')
  t.equal(scrubText('amex 378282246310005 ok'), 'amex [redacted:card_number] ok')
})

t.test('text of many private key headers and no end is read in linear time', async (t) => {
  const line = '-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n'
  const text = line.repeat(Math.ceil(400_000 / line.length))
  const started = process.cpuUsage()
  t.equal(scrubText(text), text, 'no key without its end')
  const used = process.cpuUsage(started)
  // CPU time, not wall time (load does not inflate it much): a guard against the quadratic form,
  // which took 1.7 s here, not a speed target.
  t.ok(used.user + used.system < 1_000_000, `${Math.round((used.user + used.system) / 1000)} ms of CPU for 400 KB`)
  t.equal(scrubText('x -----BEGIN PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,AB\n\nMIIE\n-----END PRIVATE KEY----- y'), 'x [redacted:private_key] y')
})
