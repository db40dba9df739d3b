import './built-client.ts'
import t from 'tap'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { accept, upstream } from './upstream.ts'

// No timer of the client keeps a Node process alive (serverless functions and CLIs end when their
// work ends), and flush() keeps it alive until its events are delivered, retries included.

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

function runScript (source: string, type: 'module' | 'commonjs' = 'module'): Promise<{ code: number | null; stdout: string }> {
  const child = spawn(process.execPath, [`--input-type=${type}`, '-e', source], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
  let stdout = ''
  child.stdout.on('data', (c: Buffer) => { stdout += c })
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout })))
}

t.test('a process that tracks and ends without flush() exits at once: the interval timer is unref\'d', async (t) => {
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const { code } = await runScript(`
    import { AgentTelemetry } from 'agent-telemetry-client'
    const telemetry = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: '${up.baseUrl}', agentId: 'a', flushIntervalMs: 600000 })
    telemetry.track({ reasoning: 'never flushed' })
  `)
  t.equal(code, 0, 'exited (with a 10-minute interval timer pending)')
  t.equal(up.got.length, 0, 'and the event was lost: this is why serverless code awaits flush()')
})

t.test('events still queued when the process exits are counted and reported as exit, not lost without a word', async (t) => {
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const { code, stdout } = await runScript(`
    import { AgentTelemetry } from 'agent-telemetry-client'
    const telemetry = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: '${up.baseUrl}', agentId: 'a', flushIntervalMs: 600000,
      onError: (e) => console.log(JSON.stringify({ reason: e.reason, count: e.count, message: e.message })) })
    // A second client in the same process, with nothing queued: it says nothing.
    new AgentTelemetry({ apiKey: 'vk_test', baseUrl: '${up.baseUrl}', agentId: 'b', onError: (e) => console.log('second', e.reason) })
    telemetry.track({ reasoning: 'one' })
    telemetry.track({ reasoning: 'two' })
  `)
  t.equal(code, 0)
  t.equal(up.got.length, 0)
  t.same(stdout.trim().split('\n').map((l) => JSON.parse(l)), [{ reason: 'exit', count: 2, message: '2 events were still queued or unanswered when the process exited: await flush() or shutdown() before it ends' }])
})

t.test('flush(timeoutMs) resolves false at its timeout while the service does not answer; true when all is sent', async (t) => {
  // The first request is never answered (the client's own timeout ends it); its retry is accepted.
  const up = await upstream(t, (_req, res, g, n) => { if (n > 1) accept(res, g) })
  const { code, stdout } = await runScript(`
    import { AgentTelemetry } from 'agent-telemetry-client'
    const telemetry = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: '${up.baseUrl}', agentId: 'a', requestTimeoutMs: 1500, onError: () => {} })
    telemetry.track({ reasoning: 'stalled' })
    const started = Date.now()
    const settled = await telemetry.flush(300)
    console.log(JSON.stringify({ settled, waitedMs: Date.now() - started, queued: telemetry.stats().queued + telemetry.stats().inFlight }))
    console.log(JSON.stringify({ settled: await telemetry.flush(), stats: telemetry.stats() }))
  `)
  t.equal(code, 0)
  const [first, second] = stdout.trim().split('\n').map((l) => JSON.parse(l))
  t.match(first, { settled: false, queued: 1 }, 'the event is still under way, not dropped')
  t.ok(first.waitedMs >= 250 && first.waitedMs < 1400, `flush gave up at its timeout, before the request's own (${first.waitedMs} ms)`)
  t.match(second, { settled: true, stats: { sent: 1, dropped: { shutdown: 0, exit: 0 } } }, 'a flush without a timeout waits for the retry that lands')
  t.equal(up.got.length, 2, 'the stalled request and its retry')
})

t.test('await flush() keeps the process alive through a retry and its Retry-After', async (t) => {
  const up = await upstream(t, (_req, res, g, n) => {
    if (n === 1) res.writeHead(503, { 'retry-after': '1' }).end()
    else accept(res, g)
  })
  const { code, stdout } = await runScript(`
    import { AgentTelemetry } from 'agent-telemetry-client'
    const telemetry = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: '${up.baseUrl}', agentId: 'a', onError: () => {} })
    telemetry.track({ reasoning: 'flushed' })
    await telemetry.flush()
    console.log(JSON.stringify(telemetry.stats()))
  `)
  t.equal(code, 0)
  t.equal(up.got.length, 2, 'sent, refused with 503, sent again')
  t.match(JSON.parse(stdout), { sent: 1, retries: 1 })
})

t.test('CommonJS code can require() the package', async (t) => {
  const up = await upstream(t, (_req, res, g) => accept(res, g))
  const { code, stdout } = await runScript(`
    const { AgentTelemetry } = require('agent-telemetry-client')
    const telemetry = new AgentTelemetry({ apiKey: 'vk_test', baseUrl: '${up.baseUrl}', agentId: 'a' })
    telemetry.track({ reasoning: 'from commonjs' })
    telemetry.shutdown().then(() => console.log(JSON.stringify(telemetry.stats())))
  `, 'commonjs')
  t.equal(code, 0)
  t.match(JSON.parse(stdout), { sent: 1 })
  t.equal(up.got[0]?.events[0]?.reasoning, 'from commonjs')
})
