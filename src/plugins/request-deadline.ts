import fp from 'fastify-plugin'
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'

/**
 * Keeps the request timeout during a graceful close. Node enforces `requestTimeout` only while the
 * server is open (close() stops its periodic check), so a client stuck sending its body would hold
 * the shutdown until the socket idle timeout. When the app closes, a connection whose request has
 * still not been fully received `requestTimeoutMs` later is destroyed; requests already received
 * keep their answers, and idle connections are closed by Fastify at once.
 */
export default fp(async function requestDeadline (app, opts: { requestTimeoutMs: number }) {
  const sockets = new Set<Socket>()
  const current = new WeakMap<Socket, IncomingMessage>()
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  app.server.on('request', (request: IncomingMessage) => current.set(request.socket, request))
  app.addHook('preClose', async () => {
    setTimeout(() => {
      for (const socket of sockets) {
        if (!current.get(socket)?.complete) socket.destroy()
      }
    }, opts.requestTimeoutMs).unref()
  })
}, { name: 'request-deadline' })
