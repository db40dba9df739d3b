import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { waitlist as schema } from '../../../schemas/public-routes.ts'
import { rateLimitHook } from '../../plugins/rate-limit.ts'

const PER_HOUR = 5

/** POST /v1/waitlist: one row per address; 5 requests per hour per client address. */
const waitlist: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  app.post('/waitlist', {
    bodyLimit: 16 * 1024,
    onRequest: rateLimitHook(() => app.rateLimiter, { bucket: (request) => `waitlist:${request.ip}`, limit: PER_HOUR, windowMs: 3_600_000 }),
    schema,
  }, async (request) => {
    const { email, source, metadata } = request.body
    await app.registry.joinWaitlist(email.trim(), source ?? null, metadata ?? {})
    return { ok: true as const }
  })
}

export default waitlist
