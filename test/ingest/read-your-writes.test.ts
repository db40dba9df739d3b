import t from 'tap'
import { ReadYourWrites } from '../../src/ingest/read-your-writes.ts'

/** A clock the test sets. */
function clock (start: number) {
  const c = { now: start, read: () => c.now }
  return c
}

t.test('settledBefore: the instant before the oldest request in flight, else now', async (t) => {
  const time = clock(1000)
  const rw = new ReadYourWrites(time.read)
  const first = rw.receive()
  t.equal(first, 1000)
  time.now = 1005
  const second = rw.receive()
  t.equal(rw.settledBefore(), 999, 'the first request is not answered yet')
  rw.answered(first)
  t.equal(rw.settledBefore(), 1004)
  rw.answered(second)
  t.equal(rw.settledBefore(), 1005, 'nothing in flight: now')
})

t.test('receive: a request received after settledBefore() handed out an instant is stamped after it', async (t) => {
  const time = clock(2000)
  const rw = new ReadYourWrites(time.read)
  t.equal(rw.settledBefore(), 2000)
  t.equal(rw.receive(), 2001, 'same millisecond: stamped later, so the read that took 2000 did not miss it')
  t.equal(rw.receive(), 2001, 'requests may share a receive time')
  t.equal(rw.settledBefore(), 2000)
})

t.test('requests sharing a receive time are counted', async (t) => {
  const time = clock(3000)
  const rw = new ReadYourWrites(time.read)
  const a = rw.receive()
  const b = rw.receive()
  rw.answered(a)
  time.now = 3010
  t.equal(rw.settledBefore(), 2999, 'one of the two still in flight')
  rw.answered(b)
  t.equal(rw.settledBefore(), 3010)
})

t.test('idle: resolves once every request in flight is answered', async (t) => {
  const rw = new ReadYourWrites()
  await rw.idle()
  const a = rw.receive()
  let idle = false
  const waiting = rw.idle().then(() => { idle = true })
  await new Promise((resolve) => setImmediate(resolve))
  t.notOk(idle)
  rw.answered(a)
  await waiting
  t.ok(idle)
})
