import { randomBytes } from 'node:crypto'
import { SingleFlight } from './single-flight.ts'
import type { Redis, Result } from 'ioredis'
import { LRUCache } from 'lru-cache'

/** What the cache needs of the invalidation bus (InvalidationBus has this shape). */
interface CacheBus {
  on(topic: string, handler: (id: string) => void): void
  publish(topic: string, id: string): Promise<void>
}

/** What the cache logs: one warning when Redis becomes unreachable, one line when it is back. */
export interface CacheLog {
  warn(obj: object, msg: string): void
  info(obj: object, msg: string): void
}

export interface SharedCacheOptions {
  /** Names the cache in Redis keys and on the bus; one per kind of entry ('key', 'agent'). */
  name: string
  redis: Redis
  /** REDIS_PREFIX. */
  prefix: string
  bus: CacheBus
  log: CacheLog
  /** How long this process serves an entry without asking Redis (CACHE_TTL_MS). */
  localTtlMs: number
  /** How long an entry lives in Redis (SHARED_CACHE_TTL_SECONDS). */
  sharedTtlSeconds: number
  /** How long a negative answer (the loader found nothing) lives in Redis; default min(60, sharedTtlSeconds). */
  missingTtlSeconds?: number
  /** Most entries kept in this process. */
  max?: number
  /** A Redis command slower than this counts as a failure: the lookup goes to the loader. */
  redisTimeoutMs?: number
  /** The clock (ms) that local lifetimes, refreshes and Redis back-offs are measured on; default Date.now. */
  now?: () => number
}

/**
 * A key: a string is its own scope; `[scope, id]` puts an entry in a scope, so that one
 * invalidation of the scope drops every entry in it (all the agent names of one owner). The scope
 * '*' is reserved (it means every scope).
 */
export type CacheKey = string | readonly [scope: string, id: string]

const MISSING = Symbol('missing')

/** A key's name in the local LRU: scope, NUL, id (dropLocal removes a scope by this prefix). */
function localKeyOf (key: CacheKey): string {
  return typeof key === 'string' ? `${key}\u0000` : `${key[0]}\u0000${key[1]}`
}
/** Version of a scope (or of the whole cache) that was never invalidated, or whose version key expired. */
const INITIAL = '0'
/** While Redis fails, lookups skip it for this long before trying it again. */
const RETRY_REDIS_MS = 1000
/** At most one warning about Redis per this interval. */
const WARN_EVERY_MS = 60_000

/**
 * Stores an entry only if neither version changed since the caller read them before its load: an
 * invalidation that ran meanwhile wins, so a slow load never puts its stale answer in Redis.
 */
const FILL = `
if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then return 0 end
if (redis.call('GET', KEYS[2]) or '0') ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[4])
return 1
`

declare module 'ioredis' {
  interface RedisCommander<Context> {
    sharedCacheFill(all: string, scope: string, entry: string, allVersion: string, scopeVersion: string, json: string, ttlSeconds: number): Result<number, Context>
  }
}

interface Local<T> {
  value: T | typeof MISSING
  /** From then on a read also starts a refresh from Redis in the background (once). */
  refreshAt: number
  refreshing: boolean
}

/** An entry read in the last part of its local life is refreshed ahead of its expiry. */
const REFRESH_AT_SHARE_OF_TTL = 0.8
interface Stored<T> { v: string; d: T | null }

/** The invalidation bus topic of the cache named `name`: its scope (`*`: all) is published there when dropped. */
export function invalidationTopic (name: string): string {
  return `cache-${name}`
}

/**
 * Read-through cache shared by every instance: in-process LRU (entries live `localTtlMs`) → Redis
 * (a JSON entry, `sharedTtlSeconds`) → the loader, whose answer (null included) is stored in both.
 * Concurrent misses for one key in a process share one Redis read and one load. An entry read in
 * the last fifth of its local life is refreshed in the background (Redis, else the loader) while the
 * read is answered from it, so a key in constant use never makes a request wait at its expiry; an
 * entry is still never served past `localTtlMs`.
 *
 * Invalidation. Every entry in Redis is tagged with the versions of its cache and of its scope read
 * (in the same MGET as the entry) before its load; a read takes an entry only if its tag matches
 * the current versions. `invalidate(scope)` replaces the scope's version with a fresh random token
 * (one SET), so every entry of the scope stops matching at once, and then tells every process over
 * the bus to drop its local copies. So a load that raced an invalidation (it read the versions
 * before, and writes after) can only store an entry tagged with the old version, which no read
 * takes; the fill also checks the versions atomically (Lua) and then stores nothing, so a stale
 * answer never even overwrites a fresh one. Locally, an answer is kept only if no invalidation
 * reached this process during its load.
 *
 * Redis down. Lookups go to the loader (one warning, then quiet) and entries are kept locally only.
 * An invalidation that cannot reach Redis is retried when Redis is back (while this process lives);
 * failing that, an entry written before the change is served at most until it expires in Redis:
 * `sharedTtlSeconds` after it was written, plus `localTtlMs`.
 */
export class SharedCache<T> {
  private readonly local: LRUCache<string, Local<T>>
  private readonly loading = new SingleFlight<T | null>()
  /** Bumped by every invalidation seen here, so a load that started before one is not kept locally. */
  private generation = 0
  /** Scopes ('*' for all) whose invalidation has not reached Redis yet. */
  private readonly pending = new Set<string>()
  private readonly keyPrefix: string
  private readonly topic: string
  private readonly missingTtlSeconds: number
  private readonly redisTimeoutMs: number
  private skipRedisUntil = 0
  private redisFailing = false
  private lastWarning = -Infinity
  private readonly now: () => number

  constructor (private readonly opts: SharedCacheOptions) {
    this.now = opts.now ?? Date.now
    // The LRU's expiry reads the same clock, at each check. `ttlResolution: 0` reads the clock at
    // every check rather than caching a reading for 1 ms: the cached reading costs a timer (a
    // `setTimeout` to forget it) on the first read of every millisecond, which was 4 % of the main
    // thread under single-event load; a clock reading costs far less.
    const clock = opts.now && { now: opts.now }
    this.local = new LRUCache({ max: opts.max ?? 100_000, ttl: Math.max(opts.localTtlMs, 1), ttlResolution: 0, ...(clock && { perf: clock }) })
    this.keyPrefix = `${opts.prefix}sc:${opts.name}:`
    this.topic = invalidationTopic(opts.name)
    this.missingTtlSeconds = opts.missingTtlSeconds ?? Math.min(60, opts.sharedTtlSeconds)
    this.redisTimeoutMs = opts.redisTimeoutMs ?? 500
    opts.redis.defineCommand('sharedCacheFill', { numberOfKeys: 3, lua: FILL })
    opts.bus.on(this.topic, (scope) => this.dropLocal(scope))
    opts.redis.on('ready', () => {
      this.skipRedisUntil = 0
      void this.flushPending()
    })
  }

  /** The value for a key: from this process, else from Redis, else from `load` (null: there is none). */
  async get (key: CacheKey, load: () => Promise<T | null>): Promise<T | null> {
    const held = this.peek(key, load)
    if (held !== undefined) return held
    return this.fetch(key, localKeyOf(key), load)
  }

  /**
   * What this process holds for a key, without waiting (the ingestion hot path's synchronous
   * lookup): the value, null when there is none, undefined when this process does not know (`get`).
   * With `load`, an entry near its expiry is refreshed in the background.
   */
  peek (key: CacheKey, load?: () => Promise<T | null>): T | null | undefined {
    const localKey = localKeyOf(key)
    const hit = this.local.get(localKey)
    if (hit === undefined) return undefined
    if (load && !hit.refreshing && this.now() >= hit.refreshAt) {
      // Once per entry: a refresh that fails leaves the entry to expire, and the next read to load it.
      hit.refreshing = true
      this.fetch(key, localKey, load).catch(() => {})
    }
    return hit.value === MISSING ? null : hit.value
  }

  /**
   * Drops one scope's entries here, in Redis and on every process sharing the Redis. Never throws;
   * false when Redis could not be told (retried when it is back, while this process lives).
   */
  async invalidate (scope: string): Promise<boolean> {
    this.dropLocal(scope)
    return this.publishInvalidation(scope)
  }

  /** Drops every entry of this cache, everywhere; false as for `invalidate`. */
  async invalidateAll (): Promise<boolean> {
    this.dropLocal('*')
    return this.publishInvalidation('*')
  }

  /** Reads a key through Redis, else `load`; concurrent reads of one key in this process share one. */
  private fetch (key: CacheKey, localKey: string, load: () => Promise<T | null>): Promise<T | null> {
    const [scope, id] = typeof key === 'string' ? [key, ''] : key
    return this.loading.run(localKey, () => this.readThrough(scope, id, localKey, load))
  }

  private async readThrough (scope: string, id: string, localKey: string, load: () => Promise<T | null>): Promise<T | null> {
    const started = this.generation
    const keys = [this.allVersionKey(), this.scopeVersionKey(scope), this.entryKey(scope, id)] as const
    let versions: [string, string] | null = null
    const read = await this.redisCall(() => this.opts.redis.mget(...keys))
    if (read) {
      versions = [read[0] ?? INITIAL, read[1] ?? INITIAL]
      const stored = read[2] ? parseStored<T>(read[2]) : null
      if (stored && stored.v === `${versions[0]} ${versions[1]}`) {
        this.keepLocal(started, localKey, stored.d)
        return stored.d
      }
    }
    const value = await load()
    this.keepLocal(started, localKey, value)
    if (versions) {
      const json = JSON.stringify({ v: `${versions[0]} ${versions[1]}`, d: value } satisfies Stored<T>)
      const ttl = value === null ? this.missingTtlSeconds : this.opts.sharedTtlSeconds
      await this.redisCall(() => this.opts.redis.sharedCacheFill(...keys, versions[0], versions[1], json, ttl))
    }
    return value
  }

  private keepLocal (started: number, localKey: string, value: T | null): void {
    if (started === this.generation) {
      this.local.set(localKey, { value: value ?? MISSING, refreshAt: this.now() + this.opts.localTtlMs * REFRESH_AT_SHARE_OF_TTL, refreshing: false })
    }
  }

  private dropLocal (scope: string): void {
    this.generation++
    if (scope === '*') {
      this.local.clear()
      this.loading.forget()
      return
    }
    const start = `${scope}\u0000`
    // Invalidations are rare (a revocation, a rename): a scan of the local entries is cheap enough.
    for (const key of [...this.local.keys()].filter((k) => k.startsWith(start))) this.local.delete(key)
    this.loading.forget((key) => key.startsWith(start))
  }

  private async publishInvalidation (scope: string): Promise<boolean> {
    const key = scope === '*' ? this.allVersionKey() : this.scopeVersionKey(scope)
    // A fresh random token rather than INCR: a version key that expired and was created again can
    // never come back to a value an old entry carries. It outlives every entry written under the
    // previous version, so those never match again.
    const token = randomBytes(9).toString('base64url')
    const set = await this.redisCall(() => this.opts.redis.set(key, token, 'EX', this.opts.sharedTtlSeconds * 2), true)
    // The SET goes first on the same connection: an instance told over the bus reads the new version.
    const published = set !== null && (await this.redisCall(() => this.opts.bus.publish(this.topic, scope).then(() => true), true)) === true
    if (published) this.pending.delete(scope)
    else this.pending.add(scope)
    return published
  }

  private async flushPending (): Promise<void> {
    for (const scope of [...this.pending]) {
      await this.publishInvalidation(scope)
      if (this.pending.has(scope)) return // Redis failed again; the next recovery retries.
    }
  }

  /**
   * Runs a Redis command; null when Redis failed or was too slow. After a failure lookups skip Redis
   * for a while; invalidations (`always`) try it whenever the connection is up.
   */
  private async redisCall<R>(command: () => Promise<R>, always = false): Promise<R | null> {
    if ((!always && this.now() < this.skipRedisUntil) || this.opts.redis.status !== 'ready') {
      this.redisFailed(new Error(`Redis connection is ${this.opts.redis.status}`))
      return null
    }
    let timer: NodeJS.Timeout | undefined
    try {
      const timeout = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not answer within ${this.redisTimeoutMs} ms`)), this.redisTimeoutMs)
      })
      const result = await Promise.race([command(), timeout])
      if (this.redisFailing) {
        this.redisFailing = false
        this.opts.log.info({ cache: this.opts.name }, 'shared cache: Redis answers again')
        void this.flushPending()
      }
      return result
    } catch (err) {
      this.redisFailed(err)
      return null
    } finally {
      clearTimeout(timer)
    }
  }

  private redisFailed (err: unknown): void {
    if (this.now() >= this.skipRedisUntil) this.skipRedisUntil = this.now() + RETRY_REDIS_MS
    this.redisFailing = true
    if (this.now() - this.lastWarning < WARN_EVERY_MS) return
    this.lastWarning = this.now()
    this.opts.log.warn({ err, cache: this.opts.name }, 'shared cache: Redis unreachable, reading from the source until it is back')
  }

  private allVersionKey (): string {
    return `${this.keyPrefix}v`
  }

  private scopeVersionKey (scope: string): string {
    return `${this.keyPrefix}v:${scope}`
  }

  private entryKey (scope: string, id: string): string {
    // The scope's length keeps ('a:b', 'c') and ('a', 'b:c') apart.
    return `${this.keyPrefix}e:${scope.length}:${scope}:${id}`
  }
}

function parseStored<T> (json: string): Stored<T> | null {
  try {
    return JSON.parse(json) as Stored<T>
  } catch {
    return null
  }
}
