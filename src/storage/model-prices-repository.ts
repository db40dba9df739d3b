import type pg from 'pg'
import type { UserPrice } from '../domain/pricing.ts'
import { underUserLock } from './postgres.ts'
import { iso } from './timestamps.ts'
import { ChangeListeners, type ChangeListener } from './change-listeners.ts'

/** A price a user set for a model, as listed and answered. */
export type ModelPrice = { model: string } & UserPrice & { updatedAt: string }

const numberOrNull = (value: unknown): number | null => (value === null ? null : Number(value))

function toModelPrice (r: Record<string, any>): ModelPrice {
  // numeric columns arrive as text ('0.150000'): six decimal places, which a double holds as typed.
  return {
    model: r.model,
    inputPerMTok: Number(r.input_per_mtok),
    outputPerMTok: Number(r.output_per_mtok),
    cacheReadPerMTok: numberOrNull(r.cache_read_per_mtok),
    cacheWritePerMTok: numberOrNull(r.cache_write_per_mtok),
    updatedAt: iso(r.updated_at),
  }
}

/** A price a user set (`put`, new or in place of the one there was) or removed. */
export type ModelPriceChange = { kind: 'put' | 'removed'; userId: string; model: string }

/**
 * The prices users set for models, in Postgres (postgres/008). Each change is announced to
 * `onChanged` listeners (the caches of users' prices).
 */
export class ModelPricesRepository {
  private readonly changes = new ChangeListeners<ModelPriceChange>()

  constructor (private readonly db: pg.Pool) {}

  /** Calls `listener` after each successful put or removal, before the write's call returns; returns the unsubscribe. */
  onChanged (listener: ChangeListener<ModelPriceChange>): () => void {
    return this.changes.add(listener)
  }

  /** The user's prices, by model name. */
  async list (userId: string): Promise<ModelPrice[]> {
    const { rows } = await this.db.query(
      '/* svc:model_prices_list */ SELECT * FROM model_prices WHERE user_id = $1 ORDER BY model',
      [userId],
    )
    return rows.map(toModelPrice)
  }

  /**
   * Sets the user's price for a model (a new one, or in place of the one there was). Null when the
   * model has no price yet and the user already has `max`: the count and the insert run under a lock
   * of the user's row, so concurrent requests cannot pass the limit together.
   */
  async put (userId: string, model: string, price: UserPrice, max: number): Promise<ModelPrice | null> {
    const rows = await underUserLock(this.db, userId, async (client) => (await client.query(
      `/* svc:model_prices_put */ INSERT INTO model_prices AS p (user_id, model, input_per_mtok, output_per_mtok, cache_read_per_mtok, cache_write_per_mtok)
       SELECT $1, $2, $3, $4, $5, $6
       WHERE (SELECT count(*) FROM model_prices WHERE user_id = $1) < $7
          OR EXISTS (SELECT 1 FROM model_prices WHERE user_id = $1 AND model = $2)
       ON CONFLICT (user_id, model) DO UPDATE SET input_per_mtok = EXCLUDED.input_per_mtok, output_per_mtok = EXCLUDED.output_per_mtok,
         cache_read_per_mtok = EXCLUDED.cache_read_per_mtok, cache_write_per_mtok = EXCLUDED.cache_write_per_mtok, updated_at = now()
       RETURNING *`,
      [userId, model, price.inputPerMTok, price.outputPerMTok, price.cacheReadPerMTok, price.cacheWritePerMTok, max],
    )).rows)
    if (!rows[0]) return null
    await this.changes.emit({ kind: 'put', userId, model })
    return toModelPrice(rows[0])
  }

  /** Removes the user's price for a model; false when there was none. */
  async remove (userId: string, model: string): Promise<boolean> {
    const { rowCount } = await this.db.query('/* svc:model_prices_delete */ DELETE FROM model_prices WHERE user_id = $1 AND model = $2', [userId, model])
    if (rowCount !== 1) return false
    await this.changes.emit({ kind: 'removed', userId, model })
    return true
  }
}
