/**
 * The baseline: bare Fastify routes on this machine that parse the same JSON bodies as the service
 * and answer with acknowledgement-shaped bodies. What the service adds is measured against them.
 */
import Fastify from 'fastify'

const ack = { id: 'evt_x', accepted: true, agentId: 'c', eventId: 'evt_x' }
const app = Fastify({ logger: false, bodyLimit: 5 * 1024 * 1024 })
app.post('/v1/events', async (_request, reply) => reply.code(202).send(ack))
app.post<{ Body: { events: unknown[] } }>('/v1/events/batch', async (request, reply) =>
  reply.code(207).send({ results: request.body.events.map(() => ({ status: 202, ...ack })) }))
await app.listen({ port: Number(process.argv[2] ?? 0), host: '127.0.0.1' })
console.log('listening')
