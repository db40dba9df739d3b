import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { unauthorized } from '../errors.ts'
import { hashSecret, type KeyIdentity } from '../storage/keys-repository.ts'
import { KeyResolver } from '../storage/key-resolver.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest hook for ingestion: checks the API key and sets request.apiKey. */
    authenticateKey: (request: FastifyRequest) => Promise<void>
    /** Drops a key from the caches of this instance, Redis and every other instance (never throws). */
    forgetKey: (secretHash: string) => Promise<void>
  }
  interface FastifyRequest {
    apiKey: KeyIdentity
  }
}

/**
 * API-key identity for ingestion: SHA-256 of the secret → in-process LRU (CACHE_TTL_MS) → Redis
 * (SHARED_CACHE_TTL_SECONDS) → Postgres. A revocation is pushed to every instance at once.
 */
export default fp(async function apiKeyAuth (app, opts: { cacheTtlMs: number; sharedCacheTtlSeconds: number }) {
  const keys = new KeyResolver(app.keys, { ...app.sharedCacheBase, localTtlMs: opts.cacheTtlMs, sharedTtlSeconds: opts.sharedCacheTtlSeconds })

  app.decorateRequest('apiKey', null as unknown as KeyIdentity)
  app.decorate('authenticateKey', async function authenticateKey (request: FastifyRequest) {
    const header = request.headers.authorization
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null
    if (!match) throw unauthorized('missing_bearer')
    const secret = match[1]!
    if (!secret.startsWith('vk_')) throw unauthorized('invalid_key')
    const identity = await keys.find(hashSecret(secret))
    if (!identity) throw unauthorized('invalid_key')
    if (identity.revoked) throw unauthorized('revoked_key')
    request.apiKey = identity
  })
  app.decorate('forgetKey', async function forgetKey (secretHash: string) {
    await keys.forget(secretHash)
  })
}, { name: 'api-key-auth', dependencies: ['postgres', 'redis'] })
