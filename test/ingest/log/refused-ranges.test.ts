import t from 'tap'
import { addRefused, stillRefused } from '../../../src/ingest/log/refused-ranges.ts'
import type { PositionRange } from '../../../src/ingest/log/entry-codec.ts'

t.test('adjacent refused commits make one range; ranges are forgotten once shipped past', async (t) => {
  const ranges: PositionRange[] = []
  addRefused(ranges, { from: 2, to: 4 })
  addRefused(ranges, { from: 5, to: 7 })
  addRefused(ranges, { from: 10, to: 10 })
  t.same(ranges, [{ from: 2, to: 7 }, { from: 10, to: 10 }])
  t.same(stillRefused(ranges, 7), [{ from: 10, to: 10 }])
  t.same(stillRefused(ranges, 6), ranges, 'a range not wholly shipped past is still skipped')
  t.same(stillRefused(ranges, 10), [])
})
