import t, { type Test } from 'tap'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { RouteOptions } from 'fastify'
import { Ajv, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import { buildApp } from '../../src/app.ts'
import { newUser, randomId, sendEvent, shipped, testConfig } from '../helpers/app.ts'

// An x402 upstream, so that /v1/x402 answers 200 in this test.
const upstream: Server = createServer((_req, res) => {
  res.setHeader('content-type', 'application/json')
  res.end(JSON.stringify({ topSellers: [{ seller: 's' }], recentTransfers: [], facilitator: { name: 'f' } }))
})
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
t.teardown(() => upstream.close())
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`

const routes: RouteOptions[] = []
const app = await buildApp(testConfig({ X402_BASE_URL: upstreamUrl }), { logger: false, onRoute: (route) => { routes.push(route) } })
t.teardown(() => app.close())
await app.ready()

/**
 * Routes of the API: not the reference pages' own assets under /docs, nor the web UI's files (static
 * routes hidden from the document), which the document leaves out.
 */
const apiRoutes = () => routes.filter((r) => !r.url.startsWith('/docs') &&
  (r.url === '/openapi.json' || !(r.schema as { hide?: boolean } | undefined)?.hide))
const methodsOf = (r: RouteOptions) => [r.method].flat().filter((m) => m !== 'HEAD' && m !== 'OPTIONS')

t.test('every route declares a 2xx response and its error responses from schemas/', async (t) => {
  t.ok(apiRoutes().length >= 34, `${apiRoutes().length} routes`)
  for (const route of apiRoutes()) {
    if (methodsOf(route).length === 0) continue
    const name = `${methodsOf(route).join(',')} ${route.url}`
    const responses = (route.schema?.response ?? {}) as Record<string, unknown>
    const codes = Object.keys(responses)
    t.ok(codes.some((c) => /^2\d\d$/.test(c)), `${name} declares its success response`)
    if (route.url === '/openapi.json') continue
    t.ok(codes.includes('500'), `${name} declares its error response`)
    if (route.url === '/v1/traces') {
      // OTLP/HTTP: errors are a google.rpc.Status in the request's encoding, as the OTLP specification requires.
      for (const c of codes.filter((c) => /^[45]\d\d$/.test(c))) t.match(responses[c], { properties: { code: { type: 'integer' }, message: { type: 'string' } } }, `${name} ${c} is a Status`)
      continue
    }
    for (const c of codes.filter((c) => /^[45]\d\d$/.test(c))) {
      t.match(responses[c], { required: ['error'], properties: { error: { type: 'string' } } }, `${name} ${c} is the error body`)
    }
    if (route.url.includes(':')) t.ok(route.schema?.params, `${name} declares its path parameters`)
  }
})

const doc = (await app.inject({ url: '/openapi.json' })).json() as {
  openapi: string
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }>; parameters?: unknown[] }>>
  components: { schemas?: Record<string, object> }
}
const ajv = new Ajv({ strict: false, allErrors: true })
addFormats.default(ajv)
// Component references in the document point at #/components/schemas/<name>.
ajv.addSchema({ $id: 'doc', components: doc.components })
const validators = new Map<string, ValidateFunction>()
const openapiPath = (url: string) => url.replace(/:([A-Za-z]+)/g, '{$1}')

/** Checks a response body against the document's schema for the route, method and status. */
function checked (t: Test, method: string, url: string, route: string, res: { statusCode: number; body: string; json: () => unknown }) {
  const op = doc.paths[openapiPath(route)]?.[method.toLowerCase()]
  t.ok(op, `${method} ${route} is in the document`)
  const response = op?.responses[String(res.statusCode)]
  t.ok(response, `${method} ${url}: ${res.statusCode} is documented (${res.body.slice(0, 200)})`)
  covered.add(`${method} ${route} ${res.statusCode}`)
  if (res.statusCode === 204 || !response) return
  const schema = response.content?.['application/json']?.schema
  t.ok(schema, `${method} ${route} ${res.statusCode} has a JSON schema`)
  const key = `${method} ${route} ${res.statusCode}`
  let validate = validators.get(key)
  if (!validate) {
    validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/')))
    validators.set(key, validate)
  }
  const ok = validate(res.json())
  t.ok(ok, `${method} ${url} ${res.statusCode} matches the document${ok ? '' : `: ${ajv.errorsText(validate.errors)}`}`)
}
const covered = new Set<string>()

t.test('the document is OpenAPI 3.1 and covers every route with request and response schemas', async (t) => {
  t.equal(doc.openapi, '3.1.0')
  for (const route of apiRoutes()) {
    if (route.url === '/openapi.json') continue
    for (const method of methodsOf(route)) {
      const op = doc.paths[openapiPath(route.url)]?.[method.toLowerCase()]
      t.ok(op, `${method} ${route.url} is documented`)
      t.ok(Object.keys(op?.responses ?? {}).some((c) => c.startsWith('2')), `${method} ${route.url} documents its success`)
    }
  }
  const docs = await app.inject({ url: '/docs/' })
  t.equal(docs.statusCode, 200, '/docs renders')
  t.notMatch(docs.body, /https?:\/\/(?!127)/, 'the reference page loads nothing from another host')
  const csp = String(docs.headers['content-security-policy'])
  t.match(csp, /default-src 'self'/)
  t.notMatch(csp, /https:|http:/, 'its Content-Security-Policy allows no other origin')
  const css = await app.inject({ url: '/docs/static/swagger-ui.css' })
  t.equal(css.statusCode, 200, 'its assets are served here')
})

t.test('every route answers bodies that match the document, on its happy path and its main errors', async (t) => {
  const user = await newUser(app, { tier: 'enterprise' })
  const key = await user.createKey()
  const call = async (method: string, route: string, opts: { url?: string; auth?: Record<string, string>; payload?: unknown; headers?: Record<string, string> } = {}) => {
    const url = opts.url ?? route
    const headers = { ...(opts.auth ?? {}), ...(opts.headers ?? {}) }
    const res = await app.inject({ method: method as 'GET', url, headers, ...(opts.payload !== undefined ? { payload: opts.payload as object } : {}) })
    checked(t, method, url, route, res)
    return res
  }
  const me = { auth: user.auth }
  const session = randomId('s-')
  const trace = randomId('t-')
  const sent = await sendEvent(app, key.secret, {
    agentId: 'contract-a', type: 'tool', toolExecuted: 'search', model: 'gpt-4o', durationMs: 12,
    metadata: { sessionId: session, traceId: trace, privacyLevel: 'standard', git: { branch: 'main' }, cwd: '/repo', tokensBreakdown: { inputBase: 10, output: 5 },
      denial: { tool: 'rm', reason: 'not allowed' }, wakeup: 'cron' },
  })
  t.equal(sent.statusCode, 202)
  const agentId = sent.json().agentId as string
  const failed = await sendEvent(app, key.secret, { agentId: 'contract-a', type: 'error', errorMessage: 'boom', metadata: { sessionId: session, traceId: trace } })
  await shipped(app)
  await app.alerts.raise({ userId: user.id, agentId, rule: 'error_rate', severity: 'warning', message: 'm', figures: { failed: 1 } })

  // Ingestion.
  await call('POST', '/v1/events', { auth: { authorization: `Bearer ${key.secret}` }, payload: { agentId: 'contract-b' } })
  await call('POST', '/v1/events', { auth: { authorization: `Bearer ${key.secret}` }, payload: { agentId: 'contract-b', type: 'nope' } })
  await call('POST', '/v1/events', { payload: { agentId: 'x' } })
  await call('POST', '/v1/events', { auth: { authorization: `Bearer ${key.secret}` }, headers: { 'content-type': 'text/plain' }, payload: 'hi' })
  await call('POST', '/v1/events/batch', { auth: { authorization: `Bearer ${key.secret}` }, payload: { events: [{ agentId: 'contract-b' }, { agentId: 'contract-b', type: 'nope' }] } })
  await call('POST', '/v1/events/batch', { auth: { authorization: `Bearer ${key.secret}` }, payload: { events: [] } })
  const span = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', name: 'chat', attributes: [{ key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } }] }
  await call('POST', '/v1/traces', { auth: { authorization: `Bearer ${key.secret}` }, payload: { resourceSpans: [{ scopeSpans: [{ spans: [span, { ...span, traceId: '' }] }] }] } })
  await call('POST', '/v1/traces', { auth: { authorization: `Bearer ${key.secret}` }, payload: { resourceSpans: 1 } })
  await call('POST', '/v1/traces', { payload: {} })

  // Public.
  await call('GET', '/health')
  await call('GET', '/v1/stats')
  await call('GET', '/v1/explorer')
  await call('GET', '/v1/x402')
  await call('GET', '/v1/agents')
  await call('GET', '/v1/agents', { url: '/v1/agents?limit=0' })
  await call('GET', '/v1/agents/:identifier', { url: '/v1/agents/nobody' })
  await call('POST', '/v1/waitlist', { payload: { email: `${randomId('c')}@example.com` } })
  await call('POST', '/v1/waitlist', { payload: { email: 'not an address' } })

  // Dashboard.
  await call('GET', '/v1/me', me)
  await call('GET', '/v1/me', {})
  await call('PATCH', '/v1/me', { ...me, payload: { handle: randomId('h') } })
  await call('PATCH', '/v1/me', { ...me, payload: { handle: '-' } })
  await call('GET', '/v1/me/keys', me)
  const created = await call('POST', '/v1/me/keys', { ...me, payload: { label: 'c' } })
  await call('POST', '/v1/me/keys', { ...me, payload: { label: 'c', agentId: 'c000000000000000000000000' } })
  await call('DELETE', '/v1/me/keys/:id', { ...me, url: `/v1/me/keys/${created.json().id}` })
  await call('DELETE', '/v1/me/keys/:id', { ...me, url: '/v1/me/keys/unknown' })
  await call('GET', '/v1/me/agents', me)
  await call('GET', '/v1/me/agents', { ...me, url: '/v1/me/agents?cursor=bogus' })
  await call('GET', '/v1/me/agents/:id', { ...me, url: `/v1/me/agents/${agentId}` })
  await call('GET', '/v1/me/agents/:id', { ...me, url: '/v1/me/agents/unknown' })
  await call('PATCH', '/v1/me/agents/:id', { ...me, url: `/v1/me/agents/${agentId}`, payload: { isPublic: true } })
  await call('PATCH', '/v1/me/agents/:id', { ...me, url: `/v1/me/agents/${agentId}`, payload: { displayName: 'contract-b' } })
  await call('PATCH', '/v1/me/agents/:id', { ...me, url: `/v1/me/agents/${agentId}`, payload: {} })
  await call('GET', '/v1/agents/:identifier', { url: `/v1/agents/${agentId}` })
  await call('GET', '/v1/me/events', me)
  await call('GET', '/v1/me/events', { ...me, url: '/v1/me/events?limit=1' })
  await call('GET', '/v1/me/events', { ...me, url: '/v1/me/events?type=tool&q=search&meta.git.branch=main' })
  await call('GET', '/v1/me/events', { ...me, url: '/v1/me/events?minCostUsd=x' })
  await call('GET', '/v1/me/events/facets', { ...me, url: '/v1/me/events/facets?type=tool' })
  await call('GET', '/v1/me/events/facets', { ...me, url: '/v1/me/events/facets?outcome=nope' })
  await call('GET', '/v1/me/events/histogram', { ...me, url: '/v1/me/events/histogram?interval=1h&type=tool' })
  await call('GET', '/v1/me/events/histogram', { ...me, url: '/v1/me/events/histogram?interval=2m' })
  await call('GET', '/v1/me/traces', { ...me, url: '/v1/me/traces?q=boom' })
  await call('GET', '/v1/me/sessions', { ...me, url: '/v1/me/sessions?type=error' })
  await call('GET', '/v1/me/sessions', me)
  await call('GET', '/v1/me/sessions/:id', { ...me, url: `/v1/me/sessions/${session}` })
  await call('GET', '/v1/me/sessions/:id', { ...me, url: '/v1/me/sessions/none' })
  await call('GET', '/v1/me/traces', { ...me, url: '/v1/me/traces?since=all' })
  const detail = await call('GET', '/v1/me/traces/:traceId', { ...me, url: `/v1/me/traces/${trace}` })
  t.match(detail.json().spans[0], { agentId, metadata: { denial: { tool: 'rm', reason: 'not allowed' }, wakeup: 'cron' } })
  await call('GET', '/v1/me/traces/:traceId', { ...me, url: `/v1/me/traces/${'x'.repeat(500)}` })
  const errors = await call('GET', '/v1/me/errors', me)
  const fingerprint = errors.json().clusters[0].fingerprint as string
  t.ok(failed.statusCode === 202 && fingerprint)
  await call('POST', '/v1/me/errors/:fingerprint/resolve', { ...me, url: `/v1/me/errors/${fingerprint}/resolve` })
  await call('DELETE', '/v1/me/errors/:fingerprint/resolve', { ...me, url: `/v1/me/errors/${fingerprint}/resolve` })
  await call('POST', '/v1/me/errors/:fingerprint/resolve', { ...me, url: '/v1/me/errors/0000000000000000/resolve' })
  await call('POST', '/v1/me/errors/:fingerprint/resolve', { ...me, url: '/v1/me/errors/zz/resolve' })
  await call('GET', '/v1/me/spend-summary', me)
  await call('GET', '/v1/me/spend-summary', { ...me, url: '/v1/me/spend-summary?days=0' })
  await call('POST', '/v1/me/test-event', me)
  const alerts = await call('GET', '/v1/me/alerts', { ...me, url: '/v1/me/alerts?count=true' })
  const alertId = alerts.json().alerts[0].id as string
  await call('GET', '/v1/me/alerts', { ...me, url: '/v1/me/alerts?status=nope' })
  await call('POST', '/v1/me/alerts/:id/snooze', { ...me, url: `/v1/me/alerts/${alertId}/snooze?hours=2` })
  await call('POST', '/v1/me/alerts/:id/acknowledge', { ...me, url: `/v1/me/alerts/${alertId}/acknowledge` })
  await call('POST', '/v1/me/alerts/:id/snooze', { ...me, url: `/v1/me/alerts/${alertId}/snooze` })
  await call('POST', '/v1/me/alerts/:id/unacknowledge', { ...me, url: `/v1/me/alerts/${alertId}/unacknowledge` })
  await call('POST', '/v1/me/alerts/:id/acknowledge', { ...me, url: '/v1/me/alerts/unknown/acknowledge' })
  await call('GET', '/v1/me/alert-settings', me)
  await call('PUT', '/v1/me/alert-settings', { ...me, payload: { error_rate: { minRate: 0.3 }, silence: { enabled: false } } })
  await call('PUT', '/v1/me/alert-settings', { ...me, payload: { error_rate: { minRate: 2 } } })
  // A PagerDuty channel: no destination to resolve; this app runs no worker, so nothing is sent.
  const channel = await call('POST', '/v1/me/channels', { ...me, payload: { kind: 'pagerduty', routingKey: 'contract-key', label: 'c' } })
  await call('POST', '/v1/me/channels', { ...me, payload: { kind: 'webhook' } })
  const hook = (await call('POST', '/v1/me/channels', { ...me, payload: { kind: 'webhook', url: 'https://hooks.example.com/contract' } })).json()
  await call('POST', '/v1/me/channels/:id/rotate-secret', { ...me, url: `/v1/me/channels/${hook.id}/rotate-secret`, payload: { previousValidHours: 1 } })
  await call('POST', '/v1/me/channels/:id/rotate-secret', { ...me, url: `/v1/me/channels/${hook.id}/rotate-secret`, payload: { previousValidHours: 999 } })
  await call('GET', '/v1/me/channels', me)
  const channelUrl = `/v1/me/channels/${channel.json().id}`
  await call('PATCH', '/v1/me/channels/:id', { ...me, url: channelUrl, payload: { events: ['alert.triggered'] } })
  await call('POST', '/v1/me/channels/:id/test', { ...me, url: `${channelUrl}/test` })
  await call('GET', '/v1/me/channels/:id/deliveries', { ...me, url: `${channelUrl}/deliveries` })
  await call('GET', '/v1/me/channels/:id/deliveries', { ...me, url: '/v1/me/channels/unknown/deliveries' })
  await call('DELETE', '/v1/me/channels/:id', { ...me, url: channelUrl })
  const priced = { ...me, url: '/v1/me/model-prices/acme%2Fhouse-llm' }
  await call('PUT', '/v1/me/model-prices/:model', { ...priced, payload: { inputPerMTok: 0.15, outputPerMTok: 0.6 } })
  await call('PUT', '/v1/me/model-prices/:model', { ...priced, payload: { inputPerMTok: -1, outputPerMTok: 0.6 } })
  await call('GET', '/v1/me/model-prices', me)
  await call('DELETE', '/v1/me/model-prices/:model', priced)
  await call('DELETE', '/v1/me/model-prices/:model', priced)
  // Scores.
  const scoring = { auth: { authorization: `Bearer ${key.secret}` } }
  await call('POST', '/v1/scores', { ...scoring, payload: { traceId: trace, name: 'contract', value: 0.5, metadata: { judge: 'j' } } })
  await call('POST', '/v1/scores', { ...scoring, payload: { traceId: trace, name: 'contract' } })
  await call('POST', '/v1/scores/batch', { ...scoring, payload: { scores: [{ sessionId: session, name: 'verdict', label: 'ok' }, { name: 'x', value: 1 }] } })
  const configUrl = { ...me, url: '/v1/me/score-configs/verdict' }
  await call('PUT', '/v1/me/score-configs/:name', { ...configUrl, payload: { dataType: 'categorical', labels: ['ok', 'bad'] } })
  await call('PUT', '/v1/me/score-configs/:name', { ...configUrl, payload: { dataType: 'categorical' } })
  await call('GET', '/v1/me/score-configs/:name', configUrl)
  await call('GET', '/v1/me/score-configs', me)
  await call('POST', '/v1/scores', { ...scoring, payload: { sessionId: session, name: 'verdict', label: 'maybe' } })
  await call('DELETE', '/v1/me/score-configs/:name', configUrl)
  await call('DELETE', '/v1/me/score-configs/:name', configUrl)
  await call('GET', '/v1/me/score-configs/:name', configUrl)
  await call('POST', '/v1/me/traces/:id/scores', { ...me, url: `/v1/me/traces/${trace}/scores`, payload: { name: 'thumbs', boolean: true, comment: 'c' } })
  await call('POST', '/v1/me/traces/:id/scores', { ...me, url: '/v1/me/traces/none/scores', payload: { name: 'thumbs', boolean: true } })
  await call('POST', '/v1/me/sessions/:id/scores', { ...me, url: `/v1/me/sessions/${session}/scores`, payload: { name: 'verdict', label: 'ok' } })
  await call('GET', '/v1/me/traces/:id/scores', { ...me, url: `/v1/me/traces/${trace}/scores` })
  await call('GET', '/v1/me/sessions/:id/scores', { ...me, url: `/v1/me/sessions/${session}/scores` })
  await call('GET', '/v1/me/scores', { ...me, url: '/v1/me/scores?limit=1' })
  await call('GET', '/v1/me/scores', { ...me, url: '/v1/me/scores?source=robot' })
  await call('GET', '/v1/me/scores/summary', me)
  await call('GET', '/v1/me/scores/summary', { ...me, url: '/v1/me/scores/summary?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z' })
  await call('DELETE', '/v1/me/agents/:id', { ...me, url: `/v1/me/agents/${agentId}` })
  await call('POST', '/v1/events', { auth: { authorization: `Bearer ${key.secret}` }, payload: { agentId } })

  // Fastify's own answers have the one error body too.
  const unknown = await app.inject({ url: '/v1/nothing-here' })
  t.equal(unknown.statusCode, 404)
  t.ok(ajv.validate(doc.components.schemas!.Error!, unknown.json()), 'a 404 for an unknown route is the error body')

  // The live tail's 200 is an endless text/event-stream (test/live/live-tail.test.ts reads its events):
  // read from a socket until it says it is ready; its errors are JSON, checked as every route's.
  await call('GET', '/v1/me/events/stream', { url: '/v1/me/events/stream?type=nope', ...me })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const stop = new AbortController()
  const stream = await fetch(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/v1/me/events/stream`, { headers: user.auth, signal: stop.signal })
  const documented = doc.paths['/v1/me/events/stream']?.get?.responses['200']?.content ?? {}
  t.equal(stream.status, 200)
  t.ok(Object.keys(documented).some((type) => stream.headers.get('content-type')?.startsWith(type)), 'GET /v1/me/events/stream 200 is the documented text/event-stream')
  let opening = ''
  for await (const chunk of stream.body!) {
    opening += Buffer.from(chunk as Uint8Array).toString()
    if (opening.includes(': ready')) break
  }
  stop.abort()
  covered.add('GET /v1/me/events/stream 200')

  // Every documented operation had at least one answer checked.
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const method of Object.keys(ops)) {
      const seen = [...covered].some((c) => c.startsWith(`${method.toUpperCase()} ${path.replace(/\{([A-Za-z]+)\}/g, ':$1')} 2`))
      t.ok(seen, `${method.toUpperCase()} ${path}: a success answer was checked`)
    }
  }
})
