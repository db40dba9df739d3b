import type { FastifyPluginAsync } from 'fastify'
import { notFound } from '../../errors.ts'

const apiKey = { $ref: 'api-key.json#' }


/** API keys: create (secret shown once), list (never the secret), revoke. */
const keys: FastifyPluginAsync = async (app) => {
  app.get('/v1/me/keys', {
    schema: { response: { 200: { type: 'object', properties: { keys: { type: 'array', items: apiKey } } } } },
  }, async (request) => ({ keys: await app.keys.list(request.user.id) }))

  app.post<{ Body: { label: string; agentId?: string } }>('/v1/me/keys', {
    schema: {
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['label'],
        properties: {
          label: { type: 'string', minLength: 1, maxLength: 100 },
          agentId: { type: 'string', pattern: '^c[a-z0-9]{24}$' },
        },
      },
      response: { 201: apiKey },
    },
  }, async (request, reply) => {
    const { label, agentId } = request.body
    if (agentId !== undefined && !(await app.agents.getOwned(request.user.id, agentId))) throw notFound()
    const created = await app.keys.create(request.user.id, label, agentId ?? null)
    return reply.code(201).send(created)
  })

  app.delete<{ Params: { id: string } }>('/v1/me/keys/:id', {
    schema: { params: { type: 'object', properties: { id: { type: 'string', maxLength: 64 } } } },
  }, async (request, reply) => {
    const hash = await app.keys.revoke(request.user.id, request.params.id)
    if (!hash) throw notFound()
    await app.forgetKey(hash)
    return reply.code(204).send()
  })
}

export default keys
