import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { notFound } from '../../http-error.ts'
import { explorer, getPublicAgent, listPublicAgents, stats } from '../../../schemas/public-routes.ts'

/** Public registry reads: stats, the agent listing, agent profiles and the explorer. No auth. */
const registry: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  app.get('/stats', { schema: stats }, async () => app.publicService.stats())

  app.get('/agents', { schema: listPublicAgents }, async (request) => app.publicService.list(request.query))

  app.get('/agents/:identifier', { schema: getPublicAgent }, async (request) => {
    const agent = await app.publicService.profile(request.params.identifier)
    if (!agent) throw notFound()
    return agent
  })

  app.get('/explorer', { schema: explorer }, async () => app.publicService.explorer())
}

export default registry
