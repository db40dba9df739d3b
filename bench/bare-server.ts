/**
 * The baseline: a bare Fastify route on this machine that parses the same JSON body and answers 202
 * with an acknowledgement-shaped body. What the service adds is measured against it.
 */
import Fastify from 'fastify'

const app = Fastify({ logger: false })
app.post('/v1/events', async (_request, reply) => reply.code(202).send({ id: 'evt_x', accepted: true, agentId: 'c', eventId: 'evt_x' }))
await app.listen({ port: Number(process.argv[2] ?? 0), host: '127.0.0.1' })
console.log('listening')
