import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { LRUCache } from 'lru-cache'
import { unauthorized } from '../errors.ts'
import { hashSecret, type KeyIdentity } from '../storage/keys-repository.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest hook for ingestion: checks the API key and sets request.apiKey. */
    authenticateKey: (request: FastifyRequest) => Promise<void>
    /** Drops a key from this instance's cache and tells every other instance to do the same. */
    forgetKey: (secretHash: string) => Promise<void>
  }
  interface FastifyRequest {
    apiKey: KeyIdentity
  }
}

const MISSING = Symbol('missing')

/**
 * API-key identity for ingestion: SHA-256 of the secret → in-process LRU (entries live at most
 * CACHE_TTL_MS, and revocations are pushed to every instance over Redis) → Postgres.
 * Unknown secrets are cached too, so a flood of bad keys does not reach Postgres.
 */
export default fp(async function apiKeyAuth(app, opts: { cacheTtlMs: number }) {
  const cache = new LRUCache<string, KeyIdentity | typeof MISSING>({ max: 100_000, ttl: opts.cacheTtlMs })
  const loading = new Map<string, Promise<KeyIdentity | null>>()
  // Bumped on every invalidation, so a lookup that started before a revocation never caches its stale answer.
  let generation = 0

  async function lookup(hash: string): Promise<KeyIdentity | null> {
    const cached = cache.get(hash)
    if (cached !== undefined) return cached === MISSING ? null : cached
    let pending = loading.get(hash)
    if (!pending) {
      const started = generation
      pending = app.keys.findByHash(hash).finally(() => {
        if (loading.get(hash) === pending) loading.delete(hash)
      })
      loading.set(hash, pending)
      const found = await pending
      if (started === generation) cache.set(hash, found ?? MISSING)
      return found
    }
    return pending
  }

  app.decorateRequest('apiKey', null as unknown as KeyIdentity)
  app.decorate('authenticateKey', async function authenticateKey(request: FastifyRequest) {
    const header = request.headers.authorization
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null
    if (!match) throw unauthorized('missing_bearer')
    const secret = match[1]!
    if (!secret.startsWith('vk_')) throw unauthorized('invalid_key')
    const identity = await lookup(hashSecret(secret))
    if (!identity) throw unauthorized('invalid_key')
    if (identity.revoked) throw unauthorized('revoked_key')
    request.apiKey = identity
  })
  app.decorate('forgetKey', async function forgetKey(secretHash: string) {
    generation++
    loading.delete(secretHash)
    cache.delete(secretHash)
    await app.bus.publish('key', secretHash)
  })
  app.bus.on('key', (hash) => {
    generation++
    loading.delete(hash)
    cache.delete(hash)
  })
}, { name: 'api-key-auth', dependencies: ['postgres', 'redis'] })
