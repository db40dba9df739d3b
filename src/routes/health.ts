import type { FastifyPluginAsync } from 'fastify'
import pkg from '../../package.json' with { type: 'json' }

export const SERVICE_NAME = 'agent-telemetry'

/** GET /health: unauthenticated liveness with the running version. */
const health: FastifyPluginAsync = async (app) => {
  app.get('/health', {
    schema: {
      response: {
        200: {
          type: 'object',
          required: ['status', 'service', 'uptime', 'version'],
          properties: {
            status: { type: 'string' },
            service: { type: 'string' },
            uptime: { type: 'number' },
            version: { type: 'string' },
          },
        },
      },
    },
  }, async () => ({ status: 'ok', service: SERVICE_NAME, uptime: process.uptime(), version: pkg.version }))
}

export default health
