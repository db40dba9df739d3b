import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { health as schema } from '../../schemas/public-routes.ts'

/** GET /health: unauthenticated liveness with the running version and the ingest backlog; it does not query the stores. */
const health: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  app.get('/health', { schema }, async () => app.healthReport.now())
}

export default health
