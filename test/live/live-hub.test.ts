import t, { type Test } from 'tap'
import { Redis } from 'ioredis'
import { LiveHub, type LiveBatch } from '../../src/live/live-hub.ts'
import { rowBytes } from '../../src/ingest/log/entry-codec.ts'
import { randomId } from '../helpers/env.ts'

const REDIS_URL = 'redis://127.0.0.1:6379'
const silent = { warn () {}, error () {}, info () {}, debug () {} } as never

/** A hub on its own connections, with a stream of `user` listening; its batches land in `batches`. */
async function watchedHub (t: Test, user: string, publishWindowMs: number, replayBatches = 100) {
  const publisher = new Redis(REDIS_URL)
  const subscriber = new Redis(REDIS_URL)
  const hub = new LiveHub(publisher, subscriber, `test:${randomId()}:`, { replayBatches, replayMs: 60_000, handshakeMs: 1000, publishWindowMs }, silent)
  t.teardown(() => {
    hub.close()
    publisher.disconnect()
    subscriber.disconnect()
  })
  await hub.start()
  const batches: LiveBatch[] = []
  await hub.listen(user, (batch) => batches.push(batch))
  t.ok(hub.isWatched(user), 'the stream made its user watched')
  return { hub, batches }
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

async function until (check: () => boolean, what: string): Promise<void> {
  for (const deadline = Date.now() + 10_000; !check();) {
    if (Date.now() > deadline) throw new Error(`waited 10 s for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

t.test('a publishing window sends the requests of several turns in one batch, in order', async (t) => {
  const user = randomId('u-')
  const { hub, batches } = await watchedHub(t, user, 200)
  hub.acknowledged(user, rowBytes(['a1', 'a2']))
  await nextTurn()
  hub.acknowledged(user, rowBytes(['b1']))
  await nextTurn()
  hub.acknowledged(user, rowBytes(['c1']))
  await until(() => batches.length > 0, 'the window to close')
  // Settle: nothing else may follow.
  await new Promise((resolve) => setTimeout(resolve, 250))
  t.equal(batches.length, 1, 'one call for the window')
  t.same(batches[0]!.lines, ['a1', 'a2', 'b1', 'c1'])
})

t.test('with no window, each turn goes out on its own', async (t) => {
  const user = randomId('u-')
  const { hub, batches } = await watchedHub(t, user, 0)
  hub.acknowledged(user, rowBytes(['a1']))
  hub.acknowledged(user, rowBytes(['a2']))
  await nextTurn()
  hub.acknowledged(user, rowBytes(['b1']))
  await until(() => batches.length >= 2, 'two batches')
  t.same(batches.map((b) => b.lines), [['a1', 'a2'], ['b1']], 'the requests of one turn together, the next turn apart')
})

t.test('closing the hub sends what its window still holds', async (t) => {
  const user = randomId('u-')
  const { hub, batches } = await watchedHub(t, user, 1000)
  hub.acknowledged(user, rowBytes(['late']))
  hub.close()
  await until(() => batches.length > 0, 'the held batch')
  t.same(batches[0]!.lines, ['late'])
})

t.test('a replay from the entry just before the oldest kept one is whole: what was trimmed is not after it', async (t) => {
  const user = randomId('u-')
  // The stream keeps 3 batches.
  const { hub, batches } = await watchedHub(t, user, 0, 3)
  for (let i = 1; i <= 5; i++) {
    hub.acknowledged(user, rowBytes([`b${i}`]))
    await until(() => batches.length === i, `batch ${i}`)
  }
  const entries = batches.map((b) => b.entry)
  // Kept: batches 3, 4 and 5 (the stream keeps 3); 1 and 2 were trimmed.
  const fromSecond = await hub.replay(user, entries[1]!, 10, false)
  t.same(fromSecond.batches.map((b) => b.lines), [['b3'], ['b4'], ['b5']])
  t.ok(fromSecond.complete, 'nothing after the second batch was trimmed')
  const fromFirst = await hub.replay(user, entries[0]!, 10, false)
  t.notOk(fromFirst.complete, 'the second batch was trimmed: a gap')
  t.ok((await hub.replay(user, entries[3]!, 10, false)).complete)
})

t.test('a resume from inside a trimmed batch is whole only if the reader had read it to its end', async (t) => {
  const user = randomId('u-')
  // The stream keeps 3 batches.
  const { hub, batches } = await watchedHub(t, user, 0, 3)
  hub.acknowledged(user, rowBytes(['a0', 'a1', 'a2', 'a3', 'a4']))
  await until(() => batches.length === 1, 'the first batch')
  for (let i = 2; i <= 4; i++) {
    hub.acknowledged(user, rowBytes([`b${i}`]))
    await until(() => batches.length === i, `batch ${i}`)
  }
  // Kept: the last three; the first (5 events) was trimmed, and the oldest kept names it.
  const first = batches[0]!.entry
  t.notOk((await hub.replay(user, first, 10, true, 2)).complete, 'read up to its third event: its last two were dropped')
  t.ok((await hub.replay(user, first, 10, true, 4)).complete, 'read to its end: nothing was dropped')
  t.ok((await hub.replay(user, first, 10, false)).complete, 'a chunk after a batch sent whole')
})

/** Two hubs on one prefix, each with its own clock. */
async function twoHubs (t: Test) {
  const prefix = `test:${randomId()}:`
  const clocks = { a: Date.now(), b: Date.now() }
  const hubs = (['a', 'b'] as const).map((name) => {
    const publisher = new Redis(REDIS_URL)
    const subscriber = new Redis(REDIS_URL)
    const hub = new LiveHub(publisher, subscriber, prefix, { replayBatches: 100, replayMs: 60_000, handshakeMs: 1000, publishWindowMs: 0 }, silent, () => clocks[name])
    t.teardown(() => {
      hub.close()
      publisher.disconnect()
      subscriber.disconnect()
    })
    return hub
  })
  return { a: hubs[0]!, b: hubs[1]!, clocks, prefix }
}

t.test('closing the last stream of a user keeps every instance publishing for the replay window from the close', async (t) => {
  const { a, b, clocks } = await twoHubs(t)
  await a.start()
  await b.start()
  const user = randomId('u-')
  const stop = await a.listen(user, () => {})
  t.ok(b.isWatched(user), 'the other instance publishes the user\'s events')
  // 50 s later (no renewal reached b meanwhile), the stream closes.
  clocks.b += 50_000
  stop()
  const renewedUntil = clocks.b + 70_000
  await until(() => (b as unknown as { watched: Map<string, number> }).watched.get(user) === renewedUntil, 'the close to be announced')
  // A reader reconnecting 56 s after the close is within the 60 s window: b still publishes.
  clocks.b += 56_000
  t.ok(b.isWatched(user), 'still published 56 s after the close')
})

t.test('an instance that starts is told of users whose stream closed within the window', async (t) => {
  const { a, b, clocks } = await twoHubs(t)
  await a.start()
  const user = randomId('u-')
  const stop = await a.listen(user, () => {})
  stop()
  clocks.a += 10_000
  await b.start()
  await until(() => b.isWatched(user), 'b to learn of the user')
  t.pass('a user whose stream closed 10 s ago is published by an instance started since')
  const other = randomId('u-')
  const stopOther = await a.listen(other, () => {})
  stopOther()
  clocks.a += 61_000
  const [cp, cs] = [new Redis(REDIS_URL), new Redis(REDIS_URL)]
  const c = new LiveHub(cp, cs, (a as unknown as { prefix: string }).prefix, { replayBatches: 100, replayMs: 60_000, handshakeMs: 1000, publishWindowMs: 0 }, silent)
  t.teardown(() => {
    c.close()
    cp.disconnect()
    cs.disconnect()
  })
  await c.start()
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.notOk(c.isWatched(other), 'one whose stream closed more than the window ago is not')
})
