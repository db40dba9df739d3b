import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { health as schema } from '../../schemas/public-routes.ts'
import { HealthReport } from '../services/health-report.ts'

export { SERVICE_NAME } from '../services/health-report.ts'

/** GET /health: unauthenticated liveness with the running version and the ingest backlog; it does not query the stores. */
const health: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const report = new HealthReport(app.ingestLog, app.shipper, app.ingestion.pipeline.timings, app.routeSettings.degradedAfterMs)
  app.addHook('onClose', async () => report.close())
  app.get('/health', { schema }, async () => report.now())
}

export default health
