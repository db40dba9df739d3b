import t from 'tap'
import { ModelPricesService, type PriceStore } from '../../src/services/model-prices-service.ts'
import type { DashboardRepository, Reader } from '../../src/storage/dashboard-repository.ts'
import type { ModelPrice } from '../../src/storage/model-prices-repository.ts'
import type { SpendRow } from '../../src/domain/dashboard-figures.ts'
import type { UserPrice } from '../../src/domain/pricing.ts'
import { windowStart } from '../../src/domain/dashboard.ts'
import { HttpError } from '../../src/http-error.ts'
import { MAX_MODEL_PRICES, UNPRICED_WINDOW_DAYS } from '../../schemas/model-price.ts'

const tokens = { inputBase: 0, cacheCreation: 0, cacheRead: 0, output: 0, total: 0 }
const spend = (key: string, unpricedEvents: number): SpendRow => ({ key, costUsd: 0, events: 9, errors: 0, tokens, unpricedEvents })
const reader: Reader = { userId: 'u1', hidden: [] }

/** A fake prices repository over a map, holding at most `max` prices as the real one does; each call recorded. */
function fakes (byModel: SpendRow[] = []) {
  const calls: { name: string; args: unknown[] }[] = []
  const stored = new Map<string, ModelPrice>()
  const prices: PriceStore = {
    async list (...args) { calls.push({ name: 'list', args }); return [...stored.values()] },
    async put (...args) {
      calls.push({ name: 'put', args })
      const [, model, price, max] = args
      if (!stored.has(model) && stored.size >= max) return null
      const saved = { model, ...price, updatedAt: '2026-05-01T00:00:00.000Z' }
      stored.set(model, saved)
      return saved
    },
    async remove (...args) { calls.push({ name: 'remove', args }); return stored.delete(args[1]) },
  }
  const dashboard: Pick<DashboardRepository, 'spend'> = {
    async spend (...args) { calls.push({ name: 'spend', args }); return byModel },
  }
  return { service: new ModelPricesService(prices, dashboard), calls, stored }
}

const errorOf = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e)

t.test('list: the user\'s prices and the models of the last 30 days\' events that had none', async (t) => {
  const { service, calls } = fakes([spend('gpt-4o', 0), spend('my-model', 3), spend('other', 1)])
  await service.put('u1', 'my-model', { inputPerMTok: 1, outputPerMTok: 2 })
  const before = Date.now()
  const res = await service.list(reader)
  const after = Date.now()
  t.same(res.prices.map((p) => p.model), ['my-model'])
  t.same(res.unpricedModels, [{ model: 'my-model', eventCount: 3 }, { model: 'other', eventCount: 1 }], 'only models with unpriced events')
  t.same(calls.find((c) => c.name === 'list')!.args, ['u1'])
  const [r, by, fromDay] = calls.find((c) => c.name === 'spend')!.args
  t.equal(r, reader)
  t.equal(by, 'model')
  t.ok([windowStart(before, UNPRICED_WINDOW_DAYS), windowStart(after, UNPRICED_WINDOW_DAYS)].includes(fromDay as string), `from ${String(fromDay)}`)
})

t.test('put: prices kept to six decimals, cache prices left out are null, the most allowed passed on', async (t) => {
  const { service, calls } = fakes()
  const saved = await service.put('u1', 'm', { inputPerMTok: 0.1234567, outputPerMTok: 3, cacheReadPerMTok: 0.0000006 })
  const expected: UserPrice = { inputPerMTok: 0.123457, outputPerMTok: 3, cacheReadPerMTok: 0.000001, cacheWritePerMTok: null }
  t.same(calls[0]!.args, ['u1', 'm', expected, MAX_MODEL_PRICES])
  t.match(saved, { model: 'm', ...expected })
  await service.put('u1', 'm', { inputPerMTok: 1, outputPerMTok: 1, cacheReadPerMTok: null, cacheWritePerMTok: 2.5 })
  t.same(calls[1]!.args[2], { inputPerMTok: 1, outputPerMTok: 1, cacheReadPerMTok: null, cacheWritePerMTok: 2.5 })
})

t.test('put: one more than the most allowed is a 409 saying what to do', async (t) => {
  const { service, stored } = fakes()
  for (let i = 0; i < MAX_MODEL_PRICES; i++) stored.set(`m${i}`, { model: `m${i}`, inputPerMTok: 1, outputPerMTok: 1, cacheReadPerMTok: null, cacheWritePerMTok: null, updatedAt: '' })
  const err = await errorOf(service.put('u1', 'one-more', { inputPerMTok: 1, outputPerMTok: 1 }))
  t.ok(err instanceof HttpError)
  t.match(err, {
    statusCode: 409,
    code: 'conflict',
    extra: { reason: 'too_many_prices', message: `you have ${MAX_MODEL_PRICES} model prices, the most allowed; delete one before adding another` },
  })
})

t.test('remove: a price that is not there is a 404', async (t) => {
  const { service, calls } = fakes()
  await service.put('u1', 'm', { inputPerMTok: 1, outputPerMTok: 1 })
  await service.remove('u1', 'm')
  t.same(calls.at(-1)!.args, ['u1', 'm'])
  t.match(await errorOf(service.remove('u1', 'm')), { statusCode: 404, code: 'not_found' })
})
