import { windowStart } from '../domain/dashboard.ts'
import { keptPerMTok, type UserPrice } from '../domain/pricing.ts'
import { HttpError, conflict, notFound, validationFailed } from '../http-error.ts'
import type { DashboardRepository, Reader } from '../storage/dashboard-repository.ts'
import type { ModelPrice, ModelPricesRepository } from '../storage/model-prices-repository.ts'
import { unpricedModels } from './dashboard-service.ts'
import { MAX_MODEL_PRICES, UNPRICED_WINDOW_DAYS } from '../../schemas/model-price.ts'

/** What the service reads and changes of the model prices repository. */
export type PriceStore = Pick<ModelPricesRepository, 'list' | 'put' | 'remove'>

/** A price as the PUT body has it: the cache prices may be left out. */
type PriceBody = Omit<UserPrice, 'cacheReadPerMTok' | 'cacheWritePerMTok'> & { cacheReadPerMTok?: number | null; cacheWritePerMTok?: number | null }

/**
 * The prices a user sets for models. A change is forgotten by every instance's cache before it is
 * answered (the repository tells its `onChanged` listeners before its write returns), so the user's
 * events ingested after the answer are priced by it; events already ingested keep the cost they
 * were stored with.
 */
export class ModelPricesService {
  constructor (
    private readonly prices: PriceStore,
    private readonly dashboard: Pick<DashboardRepository, 'spend'>,
  ) {}

  /** The user's prices, and the models their events of the last UNPRICED_WINDOW_DAYS days used without one. */
  async list (r: Reader) {
    const [prices, byModel] = await Promise.all([
      this.prices.list(r.userId),
      this.dashboard.spend(r, 'model', windowStart(Date.now(), UNPRICED_WINDOW_DAYS)),
    ])
    return { prices, unpricedModels: unpricedModels(byModel) }
  }

  /** Sets the user's price for a model; 409 when it would be one more than MAX_MODEL_PRICES. */
  async put (userId: string, model: string, body: PriceBody): Promise<ModelPrice> {
    if (model.trim() === '') throw new HttpError(400, 'validation_failed', { message: 'the path is not valid', details: [{ path: ['model'], message: 'must not be blank' }] })
    // A price is kept to 6 decimals: one that would be kept as 0 is refused, not made free.
    const lost = (['inputPerMTok', 'outputPerMTok', 'cacheReadPerMTok', 'cacheWritePerMTok'] as const)
      .filter((k) => typeof body[k] === 'number' && body[k]! > 0 && keptPerMTok(body[k]!) === 0)
    if (lost.length > 0) throw validationFailed(lost.map((k) => ({ path: [k], message: 'must be 0 or at least 0.000001 (prices are kept to 6 decimals)' })))
    const price: UserPrice = {
      inputPerMTok: keptPerMTok(body.inputPerMTok),
      outputPerMTok: keptPerMTok(body.outputPerMTok),
      cacheReadPerMTok: keptOrNull(body.cacheReadPerMTok),
      cacheWritePerMTok: keptOrNull(body.cacheWritePerMTok),
    }
    const saved = await this.prices.put(userId, model, price, MAX_MODEL_PRICES)
    if (!saved) throw conflict('too_many_prices', `you have ${MAX_MODEL_PRICES} model prices, the most allowed; delete one before adding another`)
    return saved
  }

  /** Removes the user's price for a model; 404 when there is none. */
  async remove (userId: string, model: string): Promise<void> {
    if (!(await this.prices.remove(userId, model))) throw notFound()
  }
}

function keptOrNull (perMTok: number | null | undefined): number | null {
  return perMTok === undefined || perMTok === null ? null : keptPerMTok(perMTok)
}
