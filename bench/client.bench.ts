// The client's own cost: CPU per track() (against JSON.stringify of the same event, the least any
// hand-written loop pays, measured in the same run), the longest stall of the event loop while it
// sends, and its memory when the service stalls. Needs `npm run build` first; no service.
//   node --expose-gc --import tsx bench/client.bench.ts [--events 100000]
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { Worker } from 'node:worker_threads'
import { AgentTelemetry, type PrivacyLevel } from 'agent-telemetry-client'

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}
const N = arg('events', 100_000)
const gc = (globalThis as { gc?: () => void }).gc
if (!gc) console.error('run with node --expose-gc for the memory figures')

/** A fetch that never answers: the service stalled (no socket, so only the client's memory counts). */
const stalled: typeof fetch = () => new Promise(() => {})

const small = (i: number) => ({
  type: 'tool' as const, toolExecuted: 'web_search', model: 'gpt-4o', durationMs: 812, outcome: 'success' as const,
  reasoning: `looked up the invoice ${i} for the customer and found the total`,
  metadata: { sessionId: 's-1', traceId: 't-1', tokensBreakdown: { inputBase: 1200, output: 230 } },
})
const prompt = 'Summarise the following ticket. '.repeat(300) // ~10 KB of text
const large = (i: number) => ({ ...small(i), input: { prompt: `${prompt} customer bob${i}@example.com`, context: { ticket: i } } })

function timeNs (fn: (i: number) => void, n: number): number {
  for (let i = 0; i < Math.min(n, 2000); i++) fn(i) // warm-up
  const start = process.hrtime.bigint()
  for (let i = 0; i < n; i++) fn(i)
  return Number(process.hrtime.bigint() - start) / n
}

function perTrack (level: PrivacyLevel, make: (i: number) => object, n: number): number {
  const client = new AgentTelemetry({ apiKey: 'vk_bench', baseUrl: 'http://127.0.0.1:9', agentId: 'bench', privacyLevel: level, fetch: stalled, maxQueue: n + 5000, maxQueueBytes: 2 ** 31, flushAt: 500, onError: () => {} })
  return timeNs((i) => client.track(make(i)), n)
}

console.log(`# track() cost, ${N} events per row (${process.version}, ${process.arch})`)
console.log('event          level     ns/track  JSON.stringify ns  ratio')
for (const [name, make, n] of [['small (~350 B)', small, N], ['large (~10 KB)', large, Math.max(1000, N / 20)]] as const) {
  const baseline = timeNs((i) => JSON.stringify(make(i)), n)
  for (const level of ['full', 'standard', 'minimal'] as const) {
    const ns = perTrack(level, make, n)
    console.log(`${name.padEnd(15)}${level.padEnd(10)}${ns.toFixed(0).padStart(8)}  ${baseline.toFixed(0).padStart(17)}  ${(ns / baseline).toFixed(1).padStart(5)}×`)
  }
}

// Sending to a local upstream (in a worker thread, so its parsing is not on this event loop) that
// answers at once: events/s through the client, and this event loop's delay meanwhile, with the
// agent tracking 100 events per turn of the loop.
{
  const worker = new Worker(`
    const { createServer } = require('node:http')
    const { parentPort } = require('node:worker_threads')
    const server = createServer((req, res) => {
      let body = ''
      req.setEncoding('utf8')
      req.on('data', (c) => { body += c })
      req.on('end', () => {
        const events = JSON.parse(body).events
        const count = events.length
        const now = Date.now()
        requests++
        for (const e of events) waits.push(now - e.timestamp)
        res.writeHead(207, { 'content-type': 'application/json' }).end(JSON.stringify({ results: Array.from({ length: count }, (_, i) => ({ status: 202, eventId: 'evt_' + i })) }))
      })
    })
    let requests = 0
    let waits = []
    parentPort.on('message', () => {
      waits.sort((a, b) => a - b)
      parentPort.postMessage({ requests, events: waits.length, p50: waits[Math.floor(waits.length / 2)] ?? 0, p99: waits[Math.floor(waits.length * 0.99)] ?? 0, max: waits[waits.length - 1] ?? 0 })
      requests = 0
      waits = []
    })
    server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port))
  `, { eval: true })
  const port = await new Promise<number>((resolve) => worker.once('message', resolve))
  const client = new AgentTelemetry({ apiKey: 'vk_bench', baseUrl: `http://127.0.0.1:${port}`, agentId: 'bench', maxQueue: N + 1, maxQueueBytes: 2 ** 31, onError: () => {} })
  const delay = monitorEventLoopDelay({ resolution: 1 })
  delay.enable()
  const start = performance.now()
  for (let i = 0; i < N; i += 100) {
    for (let j = i; j < Math.min(N, i + 100); j++) client.track(small(j))
    await new Promise((resolve) => setImmediate(resolve))
  }
  await client.flush()
  const ms = performance.now() - start
  delay.disable()
  const stats = () => new Promise<{ requests: number; events: number; p50: number; p99: number; max: number }>((resolve) => { worker.once('message', resolve); worker.postMessage('stats') })
  await stats()
  // The defaults at steady rates, as agents track: requests per second, events per request, and how
  // long an event waited in the client (arrival at the upstream minus its track() time).
  const rates: string[] = []
  for (const rate of [10, 100, 1000, 10_000]) {
    const seconds = 3
    const steady = new AgentTelemetry({ apiKey: 'vk_bench', baseUrl: `http://127.0.0.1:${port}`, agentId: 'bench', onError: () => {} })
    const total = rate * seconds
    const begin = performance.now()
    for (let i = 0; i < total;) {
      // Every event whose time has come, then a sleep until the next one's.
      while (i < total && begin + i * 1000 / rate <= performance.now()) steady.track(small(i++))
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, begin + i * 1000 / rate - performance.now())))
    }
    await steady.flush()
    const r = await stats()
    rates.push(`${String(rate).padStart(6)}/s  ${(r.requests / seconds).toFixed(1).padStart(10)}  ${(r.events / Math.max(1, r.requests)).toFixed(0).padStart(14)}  ${String(r.p50).padStart(7)}  ${String(r.p99).padStart(7)}  ${String(r.max).padStart(7)}`)
  }
  await worker.terminate()
  console.log('\n# delivery to a local upstream that answers at once (default flushAt/flushIntervalMs), 100 events tracked per turn')
  console.log(`${client.stats().sent} events in ${ms.toFixed(0)} ms: ${(client.stats().sent / ms * 1000).toFixed(0)} events/s; event loop delay p50 ${(delay.percentile(50) / 1e6).toFixed(1)} ms, p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms, max ${(delay.max / 1e6).toFixed(1)} ms`)
  console.log('\n# the defaults (flushAt 100, flushIntervalMs 1000) at steady rates, 3 s each')
  console.log('  tracked  requests/s  events/request  wait p50  wait p99  wait max (ms, track() to arrival)')
  for (const row of rates) console.log(row)
}

// Memory under a stalled service: the queue is bounded, so the heap stops growing at maxQueue.
function heapMb (): number {
  gc?.()
  gc?.()
  return process.memoryUsage().heapUsed / 2 ** 20
}
console.log('\n# memory with the service stalled (a request that never answers), small events')
console.log('maxQueue  tracked   queued   dropped(queue_full)  heap growth MB  queued JSON MB  ratio')
for (const maxQueue of [10_000, 100_000]) {
  const before = heapMb()
  const client = new AgentTelemetry({ apiKey: 'vk_bench', baseUrl: 'http://127.0.0.1:9', agentId: 'bench', fetch: stalled, maxQueue, maxQueueBytes: 2 ** 31, onError: () => {} })
  const tracked = maxQueue * 5
  for (let i = 0; i < tracked; i++) client.track(small(i))
  await new Promise((resolve) => setTimeout(resolve, 50))
  const growth = heapMb() - before
  const s = client.stats()
  const queuedMb = (s.queued + s.inFlight) * JSON.stringify(small(0)).length / 2 ** 20
  console.log(`${String(maxQueue).padStart(8)}  ${String(tracked).padStart(7)}  ${String(s.queued + s.inFlight).padStart(7)}  ${String(s.dropped.queue_full).padStart(19)}  ${growth.toFixed(1).padStart(14)}  ${queuedMb.toFixed(1).padStart(14)}  ${(growth / queuedMb).toFixed(1).padStart(5)}×`)
  await client.shutdown(1)
}
