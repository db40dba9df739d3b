import t from 'tap'
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { once } from 'node:events'
import { buildApp } from '../src/app.ts'
import { createPool, withDefaultUser } from '../src/storage/postgres.ts'
import { loadLocalSigningKey, signLocalToken } from '../src/auth/local-signing-key.ts'
import { newUser, randomId, testConfig, TEST_DATA_DIR, TEST_DATABASE_URL } from './helpers/app.ts'

/**
 * A TCP proxy to a real server that can stall: while stalled it accepts connections and holds every
 * byte in both directions (a Postgres or Redis that stopped answering), and delivers them in order
 * when resumed.
 */
class StallingProxy {
  stalled = false
  private held: (() => void)[] = []
  private sockets = new Set<Socket>()
  private server: Server

  constructor (private target: { host: string; port: number }) {
    this.server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host)
      for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
        this.sockets.add(from)
        from.on('data', (chunk) => (this.stalled ? this.held.push(() => to.write(chunk)) : to.write(chunk)))
        from.on('error', () => {})
        from.on('close', () => {
          this.sockets.delete(from)
          to.destroy()
        })
      }
    })
  }

  async listen (): Promise<number> {
    this.server.listen(0, '127.0.0.1')
    await once(this.server, 'listening')
    return (this.server.address() as AddressInfo).port
  }

  resume (): void {
    this.stalled = false
    for (const deliver of this.held.splice(0)) deliver()
  }

  async close (): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await new Promise((resolve) => this.server.close(resolve))
  }
}

const pgTarget = new URL(TEST_DATABASE_URL)
const pgProxy = new StallingProxy({ host: pgTarget.hostname, port: Number(pgTarget.port || 5432) })
const redisProxy = new StallingProxy({ host: '127.0.0.1', port: 6379 })
const pgUrl = new URL(withDefaultUser(TEST_DATABASE_URL))
pgUrl.host = `127.0.0.1:${await pgProxy.listen()}`
const redisUrl = `redis://127.0.0.1:${await redisProxy.listen()}`

const REQUEST_TIMEOUT_MS = 500
const app = await buildApp(testConfig({
  DATABASE_URL: pgUrl.toString(),
  REDIS_URL: redisUrl,
  PG_CONNECT_TIMEOUT_MS: '300',
  PG_STATEMENT_TIMEOUT_MS: '300',
  REDIS_COMMAND_TIMEOUT_MS: '300',
  REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
}), { logger: false })
let closed = false
t.teardown(async () => {
  pgProxy.resume()
  redisProxy.resume()
  if (!closed) await app.close()
  await pgProxy.close()
  await redisProxy.close()
})
// Test-only routes: a statement slower than the timeout, and a query on a pool of its own (whose
// first query has to open a connection).
app.get('/test/slow-statement', async () => {
  await app.db.query('SELECT pg_sleep(3)')
  return { ok: true }
})
app.get('/test/fresh-connection', async () => {
  const pool = createPool(pgUrl.toString(), { connectMs: 300, statementMs: 300, idleInTransactionMs: 1000 })
  pool.on('error', () => {})
  try {
    await pool.query('SELECT 1')
  } finally {
    void pool.end()
  }
  return { ok: true }
})
await app.ready()

async function timed (run: () => Promise<{ statusCode: number; headers: Record<string, unknown> }>) {
  const started = Date.now()
  const res = await run()
  return { res, ms: Date.now() - started }
}

t.test('a statement over PG_STATEMENT_TIMEOUT_MS is cancelled and answers 503 + Retry-After', async (t) => {
  const { res, ms } = await timed(() => app.inject({ url: '/test/slow-statement' }))
  t.equal(res.statusCode, 503)
  t.equal(res.headers['retry-after'], '1')
  t.ok(ms < 1500, `answered in ${ms} ms`)
  t.equal((await app.db.query('SELECT 1 AS one')).rows[0].one, 1, 'the pool is still usable')
})

t.test('a stalled Postgres answers 503 + Retry-After within the timeouts, and recovers', async (t) => {
  await app.db.query('SELECT 1') // leaves an open connection in the pool, which the stall will hold
  const auth = { authorization: `Bearer ${await signLocalToken(await loadLocalSigningKey(TEST_DATA_DIR), randomId('user-'))}` }
  pgProxy.stalled = true
  // A new subject needs Postgres to create its user.
  const { res, ms } = await timed(() => app.inject({ url: '/v1/me', headers: auth }))
  t.equal(res.statusCode, 503, 'a query on an open connection')
  t.equal(res.headers['retry-after'], '1')
  t.ok(ms < 2500, `answered in ${ms} ms`)
  const connecting = await timed(() => app.inject({ url: '/test/fresh-connection' }))
  t.equal(connecting.res.statusCode, 503, 'a new connection')
  t.ok(connecting.ms < 1500, `answered in ${connecting.ms} ms`)
  pgProxy.resume()
  t.equal((await app.inject({ url: '/v1/me', headers: auth })).statusCode, 200, 'answers again once Postgres does')
  t.equal((await app.inject({ url: '/test/fresh-connection' })).statusCode, 200)
})

t.test('a stalled Redis answers 503 + Retry-After within REDIS_COMMAND_TIMEOUT_MS, and recovers', async (t) => {
  const user = await newUser(app)
  redisProxy.stalled = true
  // /v1/me/* takes from a rate limit in Redis on every request.
  const { res, ms } = await timed(() => app.inject({ url: '/v1/me/keys', headers: user.auth }))
  t.equal(res.statusCode, 503)
  t.equal(res.headers['retry-after'], '1')
  t.ok(ms < 1500, `answered in ${ms} ms`)
  redisProxy.resume()
  const after = await app.inject({ url: '/v1/me/keys', headers: user.auth })
  t.equal(after.statusCode, 200, 'answers again once Redis does')
})

/** Sends raw bytes on a real socket and resolves with what the server sent back and when it closed. */
async function rawRequest (port: number, bytes: string | Buffer): Promise<{ answer: string; ms: number }> {
  const socket = connect(port, '127.0.0.1')
  const started = Date.now()
  let answer = ''
  socket.on('data', (chunk) => { answer += chunk.toString() })
  socket.on('error', () => {})
  socket.write(bytes)
  await once(socket, 'close')
  return { answer, ms: Date.now() - started }
}

t.test('a client that sends part of its request gets 408 and a closed connection after REQUEST_TIMEOUT_MS', async (t) => {
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as AddressInfo).port
  const halfBody = 'POST /v1/waitlist HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":'
  const body = await rawRequest(port, halfBody)
  t.match(body.answer, /^HTTP\/1\.1 408 /, 'half a body')
  t.ok(body.ms >= REQUEST_TIMEOUT_MS - 50 && body.ms < REQUEST_TIMEOUT_MS + 1500, `closed after ${body.ms} ms`)
  const headers = await rawRequest(port, 'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ')
  t.match(headers.answer, /^HTTP\/1\.1 408 /, 'half the headers')
  t.ok(headers.ms < REQUEST_TIMEOUT_MS + 1500, `closed after ${headers.ms} ms`)
  t.same(bodyOf(body.answer), { error: 'request_timeout', message: 'the whole request did not arrive in time' }, 'the one error body')
})

/** The JSON body of a raw HTTP answer. */
const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>

t.test('a request Node cannot parse gets the one error body, not the framework\'s', async (t) => {
  const port = (app.server.address() as AddressInfo).port
  // Raw UTF-8 in the request line (what curl sends for an unencoded ?q=支), a control character in a header.
  const raw = await rawRequest(port, Buffer.concat([Buffer.from('GET /v1/me/events?q='), Buffer.from('支', 'utf8'), Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n')]))
  t.match(raw.answer, /^HTTP\/1\.1 400 /)
  t.match(bodyOf(raw.answer), { error: 'bad_request', message: /percent-encoded/ })
  t.notOk('statusCode' in bodyOf(raw.answer), 'no key outside the documented body')
  const control = await rawRequest(port, 'GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n\r\n')
  t.match(control.answer, /^HTTP\/1\.1 400 /)
  t.match(bodyOf(control.answer), { error: 'bad_request' })
  const big = await rawRequest(port, `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)
  t.match(big.answer, /^HTTP\/1\.1 431 /)
  t.same(bodyOf(big.answer), { error: 'headers_too_large', message: 'the request headers are too large' })
})

t.test('a graceful close does not wait long for a client stuck in its body', async (t) => {
  const port = (app.server.address() as AddressInfo).port
  const stuck = rawRequest(port, `POST /v1/waitlist HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":"${randomId()}`)
  await new Promise((resolve) => setTimeout(resolve, 50))
  const started = Date.now()
  closed = true
  await app.close()
  const ms = Date.now() - started
  t.ok(ms < REQUEST_TIMEOUT_MS + 3000, `closed in ${ms} ms`)
  const { answer, ms: open } = await stuck
  t.equal(answer, '', 'the stuck client got no answer')
  t.ok(open < REQUEST_TIMEOUT_MS + 3000, `its connection closed after ${open} ms`)
})
