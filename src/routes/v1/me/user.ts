import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { conflict } from '../../../http-error.ts'
import type { User } from '../../../storage/users-repository.ts'
import { getMe, patchMe } from '../../../../schemas/me-routes.ts'

function publicUser (u: User) {
  return { id: u.id, privyId: u.privyId, email: u.email, wallet: u.wallet, handle: u.handle, tier: u.tier, createdAt: u.createdAt }
}

/** GET /v1/me and PATCH /v1/me { handle }: both answer the caller in the same body, usage included. */
const user: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const body = async (u: User) => ({ ...publicUser(u), usage: await app.users.monthlyUsage(u.id) })

  app.get('', { schema: getMe }, async (request) => body(request.user))

  app.patch('', { schema: patchMe }, async (request) => {
    const updated = await app.users.updateHandle(request.user.id, request.body.handle)
    if (updated === 'taken') throw conflict('handle_taken', 'this handle is taken by another user; choose another')
    return body(updated)
  })
}

export default user
