import t from 'tap'
import { createServer, type Server } from 'node:http'
import { createServer as createTcpServer, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import { createClient, ClickHouseLogLevel } from '@clickhouse/client'
import errors from '../../src/plugins/error-handler.ts'

// What a dashboard read answers when a ClickHouse server stalls or says it cannot serve now: a 503
// with Retry-After, as for Postgres and Redis, never a 500. The errors are the real client's, from
// local servers standing for the ClickHouse endpoint.

async function listen (server: Server | ReturnType<typeof createTcpServer>): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

// Takes connections and never answers (a stalled server, or a proxy in front of one).
const sockets: Socket[] = []
const stalled = createTcpServer((socket) => { sockets.push(socket) })
const stalledUrl = await listen(stalled)
// Answers every query with a ClickHouse exception of the type the path names.
const failing = createServer((request, response) => {
  const [code, type] = request.url!.includes('network') ? ['210', 'NETWORK_ERROR'] : ['62', 'SYNTAX_ERROR']
  response.writeHead(500, { 'x-clickhouse-exception-code': code, 'content-type': 'text/plain' })
  response.end(`Code: ${code}. DB::Exception: the server says so. (${type}) (version 26.7)\n`)
})
const failingUrl = await listen(failing)
t.teardown(() => {
  for (const s of sockets) s.destroy()
  stalled.close()
  failing.close()
})

const app = Fastify({ logger: false })
await app.register(errors)
const clients = {
  stalled: createClient({ url: stalledUrl, request_timeout: 300, max_open_connections: 1, log: { level: ClickHouseLogLevel.OFF } }),
  network: createClient({ url: `${failingUrl}/network`, log: { level: ClickHouseLogLevel.OFF } }),
  syntax: createClient({ url: `${failingUrl}/syntax`, log: { level: ClickHouseLogLevel.OFF } }),
}
t.teardown(async () => { for (const c of Object.values(clients)) await c.close() })
app.get<{ Params: { which: keyof typeof clients } }>('/read/:which', async (request) => {
  const rs = await clients[request.params.which].query({ query: 'SELECT 1', format: 'JSONEachRow' })
  return rs.json()
})
await app.ready()
t.teardown(() => app.close())

t.test('a stalled ClickHouse (the client\'s request timeout) is a 503 with Retry-After', async (t) => {
  const res = await app.inject({ url: '/read/stalled' })
  t.equal(res.statusCode, 503, res.body)
  t.equal(res.headers['retry-after'], '1')
  t.equal(res.json().error, 'unavailable')
})

t.test('a ClickHouse server that cannot serve now (NETWORK_ERROR) is a 503; a wrong query stays a 500', async (t) => {
  const network = await app.inject({ url: '/read/network' })
  t.equal(network.statusCode, 503, network.body)
  t.equal(network.headers['retry-after'], '1')
  const syntax = await app.inject({ url: '/read/syntax' })
  t.equal(syntax.statusCode, 500, 'a bug of ours is no outage')
  t.equal(syntax.json().error, 'internal_error')
})
