import fp from 'fastify-plugin'
import fastifyCors from '@fastify/cors'

/** Cross-origin access for the dashboard origins only; any other origin gets no CORS headers. */
export default fp(async function cors(app, opts: { origins: string[] }) {
  const allowed = new Set(opts.origins)
  await app.register(fastifyCors, {
    origin: (origin, cb) => cb(null, origin !== undefined && allowed.has(origin)),
    methods: ['GET', 'POST', 'PATCH', 'DELETE', 'OPTIONS'],
    allowedHeaders: ['Authorization', 'Content-Type'],
    exposedHeaders: ['Retry-After'],
    maxAge: 600,
  })
}, { name: 'cors' })
