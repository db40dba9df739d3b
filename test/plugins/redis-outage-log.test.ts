import t from 'tap'
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import { once } from 'node:events'
import { Writable } from 'node:stream'
import { newUser, testConfig } from '../helpers/app.ts'
import { RedisOutageLog } from '../../src/storage/redis-outage.ts'

// A Redis outage in the log: one warning naming the server, then silence through every reconnection
// attempt of every connection (commands, subscribers, queues), then one line when it is back. The
// outage is a real one: Redis behind a TCP proxy that drops every connection while "down".

const sockets = new Set<Socket>()
let down = false
const proxy = createServer((client) => {
  if (down) return client.destroy()
  const upstream = connect(6379, '127.0.0.1')
  for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
    sockets.add(from)
    from.on('data', (chunk) => to.write(chunk))
    from.on('error', () => {})
    from.on('close', () => { sockets.delete(from); to.destroy() })
  }
})
proxy.listen(0, '127.0.0.1')
await once(proxy, 'listening')
const port = (proxy.address() as AddressInfo).port
t.teardown(() => { for (const s of sockets) s.destroy(); proxy.close() })

t.test('a Redis outage is one warning naming the server, then one line when it is over', async (t) => {
  const { buildApp } = await import('../../src/app.ts')
  const lines: Array<Record<string, any>> = []
  const stream = new Writable({ write (chunk, _enc, done) { for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l)); done() } })
  const app = await buildApp(testConfig({ REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_COMMAND_TIMEOUT_MS: '300' }), { logger: { level: 'info', stream } })
  t.teardown(() => app.close())
  await app.ready()
  const user = await newUser(app)
  const before = lines.length

  down = true
  for (const s of sockets) s.destroy()
  // Every connection tries again and again meanwhile; requests that need Redis are refused.
  for (let i = 0; i < 5; i++) {
    const refused = await app.inject({ url: '/v1/me/keys', headers: user.auth })
    t.equal(refused.statusCode, 503)
  }
  await new Promise((resolve) => setTimeout(resolve, 2_500))
  const during = lines.slice(before).filter((l) => l.level >= 40)
  const redis = during.filter((l) => l.redis !== undefined)
  t.equal(redis.length, 1, `one line for the outage, not one per attempt: ${redis.map((l) => l.msg).join(' | ')}`)
  t.match(redis[0], { level: 40, redis: `127.0.0.1:${port}`, msg: new RegExp(`Redis at 127\\.0\\.0\\.1:${port} cannot be reached`) })
  const answered = during.filter((l) => /answering 503/.test(l.msg))
  t.equal(answered.length, 1, 'the 503s of five requests: one line')
  t.equal(during.length, 2, `nothing else: ${during.map((l) => l.msg).join(' | ')}`)

  down = false
  const deadline = Date.now() + 10_000
  while (!lines.some((l) => /is reachable again/.test(l.msg ?? '')) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
  const back = lines.find((l) => /is reachable again/.test(l.msg ?? ''))
  t.match(back, { level: 30, redis: `127.0.0.1:${port}`, downMs: Number, errorsLeftOut: Number })
  t.ok(back!.errorsLeftOut > 0, `the errors left out are counted (${back!.errorsLeftOut})`)
  t.equal((await app.inject({ url: '/v1/me/keys', headers: user.auth })).statusCode, 200, 'answers again')
  t.equal(lines.filter((l) => l.level >= 50).length, 0, 'no error lines at all')
})

t.test('the server is named without the URL\'s password', async (t) => {
  t.equal(RedisOutageLog.serverOf('redis://:s3cret@cache.internal:6380/2'), 'cache.internal:6380')
  t.equal(RedisOutageLog.serverOf('redis://localhost'), 'localhost:6379')
})
