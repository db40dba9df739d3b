import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { createChannel, deleteChannel, listChannels, listDeliveries, patchChannel, rotateChannelSecret, testChannel } from '../../../../schemas/channel.ts'

/** Notification channels: create (a webhook's signing secret shown once), list, change, delete, test, delivery log. */
const channels: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.notifications.channels

  app.post('/channels', { schema: createChannel }, async (request, reply) =>
    reply.code(201).send(await service.create(request.user.id, request.body)))

  app.get('/channels', { schema: listChannels }, async (request) => service.list(request.user.id))

  app.patch('/channels/:id', { schema: patchChannel }, async (request) => service.update(request.user.id, request.params.id, request.body))

  app.delete('/channels/:id', { schema: deleteChannel }, async (request, reply) => {
    await service.delete(request.user.id, request.params.id)
    return reply.code(204).send(null)
  })

  app.post('/channels/:id/test', { schema: testChannel }, async (request, reply) =>
    reply.code(202).send(await service.test(request.user.id, request.params.id)))

  app.post('/channels/:id/rotate-secret', { schema: rotateChannelSecret }, async (request) =>
    service.rotateSecret(request.user.id, request.params.id, request.body?.previousValidHours))

  app.get('/channels/:id/deliveries', { schema: listDeliveries }, async (request) =>
    service.deliveries(request.user.id, request.params.id, request.query))
}

export default channels
