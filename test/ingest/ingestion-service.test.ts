import t from 'tap'
import pino from 'pino'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import type { IncomingEvent } from '../../src/domain/event-row.ts'
import { HttpError } from '../../src/http-error.ts'
import { AgentResolver } from '../../src/cache/agent-resolver.ts'
import type { IngestLog } from '../../src/ingest/log/ingest-log.ts'
import { MemoryIngestLog } from '../helpers/memory-ingest-log.ts'
import { EventShipper } from '../../src/ingest/shipper.ts'
import { IngestionService, type IngestCaller } from '../../src/ingest/ingestion-service.ts'
import { passAll, PipelineRunner, type Outcome, type Step, type Verdict } from '../../src/ingest/pipeline.ts'
import type { IngestStep } from '../../src/ingest/steps.ts'
import { buildTestApp, newUser, randomId } from '../helpers/app.ts'

/** Collects what the runner reports as stalled. */
function stallLog () {
  const warnings: { details: Record<string, unknown>; message: string }[] = []
  return { warnings, warn: (details: object, message: string) => { warnings.push({ details: details as Record<string, unknown>, message }) } }
}

const refused = (code: string): Verdict<string> => ({ kind: 'refused', error: new HttpError(400, code) })

/** A step that refuses the items `refuse` picks, handing on the others, and remembers what it was given. */
function refusing (name: IngestStep, refuse: (item: string) => string | null, seen: string[][]): Step<null, string, string> {
  return {
    name,
    run: (_context, items) => {
      seen.push([...items])
      return items.map((item) => {
        const code = refuse(item)
        return code === null ? undefined : refused(code)
      })
    },
  }
}

const acceptAll: Step<null, string, string> = {
  name: 'log',
  run: async (_context, items) => items.map((item): Verdict<string> => ({ kind: 'accepted', ack: `ack:${item}` })),
}

t.test('runner: each step sees only the items still alive; every item gets its outcome, in order', async (t) => {
  const runner = new PipelineRunner(stallLog())
  const seen: string[][] = []
  const steps = [
    refusing('schema', (item) => (item.startsWith('bad') ? 'invalid' : null), seen),
    refusing('resolve', (item) => (item === 'gone' ? 'deleted' : null), seen),
    acceptAll,
  ]
  const outcomes = await runner.run(steps, null, ['a', 'bad1', 'gone', 'b', 'bad2'])
  t.same(seen, [['a', 'bad1', 'gone', 'b', 'bad2'], ['a', 'gone', 'b']])
  t.same(outcomes.map((o) => (o.kind === 'accepted' ? o.ack : o.error.code)), ['ack:a', 'invalid', 'deleted', 'ack:b', 'invalid'])
  const timings = runner.timings.snapshot()
  t.match(timings.schema, { calls: 1, events: 5 })
  t.match(timings.resolve, { calls: 1, events: 3 })
  t.match(timings.log, { calls: 1, events: 2 })
  t.match(timings.burst, { calls: 0, events: 0 }, 'a step not in the list is not counted')
})

t.test('runner: once every item has its outcome, the later steps do not run', async (t) => {
  const runner = new PipelineRunner(stallLog())
  const seen: string[][] = []
  const outcomes = await runner.run([refusing('schema', () => 'invalid', seen), acceptAll], null, ['a', 'b'])
  t.same(outcomes.map((o) => o.kind), ['refused', 'refused'])
  t.equal(runner.timings.snapshot().log.calls, 0)
})

t.test('runner: a step that throws fails the whole run with its error, timed, and no later step runs', async (t) => {
  const runner = new PipelineRunner(stallLog())
  const failure = Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' })
  const throwing: Step<null, string, string> = { name: 'resolve', run: async () => { throw failure } }
  const after: string[][] = []
  await t.rejects(runner.run([throwing, refusing('row', () => null, after), acceptAll], null, ['a']), failure)
  t.same(after, [])
  t.match(runner.timings.snapshot().resolve, { calls: 1, events: 1 })
  t.equal(runner.timings.snapshot().log.calls, 0)
})

t.test('runner: a step answering a verdict count other than its items is a bug, not an outcome', async (t) => {
  const runner = new PipelineRunner(stallLog())
  const short: Step<null, string, string> = { name: 'schema', run: () => [] }
  await t.rejects(runner.run([short, acceptAll], null, ['a']), /step schema answered 0 verdicts for 1 items/)
})

t.test('runner: items that pass every step without an outcome are a bug', async (t) => {
  const runner = new PipelineRunner(stallLog())
  const pass: Step<null, string, string> = { name: 'schema', run: (_c, items) => passAll(items) }
  await t.rejects(runner.run([pass], null, ['a']), /1 items passed every step without an outcome/)
})

t.test('runner: a step slower than the stall threshold is logged with its name; a fast one is not', async (t) => {
  const log = stallLog()
  const runner = new PipelineRunner(log, 10)
  const slow: Step<null, string, string> = {
    name: 'log',
    run: async (_c, items) => {
      await sleep(30)
      return items.map((item): Verdict<string> => ({ kind: 'accepted', ack: item }))
    },
  }
  await runner.run([refusing('schema', () => null, []), slow], null, ['a', 'b'])
  t.equal(log.warnings.length, 1, 'only the slow step')
  t.match(log.warnings[0], { details: { step: 'log', events: 2 }, message: 'ingest step log stalled' })
  t.ok((log.warnings[0]!.details.ms as number) >= 10)
})

t.test('runner: build and hook time the steps before the items exist (decode, key)', async (t) => {
  const runner = new PipelineRunner(stallLog())
  t.same(runner.build('decode', () => [1, 2, 3], (built) => built.length), [1, 2, 3])
  t.throws(() => runner.build('decode', () => { throw new Error('not protobuf') }, () => 1), /not protobuf/)
  t.match(runner.timings.snapshot().decode, { calls: 2, events: 3 })

  const hook = runner.hook('key', async (request: { ok: boolean }) => {
    if (!request.ok) throw new HttpError(401, 'unauthorized')
  })
  const results = await Promise.all([true, false].map((ok) => new Promise<Error | undefined>((resolve) => hook({ ok }, null, resolve))))
  t.equal(results[0], undefined)
  t.match(results[1], { statusCode: 401 })
  t.match(runner.timings.snapshot().key, { calls: 2, events: 2 })
})

// The service over the real stores: Postgres and Redis through a test app, and an in-memory ingest
// log of its own, which the service appends to (no shipper runs for it).
const app = await buildTestApp(t)

/** A log of its own; `maxBytes` small enough refuses every append (503 ingest_log_full). */
function openLog (maxBytes = 1 << 24): IngestLog {
  return new MemoryIngestLog(maxBytes)
}

function service (app: FastifyInstance, log: IngestLog, stalls = stallLog(), stallMs?: number): IngestionService {
  return new IngestionService({
    agents: new AgentResolver(app.agents, { ...app.sharedCacheBase, localTtlMs: 1000, sharedTtlSeconds: 60 }),
    ingestLog: log,
    shipper: new EventShipper(log, (body, token) => app.events.insertBlock(body, token), { maxRows: 1000, maxBytes: 1 << 24, minIntervalMs: 0 }, pino({ level: 'silent' })),
    limiter: app.rateLimiter,
    activity: app.activity,
    pipeline: new PipelineRunner(stalls, stallMs),
  })
}

async function callerWithBurst (burst: number): Promise<IngestCaller> {
  const user = await newUser(app, { tier: 'free', burst })
  return { userId: user.id, tier: 'free', burstPerMinute: burst, agentId: null, source: { kind: 'dashboard_test' } }
}

const event = (agentId: string, extra: Record<string, unknown> = {}) => ({ agentId, type: 'decision', outcome: 'success', ...extra })

t.test('service: a batch answers per event; refused and rate-limited events do not stop the others', async (t) => {
  const log = openLog()
  const ingestion = service(app, log)
  const caller = await callerWithBurst(3)
  const agent = randomId('agent-')
  const events = [event(agent), event(agent, { type: 'nonsense' }), event(agent), { type: 'decision' }, event(agent), event(agent), event(agent)]
  const { results, retryAfter } = await ingestion.ingestBatch(caller, events)
  t.same(results.map((r) => r.status), [202, 400, 202, 400, 202, 429, 429], 'invalid events do not spend the burst limit')
  t.match(results[1], { error: 'validation_failed', details: [{ path: ['type'] }] })
  t.match(results[1], { message: 'the body is not valid' }, 'a batch\'s event is refused with the body it would get alone')
  t.match(results[3], { error: 'validation_failed', details: [{ path: ['agentId'] }] })
  t.match(results[5], { error: 'rate_limited' })
  t.match(retryAfter, /^[1-9][0-9]*$/)
  const accepted = results.filter((r) => r.status === 202) as { eventId: string; agentId: string }[]
  t.equal(new Set(accepted.map((a) => a.eventId)).size, 3)
  t.equal(new Set(accepted.map((a) => a.agentId)).size, 1, 'one agent, resolved for every event naming it')
  t.equal(log.stats().rows, 3, 'only the accepted events are in the log')
  t.match(ingestion.pipeline.timings.snapshot(), {
    schema: { calls: 1, events: 7 }, burst: { events: 5 }, resolve: { events: 3 }, row: { events: 3 }, log: { calls: 1, events: 3 },
  })
})

t.test('service: a single event refused by the schema throws its refusal, naming the body', async (t) => {
  const ingestion = service(app, openLog())
  const caller = await callerWithBurst(100)
  const refusal = await ingestion.ingestOne(caller, event(randomId('agent-'), { type: 'nonsense' })).catch((err: unknown) => err)
  t.type(refusal, HttpError)
  t.match((refusal as HttpError).body(), { error: 'validation_failed', message: 'the body is not valid', details: [{ path: ['type'] }] })
  const ack = await ingestion.ingestOne(caller, event(randomId('agent-')))
  t.match(ack, { accepted: true, eventId: /^evt_/ })
  t.same(Object.keys(ack), ['id', 'accepted', 'agentId', 'eventId'], 'the acknowledgement as the spec orders it')
})

t.test('service: an event over the burst limit alone is refused with 429 and Retry-After', async (t) => {
  const ingestion = service(app, openLog())
  const caller = await callerWithBurst(1)
  await ingestion.ingestOne(caller, event(randomId('agent-')))
  const refusal = await ingestion.ingestOne(caller, event(randomId('agent-'))).catch((err: unknown) => err)
  t.match(refusal, { statusCode: 429, code: 'rate_limited', headers: { 'retry-after': /^[1-9][0-9]*$/ } })
})

t.test('service: OTLP spans get one outcome each, a refused one among accepted ones', async (t) => {
  const log = openLog()
  const ingestion = service(app, log)
  const caller = await callerWithBurst(100)
  const agent = randomId('agent-')
  const spans = [event(agent), event(agent, { outcome: 'maybe' }), event(agent)] as IncomingEvent[]
  const outcomes: Outcome<unknown>[] = await ingestion.ingestSpans(caller, spans)
  t.same(outcomes.map((o) => o.kind), ['accepted', 'refused', 'accepted'])
  t.equal(log.stats().rows, 2)
})

t.test('service: a log that refuses the append fails the whole request with its refusal (503 ingest_log_full)', async (t) => {
  const log = openLog(1)
  const ingestion = service(app, log)
  const caller = await callerWithBurst(100)
  await t.rejects(ingestion.ingestBatch(caller, [event(randomId('agent-')), event(randomId('agent-'))]), { name: 'IngestLogRefused', reason: 'ingest_log_full', retryAfterSeconds: 5 })
  await t.rejects(ingestion.ingestOne(caller, event(randomId('agent-'))), { name: 'IngestLogRefused', reason: 'ingest_log_full' })
  t.match(ingestion.pipeline.timings.snapshot().log, { calls: 2, events: 3 }, 'the failed step is timed like any other')
  // A failed request is answered: it no longer holds back what reads see as settled, nor shutdown.
  const failedBy = Date.now()
  await sleep(2)
  t.ok(ingestion.settledBefore() > failedBy)
  await ingestion.idle()
})

t.test('service: a step that stalls is reported with its name', async (t) => {
  const stalls = stallLog()
  // Every step that takes any time at all is over a threshold of 0 ms; the log step waits for a synced commit.
  const ingestion = service(app, openLog(), stalls, 0)
  await ingestion.ingestOne(await callerWithBurst(100), event(randomId('agent-')))
  t.ok(stalls.warnings.some((w) => w.details.step === 'log' && w.details.events === 1), JSON.stringify(stalls.warnings))
})
