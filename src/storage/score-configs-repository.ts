import type pg from 'pg'
import type { ScoreConfig, ScoreConfigInput } from '../domain/score-config.ts'
import { scoreAlertRuleOf } from '../domain/score-alerts.ts'
import { underUserLock } from './postgres.ts'
import { iso } from './timestamps.ts'
import { ChangeListeners, type ChangeListener } from './change-listeners.ts'

function toConfig (r: Record<string, any>): ScoreConfig {
  return {
    name: r.name,
    dataType: r.data_type,
    min: r.min_value,
    max: r.max_value,
    labels: r.labels,
    description: r.description,
    alert: r.alert,
    updatedAt: iso(r.updated_at),
  }
}

/** A config a user set (`put`, new or in place of the one there was) or removed. */
export type ScoreConfigChange = { kind: 'put' | 'removed'; userId: string; name: string }

/**
 * The score configs users set, in Postgres (postgres/010). Each change is announced to `onChanged`
 * listeners (the cache of configs that ingestion checks scores against).
 */
export class ScoreConfigsRepository {
  private readonly changes = new ChangeListeners<ScoreConfigChange>()

  constructor (private readonly db: pg.Pool) {}

  /** Calls `listener` after each successful put or removal, before the write's call returns; returns the unsubscribe. */
  onChanged (listener: ChangeListener<ScoreConfigChange>): () => void {
    return this.changes.add(listener)
  }

  /** The user's configs, by name. */
  async list (userId: string): Promise<ScoreConfig[]> {
    const { rows } = await this.db.query('/* svc:score_configs_list */ SELECT * FROM score_configs WHERE user_id = $1 ORDER BY name', [userId])
    return rows.map(toConfig)
  }

  /** Every config with an alert rule, of every user (the anomaly tick evaluates them). */
  async withAlerts (): Promise<(ScoreConfig & { userId: string })[]> {
    const { rows } = await this.db.query('/* svc:score_configs_alerting */ SELECT * FROM score_configs WHERE alert IS NOT NULL ORDER BY user_id, name')
    return rows.map((r) => ({ ...toConfig(r), userId: r.user_id }))
  }

  async get (userId: string, name: string): Promise<ScoreConfig | null> {
    const { rows } = await this.db.query('/* svc:score_configs_get */ SELECT * FROM score_configs WHERE user_id = $1 AND name = $2', [userId, name])
    return rows[0] ? toConfig(rows[0]) : null
  }

  /**
   * Sets the user's config of a name (a new one, or in place of the one there was). Null when the
   * name has no config yet and the user already has `max`: counted and inserted under a lock of the
   * user's row, so concurrent requests cannot pass the limit together.
   */
  async put (userId: string, name: string, c: ScoreConfigInput, max: number): Promise<ScoreConfig | null> {
    const rows = await underUserLock(this.db, userId, async (client) => (await client.query(
      `/* svc:score_configs_put */ INSERT INTO score_configs AS c (user_id, name, data_type, min_value, max_value, labels, description, alert)
       SELECT $1, $2, $3, $4, $5, $6, $7, $9
       WHERE (SELECT count(*) FROM score_configs WHERE user_id = $1) < $8
          OR EXISTS (SELECT 1 FROM score_configs WHERE user_id = $1 AND name = $2)
       ON CONFLICT (user_id, name) DO UPDATE SET data_type = EXCLUDED.data_type, min_value = EXCLUDED.min_value, max_value = EXCLUDED.max_value,
         labels = EXCLUDED.labels, description = EXCLUDED.description, alert = EXCLUDED.alert, updated_at = now()
       RETURNING *`,
      [userId, name, c.dataType, c.min ?? null, c.max ?? null, c.labels ?? null, c.description ?? null, max, c.alert ? JSON.stringify(scoreAlertRuleOf(c.alert)) : null],
    )).rows)
    if (!rows[0]) return null
    await this.changes.emit({ kind: 'put', userId, name })
    return toConfig(rows[0])
  }

  /** Removes the user's config of a name; false when there was none. */
  async remove (userId: string, name: string): Promise<boolean> {
    const { rowCount } = await this.db.query('/* svc:score_configs_delete */ DELETE FROM score_configs WHERE user_id = $1 AND name = $2', [userId, name])
    if (rowCount !== 1) return false
    await this.changes.emit({ kind: 'removed', userId, name })
    return true
  }
}
