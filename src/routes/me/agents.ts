import type { FastifyPluginAsync } from 'fastify'
import { notFound } from '../../errors.ts'

const idParams = { type: 'object', properties: { id: { type: 'string', maxLength: 64 } } }

/** The caller's agents. */
const agents: FastifyPluginAsync = async (app) => {
  /** Soft delete: from now on ingestion for the agent answers 410 and reads hide it. */
  app.delete<{ Params: { id: string } }>('/v1/me/agents/:id', { schema: { params: idParams } }, async (request, reply) => {
    if (!(await app.agents.softDelete(request.user.id, request.params.id))) throw notFound()
    await app.forgetAgents()
    return reply.code(204).send()
  })
}

export default agents
