/**
 * OTLP ingestion benchmark: npm run bench:otlp [-- --duration 10 --connections 8]
 * The service runs in its own process; autocannon runs here. From one run, printed side by side:
 * (t) POST /v1/traces, protobuf, 512 spans a request (the SDK's BatchSpanProcessor default batch),
 * spans made by the OpenTelemetry JS SDK: GenAI chat and tool spans with model, tokens and agent,
 * new trace ids in every request; (r) the same export sent again and again (a re-send, answered
 * without storing anything);
 * (e) the same calls as events through POST /v1/events/batch, 500 a request (its maximum);
 * and the microseconds per event of each pipeline step during each run (GET /health).
 * Each run starts once the backlog of the one before is in ClickHouse, and its CPU is given twice:
 * during the run, and until its own backlog is shipped (what its events cost the engine's inserts,
 * which a fast run defers past its end).
 */
import autocannon from 'autocannon'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir, cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { context, trace } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer'
import { loadLocalSigningKey, signLocalToken } from '../src/auth/local-signing-key.ts'
import { withDefaultUser } from '../src/storage/postgres.ts'
import { benchArgs, byThread, cpuByThread, deleteRedisKeys, freePort, serviceArgs, totalCpu, untilShipped, waitForUp } from './bench-support.ts'

const { values } = parseArgs({ args: benchArgs(), options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '8' } } })
const duration = Number(values.duration)
const connections = Number(values.connections)
const root = fileURLToPath(new URL('..', import.meta.url))
const dataDir = mkdtempSync(join(tmpdir(), 'agent-telemetry-otlp-bench-'))
const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://localhost:5432/agent_telemetry_bench'
const SPANS = 512
/** The start of each chat span's gen_ai.response.id, found in the body to give every request new ones. */
const RESPONSE_ID = 'msg_bench'
const EVENTS = 500

let service: ChildProcess | undefined

/**
 * 512 spans as an agent instrumented with the SDK exports them: per turn an agent span, a chat span
 * and a tool span. With where each trace id lies in the body, so that a request can be given new ones.
 */
function otlpBody (): { body: Buffer; traceIdsAt: number[]; responseIdsAt: number[] } {
  const memory = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'bench-service' }), spanProcessors: [new SimpleSpanProcessor(memory)] })
  const tracer = provider.getTracer('bench', '1.0.0')
  for (let i = 0; memory.getFinishedSpans().length < SPANS; i++) {
    const agent = `bench-agent-${i % 8}`
    const root = tracer.startSpan('invoke_agent', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': agent, 'gen_ai.conversation.id': 'bench-session' } })
    const ctx = trace.setSpan(context.active(), root)
    tracer.startSpan('chat claude-sonnet-4-5', {
      attributes: {
        'gen_ai.operation.name': 'chat', 'gen_ai.agent.name': agent, 'gen_ai.provider.name': 'anthropic', 'gen_ai.request.model': 'claude-sonnet-4-5',
        'gen_ai.response.model': 'claude-sonnet-4-5-20250929', 'gen_ai.usage.input_tokens': 2000, 'gen_ai.usage.cache_read.input_tokens': 800,
        'gen_ai.usage.output_tokens': 300, 'gen_ai.conversation.id': 'bench-session',
        // As a provider answers: an id per response (its last 16 characters rewritten per request).
        'gen_ai.response.id': `${RESPONSE_ID}${String(i).padStart(6, '0')}${'0'.repeat(16)}`,
      },
    }, ctx).end()
    tracer.startSpan('execute_tool search', { attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.agent.name': agent, 'gen_ai.tool.name': 'search' } }, ctx).end()
    root.end()
  }
  const spans = memory.getFinishedSpans().slice(0, SPANS)
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!)
  const traceIdsAt: number[] = []
  for (const traceId of new Set(spans.map((s) => s.spanContext().traceId))) {
    const bytes = Buffer.from(traceId, 'hex')
    for (let at = body.indexOf(bytes); at !== -1; at = body.indexOf(bytes, at + bytes.length)) traceIdsAt.push(at)
  }
  const responseIdsAt: number[] = []
  for (let at = body.indexOf(RESPONSE_ID); at !== -1; at = body.indexOf(RESPONSE_ID, at + 1)) responseIdsAt.push(at + RESPONSE_ID.length + 6)
  return { body, traceIdsAt, responseIdsAt }
}

/**
 * (t)'s requests: the export with new trace ids (the first 8 bytes of each, a counter) and new
 * response ids (the same counter), so that every span is a new one, as from an agent that keeps working; the same body would be a re-send, which
 * the service answers without storing it.
 */
function withNewTraceIds (traces: { body: Buffer; traceIdsAt: number[]; responseIdsAt: number[] }): (request: autocannon.Request) => autocannon.Request {
  let sent = 0n
  return (request) => {
    const body = Buffer.from(traces.body)
    sent++
    for (const at of traces.traceIdsAt) body.writeBigUInt64BE(sent, at)
    const id = sent.toString(16).padStart(16, '0')
    for (const at of traces.responseIdsAt) body.write(id, at, 'latin1')
    return { ...request, body }
  }
}

/** The same kinds of calls as /v1/events events. */
const event = (i: number) => i % 3 === 1
  ? { agentId: `bench-agent-${i % 8}`, type: 'reasoning', model: 'claude-sonnet-4-5-20250929', durationMs: 900, metadata: { sessionId: 'bench-session', traceId: 'bench-trace', spanId: `s${i}`, parentSpanId: `s${i - 1}`, provider: 'anthropic', tokensBreakdown: { inputBase: 1200, cacheRead: 800, output: 300 } } }
  : { agentId: `bench-agent-${i % 8}`, type: i % 3 === 2 ? 'tool' : 'action', toolExecuted: i % 3 === 2 ? 'search' : undefined, durationMs: 120, metadata: { sessionId: 'bench-session', traceId: 'bench-trace', spanId: `s${i}` } }

type Steps = Record<string, { events: number; totalMs: number }>

const redisPrefix = `bench:${randomBytes(4).toString('hex')}:`

try {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  // BENCH_PROFILE=dir writes a CPU profile of the service (node --cpu-prof) into dir when it exits.
  service = spawn(process.execPath, serviceArgs(process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : []), {
    cwd: root,
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: databaseUrl, ROLES: 'api', REDIS_PREFIX: redisPrefix, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  await waitForUp(`${base}/health`)
  const db = new pg.Client({ connectionString: withDefaultUser(databaseUrl) })
  await db.connect()
  const subject = `bench-${randomBytes(4).toString('hex')}`
  const token = await signLocalToken(await loadLocalSigningKey(dataDir), subject)
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  await fetch(`${base}/v1/me`, { headers: auth })
  await db.query('UPDATE users SET tier = \'enterprise\', burst_per_minute = 1000000000 WHERE privy_id = $1', [subject])
  await db.end()
  const key = await (await fetch(`${base}/v1/me/keys`, { method: 'POST', headers: auth, body: JSON.stringify({ label: 'bench' }) })).json() as { secret: string }

  const traces = otlpBody()
  const batch = JSON.stringify({ events: Array.from({ length: EVENTS }, (_, i) => event(i)) })
  const health = async () => (await (await fetch(`${base}/health`)).json()) as { ingest: { backlogRows: number; steps: Steps } }
  const steps = async () => (await health()).ingest.steps
  const drained = () => untilShipped(base)

  const runs: { name: string; url: string; body: Buffer | string; type: string; perRequest: number; setupRequest?: (request: autocannon.Request) => autocannon.Request }[] = [
    { name: `(e) /v1/events/batch x${EVENTS} JSON`, url: `${base}/v1/events/batch`, body: batch, type: 'application/json', perRequest: EVENTS },
    { name: `(t) /v1/traces x${SPANS} protobuf`, url: `${base}/v1/traces`, body: traces.body, type: 'application/x-protobuf', perRequest: SPANS, setupRequest: withNewTraceIds(traces) },
    { name: '(r) the same export re-sent', url: `${base}/v1/traces`, body: traces.body, type: 'application/x-protobuf', perRequest: SPANS },
  ]
  const rows: string[] = []
  const stepRows = new Map<string, string[]>()
  const rates: number[] = []
  const cpuRows: { name: string; during: number; withDrain: number; backlog: number; threads: string }[] = []
  for (const run of runs) {
    const opts = {
      url: run.url, method: 'POST' as const, headers: { authorization: `Bearer ${key.secret}`, 'content-type': run.type }, body: run.body, connections, duration,
      ...(run.setupRequest ? { requests: [{ setupRequest: run.setupRequest }] } : {}),
    }
    await autocannon({ ...opts, duration: 2 }) // warm-up
    await drained() // the run before's (and the warm-up's) backlog is not this run's
    const before = await steps()
    const threadsBefore = cpuByThread(service.pid!)
    const r = await autocannon(opts)
    const cpu = totalCpu(cpuByThread(service.pid!)) - totalCpu(threadsBefore)
    const after = await steps()
    const events = r.requests.total * run.perRequest
    const backlog = (await health()).ingest.backlogRows
    await drained()
    const threadsDrained = cpuByThread(service.pid!)
    const withDrain = totalCpu(threadsDrained) - totalCpu(threadsBefore)
    cpuRows.push({ name: run.name, during: cpu / Math.max(1, events), withDrain: withDrain / Math.max(1, events), backlog, threads: byThread(threadsBefore, threadsDrained, events) })
    rates.push(r.requests.average * run.perRequest)
    rows.push(run.name.padEnd(34) + r.requests.average.toFixed(1).padStart(8) + (r.requests.average * run.perRequest).toFixed(0).padStart(12) +
      String(r.latency.p50).padStart(9) + String(r.latency.p99).padStart(9) + String(r.non2xx).padStart(9) + String(r.errors + r.timeouts).padStart(8) +
      (cpu / Math.max(1, events)).toFixed(1).padStart(14) + `  (${(run.body.length / run.perRequest).toFixed(0)} B/event)`)
    for (const [step, a] of Object.entries(after)) {
      const b = before[step]
      const n = a.events - (b?.events ?? 0)
      const us = n ? ((a.totalMs - (b?.totalMs ?? 0)) * 1000) / n : 0
      stepRows.set(step, [...stepRows.get(step) ?? [], `${us.toFixed(1).padStart(10)} µs`])
    }
  }
  console.log(`\nOTLP ingestion benchmark — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} — node ${process.version} — ${duration}s per run, ${connections} connections`)
  console.log('run'.padEnd(34) + 'req/s'.padStart(8) + 'events/s'.padStart(12) + 'p50 ms'.padStart(9) + 'p99 ms'.padStart(9) + 'non-2xx'.padStart(9) + 'errors'.padStart(8) + 'CPU µs/event'.padStart(14))
  for (const row of rows) console.log(row)
  console.log(`\n(t)/(e) = ${(rates[1]! / rates[0]! * 100).toFixed(1)} % (spans/s through OTLP against events/s through the batch endpoint)`)
  console.log('\nCPU µs per event, server process, all threads: during the run, and until its backlog was shipped')
  for (const c of cpuRows) {
    console.log(`${c.name.padEnd(34)}${c.during.toFixed(1).padStart(8)}${c.withDrain.toFixed(1).padStart(8)}  (backlog ${c.backlog} rows when it stopped)`)
    console.log(`    by thread, until shipped: ${c.threads}`)
  }
  const [e, t] = cpuRows
  if (e && t) {
    console.log(`CPU per span (t) over per event (e): ${(t.during / e.during).toFixed(2)} × during the runs, ${(t.withDrain / e.withDrain).toFixed(2)} × until shipped (target ≤ 1.2 ×)`)
  }
  console.log('µs per event per step (wall time, waits included):'.padEnd(52) + runs.map((r) => `during ${r.name.slice(0, 3)}`.padStart(14)).join(''))
  for (const [step, cells] of stepRows) console.log(`    ${step.padEnd(48)}${cells.map((c) => c.padStart(14)).join('')}`)
} finally {
  // The data directory goes once the service has stopped writing to it.
  if (service && service.exitCode === null && service.signalCode === null) {
    const exit = once(service, 'exit')
    service.kill('SIGTERM')
    await exit
  }
  rmSync(dataDir, { recursive: true, force: true })
  // The span memory holds a key per trace, a day each: some 100,000 of them a run.
  console.error(`cleaned up: ${await deleteRedisKeys(redisPrefix)} Redis keys under ${redisPrefix}, the data directory`)
}
