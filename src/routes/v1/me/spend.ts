import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { spend as schema } from '../../../../schemas/me-routes.ts'

/** Spend summary from the daily rollup. */
const spend: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  app.get('/spend-summary', { schema }, async (request) => app.dashboardService.spendSummary(await request.reader, request.query.days))
}

export default spend
