import t from 'tap'
import { Redis } from 'ioredis'
import { RateLimiter } from '../../src/storage/rate-limiter.ts'
import { LeasedLimiter } from '../../src/ingest/leased-limiter.ts'
import { randomId } from '../helpers/env.ts'
import { testClock } from '../helpers/clock.ts'

const prefix = `test:${randomId()}:`
const redisA = new Redis('redis://127.0.0.1:6379')
const redisB = new Redis('redis://127.0.0.1:6379')
t.teardown(async () => {
  const keys = await redisA.keys(`${prefix}*`)
  if (keys.length) await redisA.del(...keys)
  redisA.disconnect()
  redisB.disconnect()
})
// Two instances: each its own connection and its own leases on one shared bucket.
const sharedA = new RateLimiter(redisA, prefix)
const sharedB = new RateLimiter(redisB, prefix)

t.test('one instance admits exactly the limit, then refuses with a retry time', async (t) => {
  const limiter = new LeasedLimiter(sharedA, { leaseMs: 1000, maxShare: 0.05 })
  t.teardown(() => limiter.close())
  const bucket = randomId('exact-')
  const results = await Promise.all(Array.from({ length: 70 }, () => limiter.take(bucket, 60, 1)))
  t.equal(results.filter((r) => r.admitted === 1).length, 60, 'every token of the burst is used')
  const refused = results.filter((r) => r.admitted === 0)
  t.equal(refused.length, 10)
  t.ok(refused.every((r) => r.retryAfterMs > 0 && r.retryAfterMs <= 1000), 'refusals say when one more fits')
})

t.test('two instances under concurrent load never admit more than the limit, and use nearly all of it', async (t) => {
  const a = new LeasedLimiter(sharedA, { leaseMs: 1000, maxShare: 0.05 })
  const b = new LeasedLimiter(sharedB, { leaseMs: 1000, maxShare: 0.05 })
  t.teardown(async () => { await a.close(); await b.close() })
  const bucket = randomId('pair-')
  const limit = 1000
  let admitted = 0
  const client = async (limiter: LeasedLimiter) => {
    for (let i = 0; i < 400; i++) {
      const got = await limiter.take(bucket, limit, 1 + (i % 3))
      admitted += got.admitted
    }
  }
  const started = Date.now()
  await Promise.all([client(a), client(a), client(a), client(b), client(b), client(b)])
  // The bucket refills one unit every 60 ms while the clients run: a slow machine earns a few more.
  const refilled = Math.ceil((Date.now() - started) / 60)
  t.ok(admitted <= limit + refilled + 1, `${admitted} admitted of a ${limit} limit plus ${refilled} refilled`)
  t.ok(admitted >= limit - 2 * 0.05 * limit, `${admitted} admitted: at most one slice per instance held back`)
})

t.test('a steady stream is served from leased tokens without waiting: the next slice is leased before they run out', async (t) => {
  // The shared bucket, counting what is leased from it, and holding each lease under way.
  let leases = 0
  let leased = 0
  const underWay = new Set<Promise<unknown>>()
  const counting = {
    take: (bucket: string, limit: number, n: number) => {
      leases++
      const lease = sharedA.take(bucket, limit, n).then((got) => { leased += got.admitted; return got })
      underWay.add(lease)
      void lease.finally(() => underWay.delete(lease))
      return lease
    },
    refund: (bucket: string, limit: number, n: number) => sharedA.refund(bucket, limit, n),
  } as unknown as RateLimiter
  const maxShare = 0.05
  const limit = 1_000_000
  const limiter = new LeasedLimiter(counting, { leaseMs: 1000, maxShare })
  t.teardown(() => limiter.close())
  const bucket = randomId('stream-')
  let served = 0
  let waited = 0
  // Requests arrive in groups of 10 between turns of the event loop, as they do on a busy server; a
  // lease started during a group lands before the next group (however slow Redis is), so a request
  // waits only when its group ran out of tokens with no lease started ahead of it.
  const serve = async (requests: number) => {
    for (let i = 0; i < requests; i++) {
      if (!limiter.tryTake(bucket, limit, 1)) {
        waited++
        t.equal((await limiter.take(bucket, limit, 1)).admitted, 1)
      }
      served++
      if (i % 10 === 9) {
        await Promise.all(underWay)
        await new Promise((resolve) => setImmediate(resolve))
      }
    }
  }
  await serve(500) // slices grow with demand
  const leasesBefore = leases
  waited = 0
  await serve(2000)
  // Without leasing ahead, about 40 of them would wait.
  t.equal(waited, 0, 'no request waited for a lease once the slices matched the demand')
  t.ok(leases > leasesBefore, `the stream went on leasing slices ahead (${leases - leasesBefore} leases)`)
  t.ok(leased - served <= maxShare * limit, `at most maxShare × limit held beyond what was served (${leased - served})`)
})

t.test('tokens leased and not used go back to the shared bucket after the lease time', async (t) => {
  const clock = testClock()
  // A's bucket, telling when A gives tokens back.
  let refunds = 0
  let refunded!: () => void
  const refund = new Promise<void>((resolve) => { refunded = resolve })
  const refunding = {
    take: (bucket: string, limit: number, n: number) => sharedA.take(bucket, limit, n),
    refund: async (bucket: string, limit: number, n: number) => {
      refunds++
      await sharedA.refund(bucket, limit, n)
      refunded()
    },
  } as unknown as RateLimiter
  // A's clock, counting its reads: once the requests below are answered only A's sweeper reads it.
  let reads = 0
  const now = () => { reads++; return clock.now() }
  const a = new LeasedLimiter(refunding, { leaseMs: 200, maxShare: 0.5, now })
  // B's clock too: B refuses for as long as Redis told it when it got less than it asked (up to a
  // unit's interval, 600 ms here), which the real time of this test may or may not outlast.
  const clockB = testClock()
  const b = new LeasedLimiter(sharedB, { leaseMs: 200, maxShare: 0.5, now: () => clockB.now() })
  t.teardown(async () => { await a.close(); await b.close() })
  const bucket = randomId('refund-')
  // A burst of 20 concurrent requests on A is served by one lease; the next request then leases for
  // the rate it has seen, and holds what it does not use.
  const burst = await Promise.all(Array.from({ length: 20 }, () => a.take(bucket, 100, 1)))
  t.ok(burst.every((r) => r.admitted === 1))
  // The next requests use what the burst's lease left, then one leases for the rate it has seen.
  for (let i = 0; i < 3; i++) t.equal((await a.take(bucket, 100, 1)).admitted, 1)
  const held = await b.take(bucket, 100, 100)
  t.ok(held.admitted <= 100 - 23 - 15, `B cannot use the tokens A holds (${held.admitted})`)
  // A's sweeper runs every 100 ms: within the lease time it gives nothing back, however often it runs.
  const readsBefore = reads
  const sweeps = () => reads - readsBefore
  while (sweeps() < 2) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(refunds, 0, 'A holds its tokens within the lease time (the sweeper ran twice)')
  clock.advance(201)
  await refund
  clockB.advance(1000)
  const afterReturn = await b.take(bucket, 100, 100)
  t.ok(afterReturn.admitted >= 15, `after A gave back its unused tokens, B gets them (${afterReturn.admitted})`)
  t.ok(23 + held.admitted + afterReturn.admitted <= 101, `never more than the limit in all (${23 + held.admitted + afterReturn.admitted})`)
})

t.test('closing gives back the tokens of a lease still under way when it closes', async (t) => {
  const limit = 1000
  const a = new LeasedLimiter(sharedA, { leaseMs: 60_000, maxShare: 0.5 })
  const bucket = randomId('closing-')
  t.equal((await a.take(bucket, limit, 1)).admitted, 1)
  t.equal((await a.take(bucket, limit, 1)).admitted, 1, 'the second lease is sized by what the first served')
  t.ok(a.tryTake(bucket, limit, 1), 'served from the slice held, which leaves fewer than were served: the next slice is leased ahead')
  await a.close()
  // Only the 3 served are spent: everything leased beyond them went back to the shared bucket.
  const rest = await sharedB.take(bucket, limit, limit)
  t.ok(rest.admitted >= limit - 3, `${rest.admitted} of ${limit} left after 3 were served`)
})

t.test('a request that leased its tokens gets them, though another takes from the pool as they land', async (t) => {
  // The shared bucket, with each lease held until the test lets it land: another request's Redis
  // answer can arrive in the same read as this one's, and its code runs between this lease landing
  // and the request that asked for it going on.
  const held: (() => void)[] = []
  const gated = {
    take: (bucket: string, limit: number, n: number) => new Promise((resolve) => {
      void sharedA.take(bucket, limit, n).then((got) => held.push(() => resolve(got)))
    }),
    refund: (bucket: string, limit: number, n: number) => sharedA.refund(bucket, limit, n),
  } as unknown as RateLimiter
  const limit = 1_000_000_000 // a limit no load reaches: every refusal is spurious
  const limiter = new LeasedLimiter(gated, { leaseMs: 1000, maxShare: 0.05 })
  t.teardown(() => limiter.close())
  const bucket = randomId('steal-')
  const exportOf512 = limiter.take(bucket, limit, 512)
  while (held.length === 0) await new Promise((resolve) => setImmediate(resolve))
  held.shift()!()
  // The lease's tokens are in; before the request that leased them goes on, another export of 512
  // spans, whose own Redis answer came in the same read, takes from what this instance holds.
  await Promise.resolve()
  const other = limiter.tryTake(bucket, limit, 512) ?? await (async () => {
    const taking = limiter.take(bucket, limit, 512)
    while (held.length === 0) await new Promise((resolve) => setImmediate(resolve))
    held.shift()!()
    return taking
  })()
  t.same(await exportOf512, { admitted: 512, retryAfterMs: 0 }, 'the export that leased is admitted whole')
  t.same(other, { admitted: 512, retryAfterMs: 0 }, 'so is the other one')
})
