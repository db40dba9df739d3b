import t from 'tap'
import { logStep, type AcceptedEvents } from '../../../src/ingest/steps/log.ts'
import type { IngestCaller, IngestItem } from '../../../src/ingest/steps/ingest-run.ts'
import { agent, deferred, event, items, run } from './fixtures.ts'

function parts (append: (rows: unknown) => Promise<number>) {
  const told: [string, number][] = []
  const accepted: { caller: IngestCaller; items: readonly IngestItem[] }[] = []
  const sink: AcceptedEvents = { accepted: (caller, list) => { accepted.push({ caller, items: list }) } }
  return { told, accepted, step: logStep({ ingestLog: { append }, shipper: { acknowledged: (userId, last) => { told.push([userId, last]) } }, accepted: sink }) }
}

t.test('log: once the rows are appended the shipper is told, the activity recorded and each event acknowledged', async (t) => {
  const appended = deferred<number>()
  const rows = { rows: 2, bytes: Buffer.from('x\ny') }
  const seen: unknown[] = []
  const { step, told, accepted } = parts((r) => { seen.push(r); return appended.promise })
  const list = items(event('a'), event('a'))
  list.forEach((item, i) => { item.agent = agent('agt-a'); item.eventId = `evt_${i}` })
  const pending = step.run(run({ rows }), list)
  await new Promise((resolve) => setImmediate(resolve))
  t.same(seen, [rows])
  t.same(told, [], 'nothing acknowledged before the append resolves')
  t.same(accepted, [])
  appended.resolve(42)
  const verdicts = await pending
  t.same(told, [['user-1', 42]])
  t.equal(accepted.length, 1)
  t.equal(accepted[0]!.items, list)
  t.same(verdicts, [
    { kind: 'accepted', ack: { id: 'evt_0', accepted: true, agentId: 'agt-a', eventId: 'evt_0' } },
    { kind: 'accepted', ack: { id: 'evt_1', accepted: true, agentId: 'agt-a', eventId: 'evt_1' } },
  ])
})

t.test('log: a refused append fails the step with its error; nothing is acknowledged', async (t) => {
  const refusal = new Error('ingest log full')
  const { step, told, accepted } = parts(async () => { throw refusal })
  const list = items(event('a'))
  list[0]!.agent = agent('agt-a')
  await t.rejects(Promise.resolve(step.run(run({ rows: { rows: 1, bytes: Buffer.from('x') } }), list)), refusal)
  t.same(told, [])
  t.same(accepted, [])
})

t.test('log: the listeners of logged rows get each request\'s rows once, after the append; one that throws refuses nothing', async (t) => {
  const appended = deferred<number>()
  const rows = { rows: 1, bytes: Buffer.from('x') }
  const got: [string, unknown][] = []
  const step = logStep({
    ingestLog: { append: () => appended.promise },
    shipper: { acknowledged: () => {} },
    accepted: { accepted: () => {} },
    logged: [() => { throw new Error('a listener fails') }, (userId, r) => { got.push([userId, r]) }],
  })
  const list = items(event('a'))
  list[0]!.agent = agent('agt-a')
  list[0]!.eventId = 'evt_0'
  const pending = step.run(run({ rows }), list)
  await new Promise((resolve) => setImmediate(resolve))
  t.same(got, [], 'nothing before the append resolves')
  appended.resolve(1)
  const verdicts = await pending
  t.same(got, [['user-1', rows]])
  t.equal(got[0]![1], rows, 'the rows as appended, not a copy')
  t.same(verdicts, [{ kind: 'accepted', ack: { id: 'evt_0', accepted: true, agentId: 'agt-a', eventId: 'evt_0' } }])
})
