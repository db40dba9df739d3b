import t from 'tap'
import { rowStep } from '../../../src/ingest/steps/row.ts'
import { rowBytesOf, type RowJob } from '../../../src/ingest/row-thread.ts'
import type { RowBytes } from '../../../src/ingest/log/entry-codec.ts'
import { agent, deferred, event, items, run } from './fixtures.ts'

function resolved (...events: unknown[]) {
  const list = items(...events)
  list.forEach((item, i) => { item.agent = agent(`agt-${i}`) })
  return list
}

t.test('row: each event gets an id of the receive time, and the run the lines of the job it built', async (t) => {
  const jobs: RowJob[] = []
  const r = run()
  const list = resolved(event('a'), event('b'))
  const verdicts = rowStep({ rows: { rows: (job) => { jobs.push(job); return rowBytesOf(job) } } }).run(r, list)
  t.same(verdicts, [undefined, undefined], 'built here: no promise')
  t.match(list.map((i) => i.eventId), [/^evt_/, /^evt_/])
  t.not(list[0]!.eventId, list[1]!.eventId)
  t.match(jobs[0], { userId: 'user-1', receivedAt: r.receivedAt, source: 'events', eventIds: list.map((i) => i.eventId), agentIds: ['agt-0', 'agt-1'] })
  t.notOk('prices' in jobs[0]! || 'parsedFrom' in jobs[0]!, 'no prices and no text when the run has none')
  t.equal(r.rows!.rows, 2)
  t.match(r.rows!.bytes.toString(), new RegExp(list[0]!.eventId))
})

t.test('row: a job built elsewhere (the row thread) is awaited; the text and prices go with it', async (t) => {
  const built = deferred<RowBytes>()
  let job: RowJob | undefined
  const r = run({ parsedFrom: { text: '{"events":[]}', key: 'events' }, prices: new Map() as never })
  const list = resolved(event('a'), event('b'))
  const pending = rowStep({ rows: { rows: (j) => { job = j; return built.promise } } }).run(r, [list[1]!])
  t.ok(pending instanceof Promise)
  t.same(job!.parsedFrom, { text: '{"events":[]}', key: 'events', indices: [1] }, 'the indices of the events still alive')
  t.equal(job!.prices, r.prices)
  t.equal(r.rows, null, 'not before the rows are built')
  const rows = { rows: 1, bytes: Buffer.from('[]') }
  built.resolve(rows)
  t.same(await pending, [undefined])
  t.equal(r.rows, rows)
})
