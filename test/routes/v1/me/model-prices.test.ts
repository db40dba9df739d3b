import t from 'tap'
import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, newUser, randomId, sendBatch, sendEvent, shipped, type TestUser } from '../../../helpers/app.ts'
import { costOf } from '../../../../src/domain/pricing.ts'
import { MAX_MODEL_PRICES } from '../../../../schemas/model-price.ts'

// Two instances sharing one Redis (same prefix) and one Postgres, as behind a load balancer.
const prefix = `test:${randomId()}:`
const app = await buildTestApp(t, { REDIS_PREFIX: prefix })
const other = await buildTestApp(t, { REDIS_PREFIX: prefix })

const tokensBreakdown = { inputBase: 1_234_567, cacheCreation: 89_012, cacheRead: 3_456_789, output: 123_457, reasoning: 1_000 }
const HOUSE = { inputPerMTok: 0.15, outputPerMTok: 0.6, cacheReadPerMTok: 0.075, cacheWritePerMTok: 0.1875 }

/** The cost by the formula, in exact decimal arithmetic (pico-dollars), rounded half up to nano-dollars. */
function formula (tokens: typeof tokensBreakdown, p: { inputPerMTok: number; outputPerMTok: number; cacheReadPerMTok: number; cacheWritePerMTok: number }): number {
  const pico = (perMTok: number) => BigInt(Math.round(perMTok * 1e6)) // exact for these prices
  const total = BigInt(tokens.inputBase) * pico(p.inputPerMTok) + BigInt(tokens.cacheCreation) * pico(p.cacheWritePerMTok) +
    BigInt(tokens.cacheRead) * pico(p.cacheReadPerMTok) + BigInt(tokens.output) * pico(p.outputPerMTok)
  return Number((total + 500n) / 1000n) / 1e9
}

const url = (model: string) => `/v1/me/model-prices/${encodeURIComponent(model)}`
const put = (on: FastifyInstance, user: TestUser, model: string, payload: unknown) =>
  on.inject({ method: 'PUT', url: url(model), headers: user.auth, payload: payload as object })
const remove = (on: FastifyInstance, user: TestUser, model: string) => on.inject({ method: 'DELETE', url: url(model), headers: user.auth })

/** Sends one event of `model` with the test's tokens; answers its stored cost and status. */
async function costOfEvent (on: FastifyInstance, user: TestUser, secret: string, model: string): Promise<{ cost: number; status: string }> {
  const res = await sendEvent(on, secret, { agentId: 'priced-bot', model, metadata: { tokensBreakdown } })
  if (res.statusCode !== 202) throw new Error(`${res.statusCode} ${res.body}`)
  return storedCost(on, user, res.json().eventId)
}

async function storedCost (on: FastifyInstance, user: TestUser, eventId: string): Promise<{ cost: number; status: string }> {
  await shipped(on)
  const row = await on.events.getRow(user.id, eventId)
  return { cost: Number(row!.cost_usd), status: String(row!.cost_status) }
}

/** Resolves once `on` has been told over the bus to drop the user's cached prices. */
function told (on: FastifyInstance, userId: string): Promise<void> {
  return new Promise((resolve) => on.bus.on('cache-model-prices', (id) => {
    if (id === userId) resolve()
  }))
}

t.test('a user\'s price prices that user\'s later events exactly; others, and earlier events, keep theirs', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const stranger = await newUser(app)
  const strangerKey = await stranger.createKey()
  const catalogue = costOf('gpt-4o', tokensBreakdown).nanoUsd / 1e9

  const before = await costOfEvent(app, user, key.secret, 'house-llm-7b')
  t.same(before, { cost: 0, status: 'unknown_model' }, 'unpriced before')
  t.same(await costOfEvent(app, user, key.secret, 'gpt-4o'), { cost: catalogue, status: 'priced' })

  const set = await put(app, user, 'house-llm-7b', HOUSE)
  t.equal(set.statusCode, 200, set.body)
  t.match(set.json(), { model: 'house-llm-7b', ...HOUSE, updatedAt: String })
  t.equal((await put(app, user, 'gpt-4o', { inputPerMTok: 1, outputPerMTok: 2 })).statusCode, 200)

  const expected = formula(tokensBreakdown, HOUSE)
  t.ok(expected > 0)
  t.same(await costOfEvent(app, user, key.secret, 'house-llm-7b'), { cost: expected, status: 'user_price' }, 'priced by the formula')
  // No cache prices: cache reads and writes are billed as input.
  const own = formula(tokensBreakdown, { inputPerMTok: 1, outputPerMTok: 2, cacheReadPerMTok: 1, cacheWritePerMTok: 1 })
  t.same(await costOfEvent(app, user, key.secret, 'gpt-4o'), { cost: own, status: 'user_price' }, 'the user\'s price wins over the catalogue')
  t.same(await costOfEvent(app, user, key.secret, 'GPT-4o'), { cost: catalogue, status: 'priced' }, 'only the exact name')

  t.same(await costOfEvent(app, stranger, strangerKey.secret, 'house-llm-7b'), { cost: 0, status: 'unknown_model' }, 'another user\'s events are unaffected')
  t.same(await costOfEvent(app, stranger, strangerKey.secret, 'gpt-4o'), { cost: catalogue, status: 'priced' })

  const list = await app.inject({ url: '/v1/me/events?limit=100', headers: user.auth })
  const first = list.json().events.find((e: { model: string; costStatus: string }) => e.model === 'house-llm-7b' && e.costStatus === 'unknown_model')
  t.ok(first, 'the event sent before the price still reads unpriced')
  t.equal(first.costUsd, 0, 'and keeps its cost')
  t.ok(list.json().events.some((e: { costStatus: string; costUsd: number }) => e.costStatus === 'user_price' && e.costUsd === expected), 'the API says a user price was used')

  t.equal((await remove(app, user, 'gpt-4o')).statusCode, 204)
  t.same(await costOfEvent(app, user, key.secret, 'gpt-4o'), { cost: catalogue, status: 'priced' }, 'after DELETE the catalogue prices again')
  t.equal((await remove(app, user, 'house-llm-7b')).statusCode, 204)
  t.same(await costOfEvent(app, user, key.secret, 'house-llm-7b'), { cost: 0, status: 'unknown_model' })
})

t.test('a batch built on the row thread is priced the same', async (t) => {
  await app.rowThread.whenReady()
  const user = await newUser(app, { tier: 'enterprise' })
  const key = await user.createKey()
  t.equal((await put(app, user, 'house-llm-7b', HOUSE)).statusCode, 200)
  const events = Array.from({ length: 70 }, (_, i) => ({ agentId: 'batch-bot', model: i % 2 ? 'house-llm-7b' : 'gpt-4o', metadata: { tokensBreakdown } }))
  const before = app.rowThread.builtOnThread
  const res = await sendBatch(app, key.secret, events) // past INGEST_ROW_THREAD_MIN_EVENTS (64)
  t.equal(res.statusCode, 207)
  t.equal(app.rowThread.builtOnThread - before, 70, 'the batch was built on the row thread')
  const ids: string[] = res.json().results.map((r: { eventId: string }) => r.eventId)
  const costs = await Promise.all(ids.map((id) => storedCost(app, user, id)))
  const expected = formula(tokensBreakdown, HOUSE)
  const catalogue = costOf('gpt-4o', tokensBreakdown).nanoUsd / 1e9
  t.same(costs, events.map((e) => (e.model === 'house-llm-7b' ? { cost: expected, status: 'user_price' } : { cost: catalogue, status: 'priced' })))
})

t.test('spans exported over OTLP are priced by the user\'s price as well', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  t.equal((await put(app, user, 'house-llm-7b', HOUSE)).statusCode, 200)
  const attribute = (key: string, value: object) => ({ key, value })
  const span = {
    traceId: randomBytes(16).toString('hex'),
    spanId: randomBytes(8).toString('hex'),
    name: 'chat house-llm-7b',
    attributes: [
      attribute('gen_ai.operation.name', { stringValue: 'chat' }),
      attribute('gen_ai.request.model', { stringValue: 'house-llm-7b' }),
      // The conventions' input count includes cache reads and writes.
      attribute('gen_ai.usage.input_tokens', { intValue: String(tokensBreakdown.inputBase + tokensBreakdown.cacheCreation + tokensBreakdown.cacheRead) }),
      attribute('gen_ai.usage.cache_read.input_tokens', { intValue: String(tokensBreakdown.cacheRead) }),
      attribute('gen_ai.usage.cache_creation.input_tokens', { intValue: String(tokensBreakdown.cacheCreation) }),
      attribute('gen_ai.usage.output_tokens', { intValue: String(tokensBreakdown.output) }),
    ],
  }
  const res = await app.inject({
    method: 'POST',
    url: '/v1/traces',
    headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [span] }] }] }),
  })
  t.equal(res.statusCode, 200, res.body)
  const [event] = (await app.inject({ url: '/v1/me/events?limit=1', headers: user.auth })).json().events
  t.match(event, { model: 'house-llm-7b', costStatus: 'user_price', costUsd: formula(tokensBreakdown, HOUSE) })
})

t.test('another instance prices by a new price, and by the catalogue after a DELETE, at once', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  t.same(await costOfEvent(other, user, key.secret, 'house-llm-7b'), { cost: 0, status: 'unknown_model' }, 'the other instance holds "no prices"')
  let otherTold = told(other, user.id)
  t.equal((await put(app, user, 'house-llm-7b', HOUSE)).statusCode, 200)
  await otherTold
  t.same(await costOfEvent(other, user, key.secret, 'house-llm-7b'), { cost: formula(tokensBreakdown, HOUSE), status: 'user_price' })
  otherTold = told(other, user.id)
  t.equal((await remove(app, user, 'house-llm-7b')).statusCode, 204)
  await otherTold
  t.same(await costOfEvent(other, user, key.secret, 'house-llm-7b'), { cost: 0, status: 'unknown_model' })
})

t.test('GET lists the prices and the models used without one, with their event counts', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  for (const model of ['mystery-a', 'mystery-a', 'mystery-b', 'gpt-4o']) await costOfEvent(app, user, key.secret, model)
  t.equal((await put(app, user, 'mystery-a', { inputPerMTok: 3, outputPerMTok: 4, cacheReadPerMTok: null })).statusCode, 200)
  t.equal((await put(app, user, 'acme/ft:v2', { inputPerMTok: 1.25, outputPerMTok: 5 })).statusCode, 200)
  t.same(await costOfEvent(app, user, key.secret, 'mystery-a'), { cost: formula(tokensBreakdown, { inputPerMTok: 3, outputPerMTok: 4, cacheReadPerMTok: 3, cacheWritePerMTok: 3 }), status: 'user_price' })
  const res = await app.inject({ url: '/v1/me/model-prices', headers: user.auth })
  t.equal(res.statusCode, 200)
  t.match(res.json().prices, [
    { model: 'acme/ft:v2', inputPerMTok: 1.25, outputPerMTok: 5, cacheReadPerMTok: null, cacheWritePerMTok: null },
    { model: 'mystery-a', inputPerMTok: 3, outputPerMTok: 4, cacheReadPerMTok: null, cacheWritePerMTok: null },
  ])
  t.equal(res.json().prices.length, 2)
  t.same(res.json().unpricedModels, [{ model: 'mystery-a', eventCount: 2 }, { model: 'mystery-b', eventCount: 1 }],
    'a model priced since stays listed with its earlier events; the event priced after is not counted')
  const stranger = await newUser(app)
  t.same((await app.inject({ url: '/v1/me/model-prices', headers: stranger.auth })).json(), { prices: [], unpricedModels: [] }, 'prices are per user')
  t.equal((await remove(app, stranger, 'mystery-a')).statusCode, 404, 'another user\'s price is not found')
})

t.test('validation, 404 and the limit of prices per user', async (t) => {
  const user = await newUser(app)
  const refused = async (model: string, payload: unknown, status = 400) => {
    const res = await put(app, user, model, payload)
    t.equal(res.statusCode, status, `${model} ${JSON.stringify(payload)}: ${res.body}`)
    return res.json()
  }
  t.match(await refused('m', { inputPerMTok: -1, outputPerMTok: 1 }), { error: 'validation_failed', details: [{ path: ['inputPerMTok'] }] })
  await refused('m', { inputPerMTok: 1 })
  await refused('m', { inputPerMTok: 1, outputPerMTok: 10_000.5 })
  await refused('m', { inputPerMTok: '1', outputPerMTok: 1 })
  await refused('m', { inputPerMTok: 1, outputPerMTok: 1, cacheReadPerMTok: -0.1 })
  await refused('m', { inputPerMTok: 1, outputPerMTok: 1, perRequest: 1 })
  await refused('x'.repeat(201), { inputPerMTok: 1, outputPerMTok: 1 })
  t.equal((await put(app, user, 'x'.repeat(200), { inputPerMTok: 10_000, outputPerMTok: 0 })).statusCode, 200, '200 characters and the bounds are accepted')
  t.equal((await app.inject({ method: 'PUT', url: '/v1/me/model-prices/', headers: user.auth, payload: { inputPerMTok: 1, outputPerMTok: 1 } })).statusCode, 400, 'no model named')

  const kept = await put(app, user, 'precise', { inputPerMTok: 0.1 + 0.2, outputPerMTok: 0.0000006 })
  t.match(kept.json(), { inputPerMTok: 0.3, outputPerMTok: 0.000001 }, 'kept to 6 decimal places, as answered')
  t.same(await refused('precise', { inputPerMTok: 1, outputPerMTok: 0.0000004, cacheReadPerMTok: 1e-9 }), {
    error: 'validation_failed',
    message: 'the body is not valid',
    details: [
      { path: ['outputPerMTok'], message: 'must be 0 or at least 0.000001 (prices are kept to 6 decimals)' },
      { path: ['cacheReadPerMTok'], message: 'must be 0 or at least 0.000001 (prices are kept to 6 decimals)' },
    ],
  }, 'a paid price that would be kept as 0 is refused, not made free')
  t.match(await refused('  ', { inputPerMTok: 1, outputPerMTok: 1 }), { error: 'validation_failed', details: [{ path: ['model'], message: 'must not be blank' }] })

  t.equal((await remove(app, user, 'never-priced')).statusCode, 404)
  t.same((await remove(app, user, 'never-priced')).json(), { error: 'not_found' })
  t.equal((await app.inject({ method: 'DELETE', url: url('precise') })).statusCode, 401, 'a token is needed')

  // Fill up to the limit directly, then through the API.
  for (let i = (await app.modelPrices.list(user.id)).length; i < MAX_MODEL_PRICES; i++) {
    t.ok(await app.modelPrices.put(user.id, `bulk-${i}`, { inputPerMTok: 1, outputPerMTok: 1, cacheReadPerMTok: null, cacheWritePerMTok: null }, MAX_MODEL_PRICES))
  }
  t.same(await refused('one-too-many', { inputPerMTok: 1, outputPerMTok: 1 }, 409), { error: 'conflict', reason: 'too_many_prices', message: `you have ${MAX_MODEL_PRICES} model prices, the most allowed; delete one before adding another` })
  t.equal((await put(app, user, 'precise', { inputPerMTok: 2, outputPerMTok: 2 })).statusCode, 200, 'a price already set can still be changed')
  t.equal((await remove(app, user, 'precise')).statusCode, 204)
  t.equal((await put(app, user, 'one-too-many', { inputPerMTok: 1, outputPerMTok: 1 })).statusCode, 200, 'room again after a DELETE')
})

t.test('model names with slashes, colons and spaces are one path segment when URL-encoded', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const model = 'openrouter/acme/my model:free?x=1#y'
  const res = await put(app, user, model, { inputPerMTok: 2, outputPerMTok: 2 })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json().model, model)
  t.equal((await costOfEvent(app, user, key.secret, model)).status, 'user_price')
  t.equal((await remove(app, user, model)).statusCode, 204)
})
