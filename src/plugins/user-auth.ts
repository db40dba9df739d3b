import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { createRemoteJWKSet, jwtVerify, errors as joseErrors, type JWTVerifyGetKey } from 'jose'
import { LRUCache } from 'lru-cache'
import type { Config } from '../config.ts'
import { HttpError, unauthorized } from '../http-error.ts'
import { bearerToken } from '../auth/bearer.ts'
import { loadLocalSigningKey, LOCAL_ALG, LOCAL_AUDIENCE, LOCAL_ISSUER } from '../auth/local-signing-key.ts'
import type { User } from '../storage/users-repository.ts'
import { isWellFormed } from '../domain/input-rules.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest hook for /v1/me/*: verifies the dashboard JWT and sets request.user. */
    authenticateUser: (request: FastifyRequest) => Promise<void>
  }
  interface FastifyRequest {
    user: User
    /** When the caller's dashboard token expires (its `exp`, unix ms): a live stream ends then. */
    tokenExpiresAt: number | undefined
  }
}

const PROVIDER_ALGORITHMS = ['ES256', 'RS256']

/**
 * Dashboard identity. With AUTH_JWKS_URL set, tokens are verified against the provider's JWKS,
 * issuer and audience; otherwise against the local signing key under DATA_DIR. Exactly one of the
 * two is loaded, so local tokens are never accepted when a provider is configured.
 */
export default fp(async function userAuth (app, opts: { auth: Config['auth']; dataDir: string; cacheTtlMs: number }) {
  let key: JWTVerifyGetKey | Awaited<ReturnType<typeof loadLocalSigningKey>>['publicKey']
  let issuer: string
  let audience: string
  let algorithms: string[]
  const remote = 'jwksUrl' in opts.auth
  if ('jwksUrl' in opts.auth) {
    key = createRemoteJWKSet(new URL(opts.auth.jwksUrl), { timeoutDuration: 3000, cooldownDuration: 30_000 })
    issuer = opts.auth.issuer
    audience = opts.auth.audience
    algorithms = PROVIDER_ALGORITHMS
  } else {
    key = (await loadLocalSigningKey(opts.dataDir)).publicKey
    issuer = LOCAL_ISSUER
    audience = LOCAL_AUDIENCE
    // Only the key's own algorithm: a token naming another (RS256, HS256, none) is refused as invalid
    // before the key is used, rather than failing on a key of the wrong type.
    algorithms = [LOCAL_ALG]
    app.log.info('dashboard auth: local signing key (no AUTH_JWKS_URL); make tokens with `npm run token -- <name>`')
  }
  const users = new LRUCache<string, User>({ max: 10_000, ttl: opts.cacheTtlMs })

  app.decorateRequest('user', null as unknown as User)
  app.decorateRequest('tokenExpiresAt', undefined)
  app.decorate('authenticateUser', async function authenticateUser (request: FastifyRequest) {
    const token = bearerToken(request.headers.authorization)
    let subject: string
    try {
      const { payload } = await jwtVerify(token, key as JWTVerifyGetKey, {
        issuer,
        audience,
        algorithms,
        requiredClaims: ['sub', 'exp'],
      })
      // The subject becomes a key in Postgres and in caches: a name of 1 to 255 characters that Postgres
      // stores as sent (no NUL, no lone surrogate), never a number or an object turned into text.
      const sub: unknown = payload.sub
      if (typeof sub !== 'string' || sub.length === 0 || sub.length > 255 || sub.includes('\u0000') || !isWellFormed(sub)) {
        throw new joseErrors.JWTClaimValidationFailed('sub is not a name of 1 to 255 characters', payload, 'sub', 'check_failed')
      }
      subject = sub
      request.tokenExpiresAt = typeof payload.exp === 'number' ? payload.exp * 1000 : undefined
    } catch (err) {
      // A timeout or a failed fetch of the provider's keys is ours to report, not the caller's fault.
      // The local key is always at hand, so in local mode every failure is the token's.
      if (remote && (err instanceof joseErrors.JWKSTimeout || !(err instanceof joseErrors.JOSEError))) {
        request.log.error({ err }, 'identity provider keys unreachable')
        throw new HttpError(503, 'auth_unavailable', { message: 'identity provider keys unreachable, retry later' }, { 'retry-after': '5' })
      }
      // jose checks the time claims only once the signature holds, so saying "expired" reveals nothing to a forger.
      throw unauthorized(err instanceof joseErrors.JWTExpired ? 'token_expired' : 'invalid_token')
    }
    let user = users.get(subject)
    if (!user) {
      user = await app.users.upsertBySubject(subject)
      users.set(subject, user)
    }
    request.user = user
  })
  app.bus.on('user', (subject) => users.delete(subject))
}, { name: 'user-auth', dependencies: ['postgres', 'redis'] })
