import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify'
import { rateLimited } from '../http-error.ts'
import type { RateLimiter } from '../storage/rate-limiter.ts'

export interface RouteLimit {
  /** The bucket a request counts toward (e.g. per user and route, per client address). */
  bucket: (request: FastifyRequest) => string
  /** Requests admitted per window (may depend on the request, e.g. reads and writes). */
  limit: number | ((request: FastifyRequest) => number)
  windowMs?: number
}

/**
 * The one way a route declares a request rate limit: an onRequest hook that takes one unit from the
 * request's bucket (GCRA in Redis) and answers 429 rate_limited + Retry-After when none is left.
 */
export function rateLimitHook (limiter: () => RateLimiter, opts: RouteLimit): onRequestAsyncHookHandler {
  return async function rateLimit (request) {
    const limit = typeof opts.limit === 'function' ? opts.limit(request) : opts.limit
    const { admitted, retryAfterMs } = await limiter().take(opts.bucket(request), limit, 1, opts.windowMs ?? 60_000)
    if (admitted === 0) throw rateLimited(retryAfterMs / 1000)
  }
}
