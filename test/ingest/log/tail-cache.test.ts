import t from 'tap'
import { TailCache, type TailEntry } from '../../../src/ingest/log/tail-cache.ts'

const entry = (key: number, rows: number, bytes = 10): TailEntry => ({ key, rows, payload: Buffer.alloc(0), bytes })

t.test('the tail keeps the newest entries and lets go of the shipped ones', async (t) => {
  const tail = new TailCache(100)
  tail.keep(entry(1, 2))
  tail.keep(entry(3, 3))
  t.ok(tail.holds(1))
  t.ok(tail.holds(4), 'any position from its first entry on')
  tail.shipped(2, false)
  t.same(tail.entries.map((e) => e.key), [3])
  t.notOk(tail.holds(2), 'a position before its first entry is read from disk')
  tail.shipped(4, false)
  t.same(tail.entries.map((e) => e.key), [3], 'an entry partly shipped stays')
})

t.test('a tail grown past its size, or dropped, keeps nothing until the shipper has caught up', async (t) => {
  const tail = new TailCache(25)
  tail.keep(entry(1, 1))
  tail.keep(entry(2, 1))
  tail.keep(entry(3, 1))
  t.same(tail.entries, [], 'past 25 bytes: dropped whole')
  tail.keep(entry(4, 1))
  t.same(tail.entries, [], 'not kept again while the shipper is behind')
  tail.shipped(2, false)
  tail.keep(entry(5, 1))
  t.same(tail.entries, [])
  tail.shipped(5, true)
  tail.keep(entry(6, 1))
  t.same(tail.entries.map((e) => e.key), [6], 'kept again once caught up')
  tail.drop()
  t.same(tail.entries, [])
  t.notOk(tail.holds(6))
})
