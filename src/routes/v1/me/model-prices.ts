import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { deleteModelPrice, listModelPrices, putModelPrice } from '../../../../schemas/model-price.ts'

/** Model prices the caller sets: list (with the models still unpriced), set one, remove one. */
const modelPrices: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  const service = app.modelPricesService

  app.get('/model-prices', { schema: listModelPrices }, async (request) => service.list(await request.reader))

  app.put('/model-prices/:model', { schema: putModelPrice }, async (request) =>
    service.put(request.user.id, request.params.model, request.body))

  app.delete('/model-prices/:model', { schema: deleteModelPrice }, async (request, reply) => {
    await service.remove(request.user.id, request.params.model)
    return reply.code(204).send(null)
  })
}

export default modelPrices
