import type { ModelPriceResolver } from '../../cache/model-price-resolver.ts'
import { passAll } from '../pipeline.ts'
import type { EventAck, IngestionStep } from './ingest-run.ts'

/** Where the `prices` step finds the model prices users set. */
export type UserPrices = Pick<ModelPriceResolver, 'peek' | 'get'>

/** Without a price resolver no user has prices of their own. */
export const NO_USER_PRICES: UserPrices = { peek: () => null, get: async () => null }

/**
 * `prices`: the model prices the caller's user set, once for the request, without waiting when this
 * process holds them (the usual case). Every event goes on: a model the user set no price for is
 * priced by the catalogue.
 */
export function pricesStep (parts: { prices: UserPrices }): IngestionStep {
  const { prices } = parts
  return {
    name: 'prices',
    run: (run, items) => {
      const held = prices.peek(run.caller.userId)
      if (held !== undefined) {
        run.prices = held
        return passAll<EventAck>(items)
      }
      return prices.get(run.caller.userId).then((table) => {
        run.prices = table
        return passAll<EventAck>(items)
      })
    },
  }
}
