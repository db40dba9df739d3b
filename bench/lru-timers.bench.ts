/**
 * What lru-cache's `ttlResolution` costs a TTL cache read at a request's pace:
 * `node --import tsx bench/lru-timers.bench.ts [--reads 3000 --caches 4 --rounds 3]`.
 * Each "request" reads one entry of each of `caches` caches (as a single event reads the key, agent,
 * price and user caches), the requests ~1.2 ms apart. With the default `ttlResolution: 1` a read more
 * than a millisecond after the last one caches the clock and starts a timer to forget it; with 0 it
 * reads the clock. Prints the process's CPU per request (the wait between requests costs both the
 * same), alternating the two settings in one run, and the ratio of each pair.
 */
import { parseArgs } from 'node:util'
import { LRUCache } from 'lru-cache'

const { values } = parseArgs({ options: { reads: { type: 'string', default: '3000' }, caches: { type: 'string', default: '4' }, rounds: { type: 'string', default: '3' } } })
const reads = Number(values.reads)
const cacheCount = Number(values.caches)

async function measure (ttlResolution: number): Promise<number> {
  const caches = Array.from({ length: cacheCount }, () => {
    const c = new LRUCache<string, { v: number }>({ max: 1000, ttl: 60_000, ttlResolution })
    c.set('k', { v: 1 })
    return c
  })
  let sum = 0
  const before = process.cpuUsage()
  for (let i = 0; i < reads; i++) {
    for (const c of caches) sum += c.get('k')!.v
    await new Promise((resolve) => setTimeout(resolve, 1.2))
  }
  const cpu = process.cpuUsage(before)
  if (sum !== reads * cacheCount) throw new Error('an entry expired')
  return (cpu.user + cpu.system) / reads
}

console.log(`lru-cache TTL reads at a request's pace — ${new Date().toISOString()} — ${reads} requests × ${cacheCount} caches, ~1.2 ms apart`)
await measure(1) // warm-up
for (let round = 1; round <= Number(values.rounds); round++) {
  const one = await measure(1)
  const zero = await measure(0)
  console.log(`round ${round}: ttlResolution 1: ${one.toFixed(1)} µs CPU per request; 0: ${zero.toFixed(1)} µs; 0 / 1 = ${(zero / one).toFixed(2)}`)
}
