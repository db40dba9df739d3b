import type pg from 'pg'
import type { ClickHouseClient } from '@clickhouse/client'

/** Rows read from Postgres per round trip. */
const PAGE = 5000
/**
 * How far before the last copied change the next copy starts reading: a change made in a transaction
 * that commits later than a newer one would otherwise be skipped. Re-copying a row is harmless
 * (ReplacingMergeTree keeps one version).
 */
const OVERLAP = '5 minutes'

interface Source {
  pgTable: 'agents' | 'users'
  chTable: 'agent_names' | 'user_handles'
  columns: string
}

const SOURCES: Source[] = [
  {
    pgTable: 'agents',
    chTable: 'agent_names',
    columns: `id AS agent_id, coalesce(owner_id, '') AS user_id, display_name, coalesce(sns_name, '') AS sns_name,
      deleted_at IS NOT NULL AS deleted`,
  },
  { pgTable: 'users', chTable: 'user_handles', columns: 'id AS user_id, coalesce(handle, \'\') AS handle' },
]

/**
 * Copies agent display names and user handles from Postgres to ClickHouse (agent_names,
 * user_handles), so analysts can name agents and users without Postgres. Reads only what changed
 * since the newest version already in ClickHouse (minus a safety overlap); idempotent.
 */
export class NamesCopier {
  constructor (private readonly db: pg.Pool, private readonly clickhouse: ClickHouseClient) {}

  /** Copies what changed; returns the rows written per ClickHouse table. */
  async copyChanged (): Promise<Record<string, number>> {
    const written: Record<string, number> = {}
    for (const source of SOURCES) written[source.chTable] = await this.copy(source)
    return written
  }

  private async copy (source: Source): Promise<number> {
    const rs = await this.clickhouse.query({
      query: `/* svc:names_watermark */ SELECT toString(toUnixTimestamp64Micro(max(changed_at))) AS us FROM ${source.chTable}`,
      format: 'JSONEachRow',
    })
    const us = (await rs.json<{ us: string }>())[0]?.us ?? '0'
    let after: { at: string; id: string } = { at: '', id: '' }
    let copied = 0
    for (;;) {
      const page = await this.db.query(
        `/* svc:names_changed */ SELECT ${source.columns}, id,
           to_char(names_changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS changed_at
         FROM ${source.pgTable}
         WHERE names_changed_at >= to_timestamp($1::numeric / 1000000) - interval '${OVERLAP}'
           AND ($2 = '' OR (to_char(names_changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), id) > ($2, $3))
         ORDER BY names_changed_at, id
         LIMIT ${PAGE}`,
        [us, after.at, after.id],
      )
      if (page.rows.length === 0) break
      const values = page.rows.map(({ id: _id, ...row }) => row)
      await this.clickhouse.insert({ table: source.chTable, values, format: 'JSONEachRow' })
      copied += page.rows.length
      const last = page.rows[page.rows.length - 1]
      after = { at: last.changed_at, id: last.id }
      if (page.rows.length < PAGE) break
    }
    return copied
  }
}
