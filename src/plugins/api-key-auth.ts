import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { forbidden, unauthorized } from '../http-error.ts'
import { bearerToken } from '../auth/bearer.ts'
import { hashSecret, type KeyIdentity } from '../storage/keys-repository.ts'
import { KeyResolver } from '../cache/key-resolver.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Checks the request's API key and sets request.apiKey; throws 401. Synchronous when this
     * process holds the key's identity (the usual case under load), else a promise.
     */
    authenticateKey: (request: FastifyRequest) => void | Promise<void>
    /** Drops a key from the caches of this instance, Redis and every other instance (never throws). */
    forgetKey: (secretHash: string) => Promise<void>
  }
  interface FastifyRequest {
    apiKey: KeyIdentity
  }
  interface FastifyContextConfig {
    /** The route takes publishable keys (only POST /v1/scores and its batch); every other route refuses them with 403. */
    publishableKeys?: boolean
  }
}

/** The secret of an `Authorization: Bearer vk_…` header; throws 401 without one. */
function bearerSecret (header: string | undefined): string {
  const secret = bearerToken(header)
  if (!secret.startsWith('vk_')) throw unauthorized('invalid_key')
  return secret
}

function accept (request: FastifyRequest, identity: KeyIdentity | null): void {
  if (!identity) throw unauthorized('invalid_key')
  if (identity.revoked) throw unauthorized('revoked_key')
  if (identity.kind === 'publishable' && request.routeOptions.config.publishableKeys !== true) throw forbidden('publishable_key')
  request.apiKey = identity
}

/**
 * API-key identity for ingestion: SHA-256 of the secret → in-process LRU (CACHE_TTL_MS) → Redis
 * (SHARED_CACHE_TTL_SECONDS) → Postgres. A revocation is pushed to every instance at once.
 */
export default fp(async function apiKeyAuth (app, opts: { cacheTtlMs: number; sharedCacheTtlSeconds: number }) {
  const keys = new KeyResolver(app.keys, { ...app.sharedCacheBase, localTtlMs: opts.cacheTtlMs, sharedTtlSeconds: opts.sharedCacheTtlSeconds })

  app.decorateRequest('apiKey', null as unknown as KeyIdentity)
  app.decorate('authenticateKey', function authenticateKey (request: FastifyRequest): void | Promise<void> {
    const secretHash = hashSecret(bearerSecret(request.headers.authorization))
    const held = keys.peek(secretHash)
    if (held !== undefined) return accept(request, held)
    return keys.find(secretHash).then((identity) => accept(request, identity))
  })
  app.decorate('forgetKey', async function forgetKey (secretHash: string) {
    await keys.forget(secretHash)
  })
}, { name: 'api-key-auth', dependencies: ['postgres', 'redis'] })
