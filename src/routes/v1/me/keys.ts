import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { notFound, validationFailed } from '../../../http-error.ts'
import { createKey, listKeys, revokeKey } from '../../../../schemas/me-routes.ts'
import { normalizeAllowedOrigins } from '../../../domain/allowed-origin.ts'

/** API keys: create (secret shown once), list (never the secret), revoke. */
const keys: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  app.get('/keys', { schema: listKeys }, async (request) => ({ keys: await app.keys.list(request.user.id) }))

  app.post('/keys', { schema: createKey }, async (request, reply) => {
    const { label, agentId, kind, allowedOrigins } = request.body
    const publishable = kind === 'publishable'
    if (publishable !== (allowedOrigins !== undefined)) {
      throw validationFailed([{ path: ['allowedOrigins'], message: publishable ? 'is required for a publishable key' : 'is allowed only for a publishable key' }])
    }
    const origins = publishable ? normalizeAllowedOrigins(allowedOrigins!) : null
    if (origins !== null && 'problems' in origins) throw validationFailed(origins.problems)
    if (agentId !== undefined && !(await app.agents.getOwned(request.user.id, agentId))) throw notFound()
    return reply.code(201).send(await app.keys.create(request.user.id, label, agentId ?? null, origins ? { allowedOrigins: origins.origins } : null))
  })

  app.delete('/keys/:id', { schema: revokeKey }, async (request, reply) => {
    // A revoked key is refused at once on every instance (plugins/cache-invalidation.ts).
    if (!(await app.keys.revoke(request.user.id, request.params.id))) throw notFound()
    return reply.code(204).send(null)
  })
}

export default keys
