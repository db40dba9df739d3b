import t from 'tap'
import { compileRouteValidator } from '../src/validation.ts'
import { buildTestApp, newUser, randomId } from './helpers/app.ts'

t.test('a route checks its body unless its schema names the one other place that does', async (t) => {
  const body = { type: 'object', required: ['a'], properties: { a: { type: 'integer' } } }
  const checked = compileRouteValidator({ schema: body, httpPart: 'body' })
  t.equal(checked({ a: '1' }), false, 'a body is checked as sent: no coercion')
  t.equal(checked({ a: 1 }), true)
  t.equal(compileRouteValidator({ schema: { ...body, 'x-validated-by': 'ingestion-pipeline' }, httpPart: 'body' })({}), true, 'left to the pipeline')
  t.equal(compileRouteValidator({ schema: body, httpPart: 'querystring' })({ a: '1' }), true, 'query strings are coerced')
  t.throws(() => compileRouteValidator({ schema: { ...body, 'x-validated-by': 'nobody' }, httpPart: 'body' }), /x-validated-by names no known validator: nobody/)
})

const app = await buildTestApp(t)

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
