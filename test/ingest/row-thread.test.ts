import t from 'tap'
import { contentHash } from '../../src/domain/canonical-json.ts'
import { newEventId } from '../../src/domain/ids.ts'
import type { IncomingEvent } from '../../src/domain/event-row.ts'
import { RowThread, rowBytesOf, rowLines, withEvents, type RowJob } from '../../src/ingest/row-thread.ts'
import type { RowBytes } from '../../src/ingest/log/entry-codec.ts'
import { buildTestApp, newUser, randomId, sendBatch, shipped } from '../helpers/app.ts'

/** Events that exercise every part of a row: times, tokens and prices, fingerprints, odd strings. */
function variedEvents (n: number): IncomingEvent[] {
  return Array.from({ length: n }, (_, i): IncomingEvent => ({
    agentId: `agent-${i % 3}`,
    ...(i % 2 === 0 ? { timestamp: `2026-03-01T10:00:0${i % 10}.250Z` } : {}),
    type: (['tool', 'error', 'decision', 'reasoning'] as const)[i % 4],
    input: { prompt: `find ${i} — café ✈ \u{1F600}`, context: { z: 1, a: [i, null, true] } },
    reasoning: i % 5 === 0 ? 'a lone surrogate \ud800 and a quote "' : 'plain',
    toolExecuted: 'search',
    outcome: i % 3 === 0 ? 'failed' : 'success',
    errorMessage: i % 3 === 0 ? `timeout after ${i} ms` : undefined,
    model: i % 2 === 0 ? 'claude-sonnet-4-5-20250929' : 'no-such-model',
    metadata: { tokensBreakdown: { inputBase: 1000 + i, output: 50, cacheRead: 7 }, sessionId: 's1', traceId: `tr-${i}`, tool: 'langchain' },
  }))
}

/** The lines of rows built for the ingest log (UTF-8, joined by newlines). */
function text (rows: RowBytes | Promise<RowBytes>): string[] {
  if (rows instanceof Promise) throw new Error('rows still being built')
  const lines = rows.bytes.toString('utf8').split('\n')
  if (lines.length !== rows.rows) throw new Error(`${lines.length} lines for ${rows.rows} rows`)
  return lines
}

function jobOf (events: IncomingEvent[]): RowJob {
  const receivedAt = Date.now()
  return {
    events,
    eventIds: events.map(() => newEventId(receivedAt)),
    agentIds: events.map((_, i) => `c${String(i % 3).padStart(24, '0')}`),
    userId: 'user-1',
    receivedAt,
    source: 'events',
  }
}

t.test('the row thread builds exactly the lines the main thread builds, large jobs only', async (t) => {
  const thread = new RowThread({ minEvents: 10 })
  t.teardown(() => thread.close())
  await thread.whenReady()

  const large = jobOf(variedEvents(40))
  const built = await thread.rows(large)
  t.same(text(built), rowLines(large), 'the same lines, in order')
  t.ok(built.bytes.equals(rowBytesOf(large).bytes), 'byte for byte what the calling thread encodes')
  t.equal(thread.builtOnThread, 40, 'built on the thread')

  const small = jobOf(variedEvents(9))
  const here = thread.rows(small)
  t.notOk(here instanceof Promise, 'a small job is built at once, on the calling thread')
  t.same(text(here), rowLines(small))
  t.equal(thread.builtOnThread, 40)
})

/** A job whose events are items `indices` of the `events` array of a JSON text, as the batch route sends them. */
function textJob (items: unknown[], indices: number[], bom = false): RowJob {
  const body = (bom ? '\ufeff' : '') + JSON.stringify({ note: 'envelope', events: items })
  const parsed = (JSON.parse(body.replace(/^\ufeff/, '')) as { events: IncomingEvent[] }).events
  return { ...jobOf(indices.map((i) => parsed[i]!)), parsedFrom: { text: body, key: 'events', indices } }
}

t.test('a job sent as the text its events were parsed from is built as the events would be', async (t) => {
  const thread = new RowThread({ minEvents: 2 })
  t.teardown(() => thread.close())
  await thread.whenReady()
  const items: unknown[] = variedEvents(12)
  items[4] = { type: 'not-a-type' } // refused by the schema step: not in the job
  items[9] = 'not an object'
  const indices = [0, 1, 2, 3, 5, 6, 7, 8, 10, 11]
  for (const bom of [false, true]) {
    const job = textJob(items, indices, bom)
    const built = await thread.rows(job)
    t.ok(built.bytes.equals(rowBytesOf(job).bytes), `byte for byte the lines of the job's events${bom ? ', after a byte order mark' : ''}`)
  }
  t.equal(thread.builtOnThread, 20, 'built on the thread')
  t.equal(thread.sentAsText, 20, 'sent as text')
})

t.test('a job whose text does not hold its events is built from its events on the calling thread', async (t) => {
  const thread = new RowThread({ minEvents: 2 })
  t.teardown(() => thread.close())
  await thread.whenReady()
  const good = textJob(variedEvents(5), [0, 1, 2, 3, 4])
  const cases: [string, RowJob][] = [
    ['no such key', { ...good, parsedFrom: { ...good.parsedFrom!, key: 'items' } }],
    ['an index past the end', { ...good, parsedFrom: { ...good.parsedFrom!, indices: [0, 1, 2, 3, 5] } }],
    ['fewer indices than events', { ...good, parsedFrom: { ...good.parsedFrom!, indices: [0, 1, 2] } }],
    ['not JSON', { ...good, parsedFrom: { ...good.parsedFrom!, text: '{"events": [' } }],
  ]
  for (const [name, job] of cases) {
    t.throws(() => withEvents(job), `${name}: the thread cannot read it`)
    const built = await thread.rows(job)
    t.ok(built.bytes.equals(rowBytesOf(good).bytes), `${name}: the lines of the job's own events`)
  }
  t.equal(thread.builtOnThread, 0, 'none of them built on the thread')
})

t.test('until the thread is ready, and with the thread off, large jobs are built on the calling thread', async (t) => {
  const thread = new RowThread({ minEvents: 2 })
  t.teardown(() => thread.close())
  const job = jobOf(variedEvents(5))
  const first = thread.rows(job)
  t.notOk(first instanceof Promise, 'no waiting for the thread to start')
  t.same(text(first), rowLines(job))

  const off = new RowThread({ minEvents: 0 })
  t.teardown(() => off.close())
  t.same(text(off.rows(job)), rowLines(job))
  t.equal(off.builtOnThread, 0)
})

t.test('a job the thread cannot build fails as it would on the calling thread', async (t) => {
  const thread = new RowThread({ minEvents: 1 })
  t.teardown(() => thread.close())
  await thread.whenReady()
  const broken = jobOf([null as unknown as IncomingEvent, ...variedEvents(2)])
  let here: unknown
  try { rowLines(broken) } catch (err) { here = err }
  t.ok(here instanceof TypeError, 'building it throws on the calling thread')
  await t.rejects(thread.rows(broken) as Promise<RowBytes>, { name: 'TypeError', message: (here as Error).message })
  const after = jobOf(variedEvents(3))
  t.same(text(await thread.rows(after)), rowLines(after), 'the thread goes on with the next job')
  t.equal(thread.builtOnThread, 3)
})

t.test('when the thread dies, its waiting jobs are built on the calling thread and it starts again', async (t) => {
  const failures: unknown[] = []
  const thread = new RowThread({ minEvents: 1, onFailure: (err) => failures.push(err) })
  t.teardown(() => thread.close())
  await thread.whenReady()
  const jobs = Array.from({ length: 5 }, () => jobOf(variedEvents(20)))
  const pending = jobs.map((job) => thread.rows(job))
  // The thread ends under the jobs, as on a crash.
  await (thread as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate()
  const lines = (await Promise.all(pending)).map(text)
  lines.forEach((l, i) => t.same(l, rowLines(jobs[i]!), `job ${i} answered with its lines`))
  t.equal(failures.length, 1, 'the failure is reported once')
  await thread.whenReady()
  const job = jobOf(variedEvents(4))
  const before = thread.builtOnThread
  t.same(text(await thread.rows(job)), rowLines(job))
  t.equal(thread.builtOnThread, before + 4, 'a new thread builds the next job')
})

const silentThread = new URL('../helpers/silent-row-thread.mjs', import.meta.url)

t.test('a thread that answers no job within the timeout is ended and its jobs are built on the calling thread', async (t) => {
  const failures: unknown[] = []
  const thread = new RowThread({ minEvents: 1, jobTimeoutMs: 200, script: silentThread, onFailure: (err) => failures.push(err) })
  t.teardown(() => thread.close())
  await thread.whenReady()
  const jobs = [jobOf(variedEvents(3)), jobOf(variedEvents(5))]
  const started = performance.now()
  const lines = (await Promise.all(jobs.map((job) => thread.rows(job)))).map(text)
  lines.forEach((l, i) => t.same(l, rowLines(jobs[i]!), `job ${i} answered with its lines`))
  t.ok(performance.now() - started >= 200, 'after the timeout, not before')
  t.equal(thread.builtOnThread, 0, 'none came from the thread')
  t.equal(failures.length, 1, 'the failure is reported once')
  t.match(String(failures[0]), /answered no job for 200 ms/)
  const worker = (thread as unknown as { worker: unknown }).worker
  t.equal(worker, null, 'the stuck thread is given up (it starts again at the next large job)')
})

t.test('a slow thread that keeps answering is not taken as stuck, however long its queue', async (t) => {
  const failures: unknown[] = []
  const thread = new RowThread({ minEvents: 1, jobTimeoutMs: 250, script: new URL('../helpers/slow-row-thread.mjs', import.meta.url), onFailure: (err) => failures.push(err) })
  t.teardown(() => thread.close())
  await thread.whenReady()
  // Six jobs answered one every 100 ms: the last waits 600 ms, more than the timeout, but the
  // thread never goes 250 ms without answering one.
  const lines = (await Promise.all(Array.from({ length: 6 }, () => thread.rows(jobOf(variedEvents(2)))))).map(text)
  t.same(lines, Array.from({ length: 6 }, () => ['from the thread', 'from the thread']), 'every job answered by the thread')
  t.equal(failures.length, 0, 'no failure')
})

t.test('an answer whose row count is not the job\'s event count is not taken: the job is built on the calling thread', async (t) => {
  const thread = new RowThread({ minEvents: 1, script: new URL('../helpers/miscounting-row-thread.mjs', import.meta.url) })
  t.teardown(() => thread.close())
  await thread.whenReady()
  const job = jobOf(variedEvents(3))
  const rows = await thread.rows(job)
  t.equal(rows.rows, 3)
  t.same(text(rows), rowLines(job), 'the lines the calling thread builds')
  t.equal(thread.builtOnThread, 0, 'none taken from the thread')
})

t.test('an answer that cannot be read gives the thread up, and its jobs are built on the calling thread', async (t) => {
  const failures: unknown[] = []
  const thread = new RowThread({ minEvents: 1, jobTimeoutMs: 60_000, script: silentThread, onFailure: (err) => failures.push(err) })
  t.teardown(() => thread.close())
  await thread.whenReady()
  const job = jobOf(variedEvents(4))
  const pending = thread.rows(job)
  // What Node emits when a message from the thread cannot be deserialized.
  const worker = (thread as unknown as { worker: { emit(event: string, err: Error): void } }).worker
  worker.emit('messageerror', new Error('could not deserialize the answer'))
  t.same(text(await pending), rowLines(job), 'the job is answered with its lines at once')
  t.equal(failures.length, 1)
  t.match(String(failures[0]), /could not deserialize/)
})

t.test('a batch ingested through the row thread is stored as the main thread would store it', async (t) => {
  const app = await buildTestApp(t, { INGEST_ROW_THREAD_MIN_EVENTS: '3' })
  await app.rowThread.whenReady()
  const user = await newUser(app)
  const key = await user.createKey()
  const agent = randomId('agent-')
  // (Lone surrogates are refused by the input rules before any row is built.)
  const events = variedEvents(6).map((e) => ({ ...e, agentId: agent, reasoning: 'plain' }))
  const res = await sendBatch(app, key.secret, [...events.slice(0, 3), { type: 'not-a-type' }, ...events.slice(3)])
  t.equal(res.statusCode, 207, res.body)
  const results = res.json().results as { status: number; eventId?: string }[]
  t.same(results.map((r) => r.status), [202, 202, 202, 400, 202, 202, 202])
  t.equal(app.rowThread.builtOnThread, 6, 'the six accepted events were built on the thread')
  t.equal(app.rowThread.sentAsText, 6, 'sent to it as the body\'s text')
  await shipped(app)
  for (const [i, r] of results.entries()) {
    if (r.status !== 202) continue
    const row = await app.events.getRow(user.id, r.eventId!)
    const sent = events[i < 3 ? i : i - 1]!
    t.ok(row, `event ${i} is stored`)
    t.equal(row!.content_hash, contentHash(sent), 'its content hash is that of the event sent')
    t.equal(row!.error_message, sent.errorMessage ?? '')
    t.equal(row!.error_fingerprint !== '', sent.outcome === 'failed' || sent.type === 'error', 'fingerprinted when it is an error')
  }
})
