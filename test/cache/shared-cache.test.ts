import t from 'tap'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { InvalidationBus } from '../../src/cache/invalidation-bus.ts'
import { SharedCache, type CacheLog, type SharedCacheOptions } from '../../src/cache/shared-cache.ts'
import { randomId } from '../helpers/env.ts'
import { testClock } from '../helpers/clock.ts'

const REDIS_URL = 'redis://127.0.0.1:6379'
const silent = pino({ level: 'silent' })

interface Instance { cache: SharedCache<string>; bus: InvalidationBus; redis: Redis }

/** One process's view: its own Redis connections, bus and cache, sharing Redis under `prefix`. */
async function instance (t: { teardown(fn: () => unknown): void }, prefix: string, opts: Partial<SharedCacheOptions> = {}): Promise<Instance> {
  const redis = new Redis(REDIS_URL, { enableAutoPipelining: true })
  const subscriber = new Redis(REDIS_URL)
  // The cache skips Redis while its connection is not ready (as when Redis is down): a test's first
  // lookup must not race the connection, or it goes to the loader and leaves Redis without the entry.
  // The subscriber too is connected first, as the service does (src/plugins/redis.ts): subscribing
  // while its ready check (INFO) is under way puts the connection in subscriber mode first, and its
  // INFO is refused; on a loaded machine that left the bus deaf and a test waiting for ever.
  await redis.ping()
  await subscriber.ping()
  const bus = new InvalidationBus(redis, subscriber, prefix, silent)
  await bus.start()
  t.teardown(() => {
    redis.disconnect()
    subscriber.disconnect()
  })
  const cache = new SharedCache<string>({ name: 'test', redis, prefix, bus, log: silent, localTtlMs: 1000, sharedTtlSeconds: 60, ...opts })
  return { cache, bus, redis }
}

/** Resolves when the instance has been told of an invalidation of `scope` (its cache's handler ran first). */
function told (i: Instance, scope: string): Promise<void> {
  return new Promise((resolve) => i.bus.on('cache-test', (id) => {
    if (id === scope) resolve()
  }))
}

/** A loader that counts its calls. */
function loader (value: string | null) {
  const fn = async () => {
    fn.calls++
    return value
  }
  fn.calls = 0
  return fn
}

t.test('a second instance\'s miss is answered from Redis, not by its loader', async (t) => {
  const prefix = `test:${randomId()}:`
  const a = await instance(t, prefix)
  const b = await instance(t, prefix)
  const loadA = loader('from-postgres')
  const loadB = loader('never')
  t.equal(await a.cache.get('k', loadA), 'from-postgres')
  t.equal(await b.cache.get('k', loadB), 'from-postgres')
  t.equal(loadA.calls, 1)
  t.equal(loadB.calls, 0, 'the other instance did not load')
  t.equal(await a.cache.get('k', loadA), 'from-postgres')
  t.equal(loadA.calls, 1, 'the local copy answers within the local TTL')
})

t.test('concurrent misses for one key share one load', async (t) => {
  const a = await instance(t, `test:${randomId()}:`)
  const load = loader('v')
  const values = await Promise.all(Array.from({ length: 20 }, () => a.cache.get('k', load)))
  t.same(new Set(values), new Set(['v']))
  t.equal(load.calls, 1)
})

t.test('a negative answer is cached too, locally and in Redis', async (t) => {
  const prefix = `test:${randomId()}:`
  const a = await instance(t, prefix)
  const b = await instance(t, prefix)
  const missing = loader(null)
  t.equal(await a.cache.get('unknown', missing), null)
  t.equal(await a.cache.get('unknown', missing), null)
  t.equal(await b.cache.get('unknown', missing), null)
  t.equal(missing.calls, 1, 'one load for three lookups on two instances')
  t.ok(await a.redis.ttl(`${prefix}sc:test:e:7:unknown:`) <= 60, 'negative entries expire within a minute')
})

t.test('invalidate drops the entry in Redis and on every instance', async (t) => {
  const prefix = `test:${randomId()}:`
  const a = await instance(t, prefix)
  const b = await instance(t, prefix)
  await a.cache.get('k', loader('old'))
  t.equal(await b.cache.get('k', loader('never')), 'old', 'b holds the entry locally')
  const bTold = told(b, 'k')
  t.equal(await a.cache.invalidate('k'), true)
  await bTold
  const fresh = loader('new')
  t.equal(await b.cache.get('k', fresh), 'new', 'b reads the source again at once')
  t.equal(fresh.calls, 1)
  t.equal(await a.cache.get('k', loader('never')), 'new', 'a reads b\'s fresh entry from Redis')
})

t.test('invalidating a scope drops all its entries and only them; invalidateAll drops everything', async (t) => {
  const prefix = `test:${randomId()}:`
  const a = await instance(t, prefix)
  const b = await instance(t, prefix)
  for (const key of [['o', 'x'], ['o', 'y'], ['p', 'x']] as const) await a.cache.get(key, loader(`${key[0]}${key[1]}`))
  for (const key of [['o', 'x'], ['o', 'y'], ['p', 'x']] as const) await b.cache.get(key, loader('never'))
  const bTold = told(b, 'o')
  await a.cache.invalidate('o')
  await bTold
  for (const i of [a, b]) {
    const reload = loader('reloaded')
    t.equal(await i.cache.get(['o', 'x'], reload), 'reloaded')
    t.equal(await i.cache.get(['p', 'x'], reload), 'px', 'another scope is untouched')
  }
  const bToldAll = told(b, '*')
  await a.cache.invalidateAll()
  await bToldAll
  const all = loader('again')
  t.equal(await b.cache.get(['p', 'x'], all), 'again')
  t.equal(all.calls, 1)
})

t.test('a load that started before an invalidation leaves no stale entry behind (set-after-delete race)', async (t) => {
  const prefix = `test:${randomId()}:`
  const a = await instance(t, prefix)
  const b = await instance(t, prefix)
  let release!: () => void
  let started!: () => void
  const loadStarted = new Promise<void>((resolve) => { started = resolve })
  const gate = new Promise<void>((resolve) => { release = resolve })
  const slow = async () => {
    started()
    await gate
    return 'stale' // what the source said before the change
  }
  const reading = a.cache.get('k', slow)
  await loadStarted
  // The change is committed and invalidated on another instance while a's load is in flight.
  const aTold = told(a, 'k')
  await b.cache.invalidate('k')
  await aTold
  release()
  t.equal(await reading, 'stale', 'the caller that asked before the change gets the answer of its load')

  const fresh = loader('fresh')
  t.equal(await b.cache.get('k', fresh), 'fresh', 'Redis did not keep the stale answer')
  t.equal(fresh.calls, 1)
  t.equal(await a.cache.get('k', loader('never')), 'fresh', 'a did not keep it locally either')

  // The same race with the invalidation made by the loading instance itself.
  let releaseOwn!: () => void
  const ownGate = new Promise<void>((resolve) => { releaseOwn = resolve })
  const own = a.cache.get('k2', async () => {
    await ownGate
    return 'stale'
  })
  await a.cache.invalidate('k2')
  releaseOwn()
  await own
  const fresh2 = loader('fresh')
  t.equal(await b.cache.get('k2', fresh2), 'fresh')
  t.equal(await a.cache.get('k2', fresh2), 'fresh')
  t.equal(fresh2.calls, 1)
})

t.test('with Redis down lookups go to the loader, warn once, and invalidations do not throw', async (t) => {
  // Nothing listens on port 1: the connection is refused.
  const dead = new Redis('redis://127.0.0.1:1', { lazyConnect: true, maxRetriesPerRequest: 1 })
  dead.on('error', () => {})
  dead.connect().catch(() => {})
  t.teardown(() => dead.disconnect())
  const warnings: string[] = []
  const log: CacheLog = { warn: (_obj, msg) => warnings.push(msg), info: () => {} }
  const bus = new InvalidationBus(dead, dead, 'test:', silent)
  const clock = testClock()
  const cache = new SharedCache<string>({ name: 'test', redis: dead, prefix: 'test:', bus, log, localTtlMs: 1, sharedTtlSeconds: 60, now: clock.now })
  // A command sent to a Redis that is not connected waits in its offline queue: a lookup must send none.
  const sent: string[] = []
  const sendCommand = dead.sendCommand.bind(dead)
  dead.sendCommand = (command, stream) => {
    sent.push(command.name)
    return sendCommand(command, stream)
  }
  const load = loader('from-postgres')
  for (let i = 0; i < 5; i++) {
    t.equal(await cache.get('k', load), 'from-postgres')
    clock.advance(600) // past the local TTL; every second lookup is past the back-off from Redis too
  }
  t.same(sent, [], 'no lookup sent Redis a command to wait on')
  t.equal(load.calls, 5, 'each lookup past the local TTL reached the loader')
  t.equal(await cache.invalidate('k'), false, 'an invalidation that cannot reach Redis says so')
  t.equal(warnings.length, 1, 'one warning, not one per lookup')
})

t.test('an entry in use is refreshed ahead of its expiry: reads keep finding it without waiting, and pick up a new value', async (t) => {
  const prefix = `test:${randomId()}:`
  const clock = testClock()
  const a = await instance(t, prefix, { localTtlMs: 5000, now: clock.now })
  /** Resolves once the Redis commands sent so far have been answered, and what they started has run. */
  const settled = async () => {
    await a.redis.ping()
    await new Promise((resolve) => setImmediate(resolve))
  }
  let value = 'v1'
  let loads = 0
  const load = async () => {
    loads++
    return value
  }
  t.equal(await a.cache.get('k', load), 'v1')
  t.equal(a.cache.peek('k', load), 'v1', 'held right after the load')
  await settled() // the entry is in Redis
  // In the last fifth of its life a read answers at once and starts a refresh from Redis.
  clock.advance(3900)
  t.equal(a.cache.peek('k', load), 'v1', 'before four fifths of its life')
  await settled()
  clock.advance(300) // refreshes from 4 s, expires at 5 s
  t.equal(a.cache.peek('k', load), 'v1', 'answered from the entry while it refreshes')
  await settled()
  clock.advance(1200) // past the first entry's expiry
  t.equal(a.cache.peek('k', load), 'v1', 'still held after the first entry would have expired: the refresh renewed it')
  t.equal(loads, 1, 'the refresh read the entry from Redis, not the loader')
  // A peek without a loader never refreshes; an entry nobody reads expires as before.
  value = 'v2'
  await a.redis.del(`${prefix}sc:test:e:1:k:`) // the shared entry too, so the next load is the loader's
  clock.advance(3799) // the refresh renewed its life at 4.2 s: it ends at 9.2 s
  t.equal(a.cache.peek('k'), 'v1', 'held until the end of its renewed life')
  clock.advance(2)
  t.equal(a.cache.peek('k'), undefined, 'an entry not read near its expiry expires')
  t.equal(await a.cache.get('k', load), 'v2')
})

/** Runs `fn` counting the timers started meanwhile (global setTimeout, as lru-cache calls it). */
function timersStartedBy<R> (fn: () => R): { result: R; timers: number } {
  const real = globalThis.setTimeout
  let timers = 0
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    timers++
    return real(...args)
  }) as typeof setTimeout
  try {
    return { result: fn(), timers }
  } finally {
    globalThis.setTimeout = real
  }
}

t.test('a read of a held entry starts no timer, and entries still expire', async (t) => {
  const prefix = `test:${randomId()}:`
  const load = async () => 'v'
  // The process clock (no `now` given): the LRU once cached its clock reading for 1 ms with a timer.
  const real = await instance(t, prefix, { localTtlMs: 1000 })
  t.equal(await real.cache.get('k', load), 'v')
  await new Promise((resolve) => setTimeout(resolve, 5)) // any reading the LRU cached is forgotten
  const read = timersStartedBy(() => [real.cache.peek('k'), real.cache.peek('k'), real.cache.peek('k')])
  t.same(read.result, ['v', 'v', 'v'], 'held')
  t.equal(read.timers, 0, 'reading held entries started no timer')
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.equal(real.cache.peek('k'), undefined, 'expired after its local life on the process clock')

  // The injectable clock: held to the last millisecond of its life, gone after it.
  const clock = testClock()
  const a = await instance(t, `test:${randomId()}:`, { localTtlMs: 1000, now: clock.now })
  t.equal(await a.cache.get('k', load), 'v')
  clock.advance(999)
  t.equal(timersStartedBy(() => a.cache.peek('k')).timers, 0, 'no timer on the injected clock either')
  t.equal(a.cache.peek('k'), 'v', 'held within its life')
  clock.advance(2)
  t.equal(a.cache.peek('k'), undefined, 'expired past its life')
})
