import fp from 'fastify-plugin'
import fastifyCors from '@fastify/cors'

/** Every method a route of the API answers (HEAD with each GET); the CORS test checks the list against the routes. */
export const API_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']

/** Cross-origin access for the dashboard origins only; any other origin gets no CORS headers. */
export default fp(async function cors (app, opts: { origins: string[] }) {
  const allowed = new Set(opts.origins)
  await app.register(fastifyCors, {
    origin: (origin, cb) => cb(null, origin !== undefined && allowed.has(origin)),
    methods: [...API_METHODS, 'OPTIONS'],
    allowedHeaders: ['Authorization', 'Content-Type'],
    exposedHeaders: ['Retry-After'],
    maxAge: 600,
  })
}, { name: 'cors' })
