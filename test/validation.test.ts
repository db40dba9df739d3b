import t from 'tap'
import type { RouteOptions } from 'fastify'
import { bodyAjv, compileRouteValidator, sharedSchemas, toDetails } from '../src/validation.ts'
import { buildApp } from '../src/app.ts'
import { matching, PATTERN_MESSAGE } from '../schemas/common.ts'
import { newUser, randomId, testConfig } from './helpers/app.ts'

t.test('a route checks its body unless its schema names the one other place that does', async (t) => {
  const body = { type: 'object', required: ['a'], properties: { a: { type: 'integer' } } }
  const checked = compileRouteValidator({ schema: body, httpPart: 'body' })
  t.equal(checked({ a: '1' }), false, 'a body is checked as sent: no coercion')
  t.equal(checked({ a: 1 }), true)
  t.equal(compileRouteValidator({ schema: { ...body, 'x-validated-by': 'ingestion-pipeline' }, httpPart: 'body' })({}), true, 'left to the pipeline')
  t.equal(compileRouteValidator({ schema: body, httpPart: 'querystring' })({ a: '1' }), true, 'query strings are coerced')
  t.throws(() => compileRouteValidator({ schema: { ...body, 'x-validated-by': 'nobody' }, httpPart: 'body' }), /x-validated-by names no known validator: nobody/)
})

t.test('a failed pattern is answered with the rule in words beside it, never the regex', async (t) => {
  const validate = bodyAjv.compile({ type: 'object', properties: { a: { type: 'string', ...matching('^x+$', 'must be one or more x') }, b: { type: 'string', pattern: '^y$' } } })
  t.equal(validate({ a: 'y', b: 'x' }), false)
  t.same(toDetails(validate.errors), [{ path: ['a'], message: 'must be one or more x' }, { path: ['b'], message: 'must match pattern "^y$"' }], 'Ajv\'s own words without them')
})

const routes: RouteOptions[] = []
const app = await buildApp(testConfig(), { logger: false, onRoute: (route) => { routes.push(route) } })
t.teardown(() => app.close())
await app.ready()

/**
 * Every `pattern` a request is checked against: the body, query string, path parameters and headers
 * of every route, into the shared schemas they refer to (the event of POST /v1/events is one).
 */
function requestPatterns (): { where: string; schema: Record<string, unknown> }[] {
  const byId = new Map<string, unknown>(sharedSchemas.map((s) => [s.$id, s]))
  const found: { where: string; schema: Record<string, unknown> }[] = []
  let seen = new Set<unknown>()
  const walk = (node: unknown, where: string): void => {
    if (node === null || typeof node !== 'object' || seen.has(node)) return
    seen.add(node)
    if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${where}/${i}`))
    const schema = node as Record<string, unknown>
    if (typeof schema.pattern === 'string') found.push({ where, schema })
    if (typeof schema.$ref === 'string') {
      const target = byId.get(schema.$ref.replace(/#.*$/, ''))
      if (target === undefined) throw new Error(`${where}: $ref ${schema.$ref} is not a shared schema`)
      walk(target, `${where} → ${schema.$ref}`)
    }
    for (const [key, value] of Object.entries(schema)) {
      if (key !== 'examples' && key !== 'default' && key !== 'const' && key !== 'enum') walk(value, `${where}/${key}`)
    }
  }
  for (const route of routes) {
    for (const part of ['body', 'querystring', 'params', 'headers'] as const) {
      seen = new Set()
      walk((route.schema as Record<string, unknown> | undefined)?.[part], `${[route.method].flat().join(',')} ${route.url} ${part}`)
    }
  }
  return found
}

t.test('every pattern a request is checked against says its rule in words', async (t) => {
  const patterns = requestPatterns()
  t.ok(patterns.length >= 10, `${patterns.length} patterns`)
  t.ok(patterns.some((p) => p.where.startsWith('POST /v1/scores body/properties/name')), 'the walk reaches the score\'s name')
  t.ok(patterns.some((p) => p.where.startsWith('PUT /v1/me/score-configs/:name params')), 'and path parameters')
  t.ok(patterns.some((p) => p.where.includes('headers/properties/idempotency-key')), 'and headers')
  for (const { where, schema } of patterns) {
    const words = schema[PATTERN_MESSAGE]
    t.ok(typeof words === 'string' && /^must /.test(words) && !words.includes(schema.pattern as string), `${where}: ${String(words)}`)
  }
})

t.test('POST /v1/events: the Idempotency-Key is looked up before the event is checked (a retry with another body gets 422, not 400)', async (t) => {
  const user = await newUser(app, { tier: 'enterprise', burst: 100_000 })
  const { secret } = await user.createKey()
  const key = randomId('body-')
  const send = (payload: unknown) => app.inject({
    method: 'POST',
    url: '/v1/events',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'idempotency-key': key },
    payload: JSON.stringify(payload),
  })
  t.equal((await send({ agentId: randomId('agent-') })).statusCode, 202)
  const invalid = await send({ agentId: 5, type: 'nonsense' })
  t.equal(invalid.statusCode, 422)
  t.match(invalid.json(), { error: 'idempotency_key_reused' })
  const fresh = await app.inject({
    method: 'POST',
    url: '/v1/events',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ agentId: 5, type: 'nonsense' }),
  })
  t.equal(fresh.statusCode, 400)
  t.match(fresh.json(), { error: 'validation_failed', message: 'the body is not valid', details: [{ path: ['agentId'] }, { path: ['type'] }] })
})
