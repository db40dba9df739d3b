import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { listErrors, reopenCluster, resolveCluster } from '../../../schemas/me-routes.ts'

/** Error clusters: list, resolve, re-open. */
const errors: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.dashboardService

  app.get('/v1/me/errors', { schema: listErrors }, async (request) => service.errorClusters(await app.readerOf(request), request.query))

  app.post('/v1/me/errors/:fingerprint/resolve', { schema: resolveCluster }, async (request) =>
    service.setResolved(await app.readerOf(request), request.params.fingerprint, true))

  app.delete('/v1/me/errors/:fingerprint/resolve', { schema: reopenCluster }, async (request) =>
    service.setResolved(await app.readerOf(request), request.params.fingerprint, false))
}

export default errors
