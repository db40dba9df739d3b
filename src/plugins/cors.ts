import fp from 'fastify-plugin'

/** Every method a route of the API answers (HEAD with each GET); the CORS test checks the list against the routes. */
const API_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']

const PREFLIGHT_MAX_AGE_SECONDS = 600

/**
 * Paths a page of any origin may call with a publishable key (docs/api.md#publishable-keys): their
 * preflight is answered for every origin, since it carries no key to check; the request itself is
 * refused unless its Origin is one of its key's, and only then answered with CORS headers (by the route).
 */
const PUBLISHABLE_PATHS = new Set(['/v1/scores', '/v1/scores/batch'])

/**
 * Cross-origin access for the dashboard origins only; any other origin gets no CORS headers.
 *
 * Written here rather than with @fastify/cors because it runs on every ingestion request: the
 * library resolves its options per request (an object spread, a callback, a Vary header merge), about
 * 9 µs a request, 5-6 % of the ingestion thread under load, for requests that, coming from agents and
 * not browsers, mostly carry no Origin at all. Here such a request costs one header.
 * What it answers (tested in test/plugins/cors.test.ts and test/routes/v1/registry.test.ts):
 * - every response carries `Vary: Origin` (the CORS headers depend on it, so caches must key on it);
 * - a request from an allowed origin gets `Access-Control-Allow-Origin: <origin>` and
 *   `Access-Control-Expose-Headers: Retry-After`;
 * - an OPTIONS request from an allowed origin is a preflight: 204 with the methods, the request
 *   headers the API reads, and a max age, before any authentication runs;
 * - an OPTIONS request from any other origin, or without one, is routed like any unknown route (404),
 *   except a preflight of the paths publishable keys may call (PUBLISHABLE_PATHS).
 */
/** The response headers a page may read: when to retry, and whether a retry was answered from its first answer. */
export const EXPOSED_HEADERS = 'Retry-After, Idempotent-Replayed'

export default fp(async function cors (app, opts: { origins: string[] }) {
  const allowed = new Set(opts.origins)
  const allowMethods = [...API_METHODS, 'OPTIONS'].join(', ')

  app.addHook('onRequest', (request, reply, done) => {
    reply.header('vary', 'Origin')
    const origin = request.headers.origin
    if (origin === undefined) return done()
    if (!allowed.has(origin)) {
      if (request.method === 'OPTIONS' && PUBLISHABLE_PATHS.has(request.url.split('?', 1)[0]!)) {
        reply.code(204)
          .header('access-control-allow-origin', origin)
          .header('access-control-allow-methods', 'POST, OPTIONS')
          .header('access-control-allow-headers', 'Authorization, Content-Type, Idempotency-Key')
          .header('access-control-max-age', String(PREFLIGHT_MAX_AGE_SECONDS))
          .header('content-length', '0')
          .send()
        return
      }
      return done()
    }
    reply.header('access-control-allow-origin', origin)
    reply.header('access-control-expose-headers', EXPOSED_HEADERS)
    if (request.method !== 'OPTIONS') return done()
    reply
      .code(204)
      .header('access-control-allow-methods', allowMethods)
      .header('access-control-allow-headers', 'Authorization, Content-Type, Idempotency-Key, Last-Event-ID')
      .header('access-control-max-age', String(PREFLIGHT_MAX_AGE_SECONDS))
      .header('content-length', '0')
      .send()
  })

  // OPTIONS must be routed for the hook above to answer it; a preflight never reaches this handler.
  app.options('*', { schema: { hide: true } }, (_request, reply) => reply.callNotFound())
}, { name: 'cors' })
