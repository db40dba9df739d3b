import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { notFound } from '../../../http-error.ts'
import { deleteAgent, getAgent, listAgents, patchAgent } from '../../../../schemas/me-routes.ts'

/** The caller's agents: list with KPIs, profile with a 30-day calendar, rename or publish, soft delete. */
const agents: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.dashboardService

  app.get('/agents', { schema: listAgents }, async (request) => service.agentList(await request.reader, request.query))

  app.get('/agents/:id', { schema: getAgent }, async (request) => service.agentProfile(await request.reader, request.params.id))

  /** Ingestion resolves a new name at once on every instance; publishing shows in the public reads at once (plugins/cache-invalidation.ts). */
  app.patch('/agents/:id', { schema: patchAgent }, async (request) =>
    service.updateAgent(request.user.id, request.params.id, request.body))

  /**
   * Soft delete: from now on ingestion for the agent answers 410 and reads hide it. Its open alerts
   * are cleared first, while the agent is still there to name in their `alert.resolved`.
   */
  app.delete('/agents/:id', { schema: deleteAgent }, async (request, reply) => {
    // Scoped by the user: another user's agent id clears nothing here, and is a 404 below.
    await app.alerts.clearOfAgent(request.user.id, request.params.id)
    if (!(await app.agents.softDelete(request.user.id, request.params.id))) throw notFound()
    return reply.code(204).send(null)
  })
}

export default agents
