import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { listErrors, reopenCluster, resolveCluster } from '../../../../schemas/me-routes.ts'

/** Error clusters: list, resolve, re-open. */
const errors: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.dashboardService

  app.get('/errors', { schema: listErrors }, async (request) => service.errorClusters(await request.reader, request.query))

  app.post('/errors/:fingerprint/resolve', { schema: resolveCluster }, async (request) =>
    service.setResolved(await request.reader, request.params.fingerprint, true))

  app.delete('/errors/:fingerprint/resolve', { schema: reopenCluster }, async (request) =>
    service.setResolved(await request.reader, request.params.fingerprint, false))
}

export default errors
