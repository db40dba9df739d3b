import t from 'tap'
import { WindowHints, widening } from '../../src/storage/window-hints.ts'

const HOUR = 3_600_000
const DAY = 24 * HOUR

t.test('without a hint a list widens from an hour (a day for one agent) to the whole range', async (t) => {
  t.same(widening(undefined), [HOUR, DAY, 7 * DAY, Infinity])
  t.same(widening('agent'), [DAY, 7 * DAY, Infinity])
  t.same(new WindowHints().windows('k', undefined), widening(undefined))
})

t.test('a learnt span is tried first, doubled, then only the wider windows', async (t) => {
  const hints = new WindowHints()
  hints.learn('k', 2 * HOUR)
  t.same(hints.windows('k', undefined), [4 * HOUR, DAY, 7 * DAY, Infinity])
  hints.learn('k', 10)
  t.same(hints.windows('k', undefined), [60_000, HOUR, DAY, 7 * DAY, Infinity], 'at least a minute')
  hints.learn('k', 5 * DAY)
  t.same(hints.windows('k', 'agent'), [10 * DAY, Infinity])
  t.same(hints.windows('other', undefined), widening(undefined), 'per list')
})

t.test('a short page forgets the hint', async (t) => {
  const hints = new WindowHints()
  hints.learn('k', HOUR)
  hints.learn('k', undefined)
  t.same(hints.windows('k', undefined), widening(undefined))
})

t.test('only the most recent lists are remembered', async (t) => {
  const hints = new WindowHints(2)
  hints.learn('a', HOUR)
  hints.learn('b', HOUR)
  hints.learn('c', HOUR)
  t.same(hints.windows('a', undefined), widening(undefined), 'the oldest is gone')
  t.same(hints.windows('c', undefined)[0], 2 * HOUR)
})
