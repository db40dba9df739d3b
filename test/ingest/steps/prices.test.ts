import t from 'tap'
import { NO_USER_PRICES, pricesStep } from '../../../src/ingest/steps/prices.ts'
import type { UserPriceTable } from '../../../src/domain/pricing.ts'
import { deferred, event, items, run } from './fixtures.ts'

const table = new Map([['gpt-x', { input: 1, output: 2 }]]) as unknown as UserPriceTable

t.test('prices: held prices are set on the run without a promise; every event goes on', async (t) => {
  const r = run()
  const verdicts = pricesStep({ prices: { peek: () => table, get: async () => { throw new Error('not expected') } } }).run(r, items(event('a'), event('a')))
  t.same(verdicts, [undefined, undefined])
  t.equal(r.prices, table)
})

t.test('prices: prices not held are looked up once for the request', async (t) => {
  const r = run()
  const looked = deferred<UserPriceTable | null>()
  const asked: string[] = []
  const pending = pricesStep({ prices: { peek: () => undefined, get: (userId) => { asked.push(userId); return looked.promise } } }).run(r, items(event('a'), event('a')))
  t.ok(pending instanceof Promise)
  looked.resolve(table)
  t.same(await pending, [undefined, undefined])
  t.equal(r.prices, table)
  t.same(asked, ['user-1'])
})

t.test('prices: without prices of their own users are priced by the catalogue (null)', async (t) => {
  const r = run()
  t.same(pricesStep({ prices: NO_USER_PRICES }).run(r, items(event('a'))), [undefined])
  t.equal(r.prices, null)
})
