import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { rateLimited } from '../../errors.ts'

const PER_HOUR = 5

/** POST /v1/waitlist: one row per address; 5 requests per hour per client address. */
const waitlist: FastifyPluginAsync = async (app) => {
  app.post<{ Body: { email: string; source?: string; metadata?: Record<string, unknown> } }>('/v1/waitlist', {
    bodyLimit: 16 * 1024,
    onRequest: async (request: FastifyRequest) => {
      const { admitted, retryAfterMs } = await app.rateLimiter.take(`waitlist:${request.ip}`, PER_HOUR, 1, 3_600_000)
      if (admitted === 0) throw rateLimited(retryAfterMs / 1000)
    },
    schema: {
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['email'],
        properties: {
          email: { type: 'string', format: 'email', maxLength: 254 },
          // No unpaired UTF-16 surrogates: Postgres would store them as U+FFFD.
          source: { type: 'string', maxLength: 100, pattern: '^\\P{Cs}*$' },
          metadata: { type: 'object' },
        },
      },
      response: { 200: { type: 'object', properties: { ok: { type: 'boolean' } } } },
    },
  }, async (request) => {
    const { email, source, metadata } = request.body
    await app.registry.joinWaitlist(email.trim(), source ?? null, metadata ?? {})
    return { ok: true }
  })
}

export default waitlist
