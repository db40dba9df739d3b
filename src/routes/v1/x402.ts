import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { x402 as schema } from '../../../schemas/public-routes.ts'

/** GET /v1/x402: third-party payment data for the configured chains, with stale fallback. */
const x402: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  app.get('/x402', { schema }, async () => ({ chains: await app.x402.available() }))
}

export default x402
