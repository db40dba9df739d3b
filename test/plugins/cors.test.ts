import t from 'tap'
import type { RouteOptions } from 'fastify'
import { buildApp } from '../../src/app.ts'
import { testConfig } from '../helpers/app.ts'

// Every route of the API, as Fastify adds it; a browser preflight for each of its methods must pass.
const routes: { method: string; url: string }[] = []
const app = await buildApp(testConfig({ CORS_ORIGINS: 'https://dash.example' }), {
  logger: false,
  onRoute: (route: RouteOptions) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url })
  },
})
t.teardown(() => app.close())
await app.ready()

/** A concrete URL for a route pattern (any value fits the preflight: it runs no handler). */
const concrete = (url: string) => url.replace(/:[A-Za-z]+/g, '0123456789abcdef').replace('*', 'x')

t.test('a preflight from a dashboard origin passes for every method of every route', async (t) => {
  const methods = new Set(routes.map((r) => r.method).filter((m) => m !== 'OPTIONS'))
  t.ok(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].every((m) => methods.has(m)), `the API has ${[...methods].join(', ')}`)
  for (const { method, url } of routes) {
    if (method === 'OPTIONS') continue
    const res = await app.inject({
      method: 'OPTIONS',
      url: concrete(url),
      headers: { origin: 'https://dash.example', 'access-control-request-method': method, 'access-control-request-headers': 'authorization,content-type' },
    })
    t.equal(res.statusCode, 204, `${method} ${url}`)
    t.equal(res.headers['access-control-allow-origin'], 'https://dash.example', `${method} ${url} origin`)
    const allowed = String(res.headers['access-control-allow-methods']).split(',').map((m) => m.trim())
    t.ok(allowed.includes(method), `${method} ${url}: ${method} is allowed (${allowed.join(', ')})`)
    t.match(String(res.headers['access-control-allow-headers']).toLowerCase(), /authorization/)
  }
})

t.test('PUT /v1/me/alert-settings, the call a browser dashboard saves settings with, passes its preflight', async (t) => {
  const res = await app.inject({
    method: 'OPTIONS',
    url: '/v1/me/alert-settings',
    headers: { origin: 'https://dash.example', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization,content-type' },
  })
  t.equal(res.statusCode, 204)
  t.match(res.headers['access-control-allow-methods'], /\bPUT\b/)
  t.equal(res.headers['access-control-max-age'], '600')
})

t.test('another origin gets no CORS headers on any method', async (t) => {
  for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
    const res = await app.inject({ method: 'OPTIONS', url: '/v1/me/alert-settings', headers: { origin: 'https://evil.example', 'access-control-request-method': method } })
    t.notOk(res.headers['access-control-allow-origin'], method)
    t.notOk(res.headers['access-control-allow-methods'], method)
  }
})

t.test('a request without Origin gets Vary: Origin and no CORS headers; an OPTIONS without a dashboard origin is an unknown route', async (t) => {
  const res = await app.inject({ url: '/health' })
  t.equal(res.headers.vary, 'Origin', 'caches key the answer on Origin')
  t.notOk(res.headers['access-control-allow-origin'])
  const dash = await app.inject({ url: '/health', headers: { origin: 'https://dash.example' } })
  t.equal(dash.headers['access-control-allow-origin'], 'https://dash.example')
  t.equal(dash.headers['access-control-expose-headers'], 'Retry-After, Idempotent-Replayed', 'a browser may read Retry-After, and whether a retry was replayed')
  t.equal(dash.headers.vary, 'Origin')
  for (const headers of [{}, { origin: 'https://evil.example', 'access-control-request-method': 'POST' }]) {
    const res = await app.inject({ method: 'OPTIONS', url: '/v1/events', headers })
    t.equal(res.statusCode, 404, JSON.stringify(headers))
    t.equal(res.json().error, 'not_found')
    t.notOk(res.headers['access-control-allow-methods'])
  }
})

t.test('the live tail\'s preflight allows Last-Event-ID, so a dashboard on another origin can resume', async (t) => {
  const res = await app.inject({
    method: 'OPTIONS',
    url: '/v1/me/events/stream',
    headers: { origin: 'https://dash.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization,last-event-id' },
  })
  t.equal(res.statusCode, 204)
  const allowed = String(res.headers['access-control-allow-headers']).split(',').map((h) => h.trim().toLowerCase())
  t.ok(allowed.includes('last-event-id'), `Last-Event-ID is allowed (${allowed.join(', ')})`)
  t.ok(allowed.includes('authorization'))
})
