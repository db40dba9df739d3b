import type { FastifyPluginAsync } from 'fastify'
import type { User } from '../../storage/users-repository.ts'

const userResponse = { $ref: 'user.json#' }


export function publicUser(u: User) {
  return { id: u.id, privyId: u.privyId, email: u.email, wallet: u.wallet, handle: u.handle, tier: u.tier, createdAt: u.createdAt }
}

/** GET /v1/me and PATCH /v1/me { handle }. */
const user: FastifyPluginAsync = async (app) => {
  app.get('/v1/me', { schema: { response: { 200: userResponse } } }, async (request) => ({
    ...publicUser(request.user),
    usage: await app.users.monthlyUsage(request.user.id),
  }))

  app.patch<{ Body: { handle: string } }>('/v1/me', {
    schema: {
      body: {
        type: 'object',
        additionalProperties: false,
        required: ['handle'],
        properties: {
          handle: { type: 'string', pattern: '^[A-Za-z0-9_](?:[A-Za-z0-9_-]{1,30})[A-Za-z0-9_]$', description: '3 to 32 letters, digits, _ or -; not starting or ending with -' },
        },
      },
      response: { 200: userResponse },
    },
  }, async (request) => {
    const updated = await app.users.updateHandle(request.user.id, request.body.handle)
    await app.bus.publish('user', updated.privyId)
    return publicUser(updated)
  })
}

export default user
