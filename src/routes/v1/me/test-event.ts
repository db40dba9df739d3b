import type { FastifyPluginAsyncJsonSchemaToTs } from '@fastify/type-provider-json-schema-to-ts'
import { testEvent as schema } from '../../../../schemas/me-routes.ts'
import { sendTestEvent } from '../../../services/test-event.ts'

/** POST /v1/me/test-event: the dashboard's synthetic event. */
const testEvent: FastifyPluginAsyncJsonSchemaToTs = async (app) => {
  /** A synthetic event through the same ingest path, to the private placeholder agent. */
  app.post('/test-event', { schema }, async (request, reply) => reply.code(202).send(await sendTestEvent(app.agents, app.ingestion, request.user)))
}

export default testEvent
