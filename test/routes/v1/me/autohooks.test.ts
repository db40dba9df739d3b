import t from 'tap'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import meHooks from '../../../../src/routes/v1/me/autohooks.ts'
import errors from '../../../../src/plugins/error-handler.ts'
import { unauthorized } from '../../../../src/http-error.ts'
import type { DashboardReader } from '../../../../src/services/dashboard-service.ts'
import type { User } from '../../../../src/storage/users-repository.ts'

/**
 * The /v1/me folder's hooks over fakes of what they call (the user's authentication, the rate
 * limiter, ingestion's snapshot instant, the shipper's wait, the dashboard's reader), mounted as the
 * route loader mounts them: in the folder's scope, before its routes. Each fake records its calls.
 */
async function mount () {
  const log: string[] = []
  let admitted = 1
  let settled = true
  const app = Fastify({ logger: false })
  await app.register(errors)
  // Only the members the hooks use: each fake stands for the whole service it decorates.
  const stand = <T>(part: Partial<T>) => part as T
  app.decorate('routeSettings', { bodyLimit: 1024, batchBodyLimit: 1024, meLimits: { readsPerMinute: 7, writesPerMinute: 3 }, readYourWritesTimeoutMs: 250 })
  app.decorate('authenticateUser', async (request: FastifyRequest) => {
    log.push('authenticate')
    if (request.headers.authorization !== 'Bearer ok') throw unauthorized('invalid_token')
    request.user = stand<User>({ id: 'u1' })
  })
  app.decorateRequest('user', null as unknown as User)
  app.decorate('rateLimiter', stand<FastifyInstance['rateLimiter']>({
    async take (bucket: string, limit: number) {
      log.push(`take ${bucket} ${limit}`)
      return { admitted, retryAfterMs: 2_000 }
    },
  }))
  app.decorate('ingestion', stand<FastifyInstance['ingestion']>({ settledBefore: () => { log.push('settledBefore'); return 1_234 } }))
  app.decorate('shipper', stand<FastifyInstance['shipper']>({
    async waitForUser (userId: string, timeoutMs: number) { log.push(`wait ${userId} ${timeoutMs}`); return settled },
  }))
  app.decorate('dashboardService', stand<FastifyInstance['dashboardService']>({
    async readerOf (userId: string, settledAt: number): Promise<DashboardReader> {
      log.push(`readerOf ${userId} ${settledAt}`)
      return { userId, settledAt, hidden: [], names: new Map() }
    },
  }))

  await app.register(async (scope) => {
    await scope.register(fp(meHooks))
    scope.get('/x', async (request) => {
      const first = await request.reader
      const again = await request.reader
      return { settledAt: request.settledAt, reader: first.userId, same: first === again }
    })
    scope.post('/x', async () => ({ ok: true }))
  }, { prefix: '/v1/me' })
  app.get('/elsewhere', async () => ({ ok: true }))
  await app.ready()
  t.teardown(() => app.close())
  return { app, log, refuse: () => { admitted = 0 }, behind: () => { settled = false } }
}

const auth = { authorization: 'Bearer ok' }

t.test('no token: 401 before the limiter, the wait or the handler', async (t) => {
  const { app, log } = await mount()
  const res = await app.inject({ url: '/v1/me/x' })
  t.equal(res.statusCode, 401)
  t.match(res.json(), { error: 'unauthorized', reason: 'invalid_token' })
  t.same(log, ['authenticate'])
})

t.test('in order: authenticate, the caller\'s limit for the route, the snapshot instant, then the wait for their writes', async (t) => {
  const { app, log } = await mount()
  const res = await app.inject({ url: '/v1/me/x', headers: auth })
  t.equal(res.statusCode, 200)
  t.same(log.slice(0, 4), ['authenticate', 'take me:u1:GET /v1/me/x 7', 'settledBefore', 'wait u1 250'])
  t.equal(res.json().settledAt, 1_234, 'request.settledAt is the instant taken before the wait')
  log.length = 0
  await app.inject({ method: 'POST', url: '/v1/me/x', headers: auth })
  t.equal(log[1], 'take me:u1:POST /v1/me/x 3', 'writes count against ME_WRITES_PER_MINUTE')
})

t.test('over the limit: 429 with Retry-After, and no wait', async (t) => {
  const { app, log, refuse } = await mount()
  refuse()
  const res = await app.inject({ url: '/v1/me/x', headers: auth })
  t.equal(res.statusCode, 429)
  t.equal(res.headers['retry-after'], '2')
  t.notOk(log.some((l) => l.startsWith('wait')))
})

t.test('request.reader: looked up on first use, once per request, at the request\'s instant; not at all when unused', async (t) => {
  const { app, log } = await mount()
  const res = await app.inject({ url: '/v1/me/x', headers: auth })
  t.same(res.json(), { settledAt: 1_234, reader: 'u1', same: true })
  t.same(log.filter((l) => l.startsWith('readerOf')), ['readerOf u1 1234'], 'one lookup for two reads')
  await app.inject({ url: '/v1/me/x', headers: auth })
  t.equal(log.filter((l) => l.startsWith('readerOf')).length, 2, 'the next request looks its reader up afresh')
  log.length = 0
  await app.inject({ method: 'POST', url: '/v1/me/x', headers: auth })
  t.notOk(log.some((l) => l.startsWith('readerOf')), 'a route that does not read it costs no lookup')
})

t.test('outside the folder nothing of it runs', async (t) => {
  const { app, log } = await mount()
  t.equal((await app.inject({ url: '/elsewhere' })).statusCode, 200)
  t.same(log, [])
})

t.test('the wait runs out: a read is a 503 with Retry-After, never an answer without the caller\'s writes; a write goes on', async (t) => {
  const { app, log, behind } = await mount()
  behind()
  const res = await app.inject({ url: '/v1/me/x', headers: auth })
  t.equal(res.statusCode, 503)
  t.equal(res.headers['retry-after'], '1')
  t.match(res.json(), { error: 'writes_not_yet_readable', message: /not yet readable .*250 ms/ })
  t.notOk(log.some((l) => l.startsWith('readerOf')), 'the handler did not run')
  t.equal((await app.inject({ method: 'HEAD', url: '/v1/me/x', headers: auth })).statusCode, 503)
  const write = await app.inject({ method: 'POST', url: '/v1/me/x', headers: auth })
  t.equal(write.statusCode, 200, 'a write reads no events')
})
