import { userPriceTable, type UserPriceTable } from '../domain/pricing.ts'
import type { ModelPrice, ModelPricesRepository } from '../storage/model-prices-repository.ts'
import { SharedCache, type SharedCacheOptions } from './shared-cache.ts'

/**
 * The prices each user set, for ingestion: cached per user in this process and in Redis (see
 * SharedCache), compiled once per cached copy, looked up once per request. A change is pushed to
 * every instance at once (`forget`), so events ingested after it are priced by it.
 */
export class ModelPriceResolver {
  private readonly cache: SharedCache<ModelPrice[]>
  /** The compiled table of each cached list; a refreshed list is a new array, compiled again. */
  private readonly compiled = new WeakMap<ModelPrice[], UserPriceTable>()

  constructor (private readonly prices: Pick<ModelPricesRepository, 'list'>, cache: Omit<SharedCacheOptions, 'name'>) {
    this.cache = new SharedCache({ ...cache, name: 'model-prices' })
  }

  /** The user's prices, or null when the user has set none. */
  async get (userId: string): Promise<UserPriceTable | null> {
    return this.tableOf(await this.cache.get(userId, () => this.load(userId)))
  }

  /**
   * What this process holds, without waiting (the ingestion hot path): the user's prices, null when
   * the user has set none, undefined when this process does not know (then `get`).
   */
  peek (userId: string): UserPriceTable | null | undefined {
    const held = this.cache.peek(userId, () => this.load(userId))
    return held === undefined ? undefined : this.tableOf(held)
  }

  /** Forgets the user's prices on every instance (after a change). False when Redis could not be told. */
  forget (userId: string): Promise<boolean> {
    return this.cache.invalidate(userId)
  }

  // A user with no prices is cached as an empty list (a value), not as "missing", which lives shorter.
  private load (userId: string): Promise<ModelPrice[]> {
    return this.prices.list(userId)
  }

  private tableOf (list: ModelPrice[] | null): UserPriceTable | null {
    if (!list || list.length === 0) return null
    let table = this.compiled.get(list)
    if (!table) {
      table = userPriceTable(list.map((p) => [p.model, p] as const))
      this.compiled.set(list, table)
    }
    return table
  }
}
