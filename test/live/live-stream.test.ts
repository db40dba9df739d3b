import t from 'tap'
import { Writable } from 'node:stream'
import type { ServerResponse } from 'node:http'
import { LiveStream, type ReplayRead } from '../../src/live/live-stream.ts'
import { compareEntries } from '../../src/domain/live-events.ts'
import { parseSearchFilters } from '../../src/domain/search-filters.ts'
import { eventLine } from '../../src/domain/event-line.ts'
import { buildEventRow } from '../../src/domain/event-row.ts'

/** A response whose reader takes nothing until told: what it was written stays buffered. */
function slowReader () {
  const pending: (() => void)[] = []
  const chunks: string[] = []
  const res = new Writable({
    highWaterMark: 1024,
    write (chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString())
      pending.push(done)
    },
  })
  return {
    res: res as unknown as ServerResponse,
    text: () => chunks.join(''),
    /** The reader catches up with everything written so far. */
    async catchUp () {
      while (pending.length) {
        while (pending.length) pending.shift()!()
        await new Promise((resolve) => setImmediate(resolve))
      }
    },
  }
}

const noFilters = (parseSearchFilters({}) as { ok: true; filters: ReturnType<typeof parseSearchFilters> extends { filters: infer F } ? F : never }).filters
const line = (i: number) => eventLine(buildEventRow({ agentId: 'a', reasoning: 'x'.repeat(500) }, { eventId: `evt_${i}`, userId: 'u', agentId: 'agent-1', receivedAt: 1_764_000_000_000 }))
const names = new Map([['agent-1', 'one']])
const agents = { names, hidden: new Set<string>() }

t.test('a slow reader: the batches that come while it has not taken the last are dropped and counted, and a gap says how many once it catches up', async (t) => {
  const reader = slowReader()
  const stream = new LiveStream(reader.res, noFilters, agents, async () => agents, { bufferBytes: 2000, heartbeatMs: 60_000 })
  t.teardown(() => stream.close())
  stream.start()
  // 10 events of about 900 bytes each: about two fit within 2,000 bytes unread, the rest of the batch
  // waits for the reader; the two batches after it come while it still waits, more than 16 × 2,000
  // bytes of them: the reader is behind.
  stream.push({ entry: '1-0', lines: Array.from({ length: 10 }, (_, i) => line(i)) })
  const first = (reader.text().match(/^id: /gm) ?? []).length
  t.ok(first >= 1 && first < 10, `${first} written while the reader read nothing`)
  stream.push({ entry: '2-0', lines: Array.from({ length: 40 }, (_, i) => line(10 + i)) })
  stream.push({ entry: '3-0', lines: Array.from({ length: 4 }, (_, i) => line(60 + i)) })
  t.ok(reader.text().length < 2000 + 1000, 'nothing more written while the reader is behind')
  t.notMatch(reader.text(), /event: gap/, 'no gap told while the reader is still behind')
  await reader.catchUp()
  const ids = [...reader.text().matchAll(/^id: (.*)$/gm)].map((m) => m[1])
  t.same(ids, Array.from({ length: 10 }, (_, i) => `1-0:${i}`), 'the first batch whole, in order')
  const gap = /event: gap\ndata: (.*)\n\n/.exec(reader.text())
  t.ok(gap, 'a gap once the reader caught up')
  t.ok(gap!.index > reader.text().lastIndexOf('id: 1-0:9'), 'after the first batch')
  t.same(JSON.parse(gap![1]!), { missed: 44, first: '2-0:0', last: '3-0:3' }, 'with the count of events it missed, the first and the last')
  // After the gap, events flow again.
  stream.push({ entry: '4-0', lines: [line(30)] })
  await reader.catchUp()
  t.match(reader.text(), /id: 4-0:0\n/)
})

t.test('a batch far larger than the buffer reaches a reader that takes it, whole and in order, without a gap', async (t) => {
  const reader = slowReader()
  const stream = new LiveStream(reader.res, noFilters, agents, async () => agents, { bufferBytes: 2000, heartbeatMs: 60_000 })
  t.teardown(() => stream.close())
  stream.start()
  stream.push({ entry: '1-0', lines: Array.from({ length: 50 }, (_, i) => line(i)) })
  await reader.catchUp()
  stream.push({ entry: '2-0', lines: Array.from({ length: 50 }, (_, i) => line(50 + i)) })
  await reader.catchUp()
  const ids = [...reader.text().matchAll(/^id: (.*)$/gm)].map((m) => m[1])
  t.same(ids, [...Array.from({ length: 50 }, (_, i) => `1-0:${i}`), ...Array.from({ length: 50 }, (_, i) => `2-0:${i}`)])
  t.notMatch(reader.text(), /event: gap/)
})

t.test('batches that come while a large one is being read queue behind it, up to the buffer: none missed', async (t) => {
  const reader = slowReader()
  const stream = new LiveStream(reader.res, noFilters, agents, async () => agents, { bufferBytes: 2000, heartbeatMs: 60_000 })
  t.teardown(() => stream.close())
  stream.start()
  stream.push({ entry: '1-0', lines: Array.from({ length: 10 }, (_, i) => line(i)) })
  stream.push({ entry: '2-0', lines: [line(10)] }) // about 900 bytes: within the buffer's worth of queued lines
  stream.push({ entry: '3-0', lines: [line(11)] })
  await reader.catchUp()
  const ids = [...reader.text().matchAll(/^id: (.*)$/gm)].map((m) => m[1])
  t.same(ids, [...Array.from({ length: 10 }, (_, i) => `1-0:${i}`), '2-0:0', '3-0:0'], 'the large batch, then those queued behind it, in order')
  t.notMatch(reader.text(), /event: gap/)
})

t.test('batches held while a new agent\'s name is looked up all reach a reader that keeps up', async (t) => {
  const reader = slowReader()
  const looked = { up: 0 }
  const later = { names: new Map([...names, ['agent-2', 'two']]), hidden: new Set<string>() }
  const stream = new LiveStream(reader.res, noFilters, agents, async () => { looked.up++; return later }, { bufferBytes: 2000, heartbeatMs: 60_000 })
  t.teardown(() => stream.close())
  stream.start()
  const newAgentLine = (i: number) => eventLine(buildEventRow({ agentId: 'b', reasoning: 'y'.repeat(500) }, { eventId: `evt_n${i}`, userId: 'u', agentId: 'agent-2', receivedAt: 1_764_000_000_000 }))
  // Two large batches of the new agent arrive while its name is looked up: sent together after it.
  stream.push({ entry: '1-0', lines: Array.from({ length: 5 }, (_, i) => newAgentLine(i)) })
  stream.push({ entry: '2-0', lines: Array.from({ length: 5 }, (_, i) => newAgentLine(5 + i)) })
  while (looked.up === 0 || !reader.text().includes('id: ')) await new Promise((resolve) => setImmediate(resolve))
  await reader.catchUp()
  const ids = [...reader.text().matchAll(/^id: (.*)$/gm)].map((m) => m[1])
  t.same(ids, [...Array.from({ length: 5 }, (_, i) => `1-0:${i}`), ...Array.from({ length: 5 }, (_, i) => `2-0:${i}`)])
  t.notMatch(reader.text(), /event: gap/)
  t.match(reader.text(), /"displayName":"two"/, 'named')
})

t.test('a reader that keeps up misses nothing', async (t) => {
  const reader = slowReader()
  const stream = new LiveStream(reader.res, noFilters, agents, async () => agents, { bufferBytes: 2000, heartbeatMs: 60_000 })
  t.teardown(() => stream.close())
  stream.start()
  for (let i = 0; i < 10; i++) {
    stream.push({ entry: `${i + 1}-0`, lines: [line(i)] })
    await reader.catchUp()
  }
  t.equal((reader.text().match(/^id: /gm) ?? []).length, 10)
  t.notMatch(reader.text(), /event: gap/)
})

t.test('a replay waits for its reader: bounded while it reads nothing, everything in order once it reads', async (t) => {
  const reader = slowReader()
  const stream = new LiveStream(reader.res, noFilters, agents, async () => agents, { bufferBytes: 2000, heartbeatMs: 60_000 })
  t.teardown(() => stream.close())
  // What the replay stream keeps (as Redis would): 20 requests missed, more added while replaying.
  const kept = Array.from({ length: 20 }, (_, i) => ({ entry: `${i + 1}-0`, lines: [line(i)] }))
  const read: ReplayRead = async (entry, count, inclusive) => {
    const batches = kept.filter((b) => (inclusive ? compareEntries(b.entry, entry) >= 0 : compareEntries(b.entry, entry) > 0)).slice(0, count)
    return { batches, complete: true }
  }
  const state = { replayed: false }
  const replay = stream.replay(read, { entry: '1-0', index: 0 }).then(() => { state.replayed = true; stream.start() })
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
  t.ok(reader.text().length < 2000 + 1000, `${reader.text().length} bytes written while the reader read nothing`)
  t.notOk(state.replayed, 'the replay waits for the reader')
  // Requests acknowledged meanwhile: more than the buffer holds, so held ones are dropped, then read again.
  for (let i = 20; i < 40; i++) {
    const batch = { entry: `${i + 1}-0`, lines: [line(i)] }
    kept.push(batch)
    stream.push(batch)
  }
  while (!state.replayed) {
    await reader.catchUp()
    await new Promise((resolve) => setImmediate(resolve))
  }
  await replay
  await reader.catchUp()
  const ids = [...reader.text().matchAll(/^id: (\d+)-0:0$/gm)].map((m) => Number(m[1]))
  t.same(ids, Array.from({ length: 39 }, (_, i) => i + 2), 'every request after the resume point, once each, in order')
  t.notMatch(reader.text(), /event: gap/)
})

t.test('a renamed agent is shown by its new name from the next batch; a deleted one\'s events are left out, live and replayed', async (t) => {
  const reader = slowReader()
  let now = agents
  const looked = { up: 0 }
  const stream = new LiveStream(reader.res, noFilters, agents, async () => { looked.up++; return now }, { bufferBytes: 1_000_000, heartbeatMs: 60_000 })
  t.teardown(() => stream.close())
  stream.start()
  const settle = async () => {
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
    await reader.catchUp()
  }
  stream.push({ entry: '1-0', lines: [line(1)] })
  await settle()
  t.match(reader.text(), /"displayName":"one"/)
  t.equal(looked.up, 0, 'a known agent needs no lookup')
  now = { names: new Map([['agent-1', 'renamed']]), hidden: new Set() }
  stream.agentsChanged()
  stream.push({ entry: '2-0', lines: [line(2)] })
  await settle()
  t.equal(looked.up, 1, 'read again once, after the change')
  const data = [...reader.text().matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as { eventId: string; agent: { displayName: string } })
  t.same(data.map((e) => [e.eventId, e.agent.displayName]), [['evt_1', 'one'], ['evt_2', 'renamed']])
  now = { names: new Map([['agent-1', 'renamed']]), hidden: new Set(['agent-1']) }
  stream.agentsChanged()
  stream.push({ entry: '3-0', lines: [line(3)] })
  await settle()
  t.notMatch(reader.text(), /evt_3/, 'a deleted agent\'s event is not shown')
  t.notMatch(reader.text(), /event: gap/, 'nor counted as missed')

  // A replay of batches kept from before the deletion leaves them out too.
  const replayed = slowReader()
  const resumed = new LiveStream(replayed.res, noFilters, now, async () => now, { bufferBytes: 1_000_000, heartbeatMs: 60_000 })
  t.teardown(() => resumed.close())
  const kept = [{ entry: '1-0', lines: [line(1)] }, { entry: '2-0', lines: [line(2)] }]
  await resumed.replay(async () => ({ batches: kept, complete: true }), { entry: '1-0', index: -1 })
  resumed.start()
  await replayed.catchUp()
  t.notMatch(replayed.text(), /^id: /m, 'nothing of the deleted agent is replayed')
})
