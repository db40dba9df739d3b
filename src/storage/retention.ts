import type pg from 'pg'
import type { ClickHouseClient } from '@clickhouse/client'

/** How long each kind of data is kept, in days; 0 keeps it forever. */
export interface RetentionDays {
  events: number
  rollups: number
  alerts: number
  waitlist: number
}

/**
 * The ClickHouse tables with a TTL, and the time column their rows expire by: events by when they were
 * received (an event sent today with an old timestamp is kept like any other), rollups by their day or
 * hour (they hold no receive time), and the totals of a session or trace with its newest event.
 */
const TTL_TABLES = [
  { table: 'events', column: 'received_at', kind: 'events' },
  { table: 'spend_daily', column: 'day', kind: 'rollups' },
  { table: 'error_clusters_hourly', column: 'hour', kind: 'rollups' },
  { table: 'error_clusters_daily', column: 'day', kind: 'rollups' },
  { table: 'agent_hourly', column: 'hour', kind: 'rollups' },
  // A session's or trace's totals go with its newest event: the lists find groups by their events.
  { table: 'group_totals', column: 'last_received', kind: 'events' },
] as const

/** Rows deleted per Postgres statement, so a large clean-up never holds locks for long. */
const DELETE_BATCH = 5000

function ttlExpression (column: string, days: number): string {
  return `toDateTime(${column}) + toIntervalDay(${days})`
}

/**
 * Sets the TTL of events and the rollups from the settings, when it differs from what the tables
 * have (so starting twice, or two processes starting at once, changes nothing). Rows past their TTL
 * are removed as the engine merges parts (within a few hours); existing parts are not rewritten at
 * once (materialize_ttl_after_modify = 0), so a start never stalls on a large table.
 * Returns the tables changed.
 */
export async function applyRetentionTtl (client: ClickHouseClient, days: RetentionDays): Promise<string[]> {
  const changed: string[] = []
  for (const { table, column, kind } of TTL_TABLES) {
    const rs = await client.query({
      query: '/* svc:retention_ttl */ SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = {table:String}',
      query_params: { table },
      format: 'JSONEachRow',
    })
    const [row] = await rs.json<{ engine_full: string }>()
    if (!row) continue
    const current = /\bTTL (.*?)(?: SETTINGS |$)/.exec(row.engine_full)?.[1]?.trim()
    const wanted = days[kind] > 0 ? ttlExpression(column, days[kind]) : undefined
    if (current === wanted) continue
    if (!wanted) {
      await client.command({ query: `/* svc:retention_ttl */ ALTER TABLE ${table} REMOVE TTL` })
    } else {
      // A SETTINGS clause rather than client settings: the embedded engine would keep a SET for the session.
      await client.command({ query: `/* svc:retention_ttl */ ALTER TABLE ${table} MODIFY TTL ${wanted} SETTINGS materialize_ttl_after_modify = 0` })
    }
    changed.push(table)
  }
  return changed
}

/**
 * Deletes cleared alerts, finished notification deliveries (kept as long as cleared alerts) and
 * waitlist sign-ups older than their retention, in batches. Idempotent: a second run deletes nothing
 * more. Returns the rows deleted per table.
 */
export async function cleanPostgres (db: pg.Pool, days: RetentionDays): Promise<{ alerts: number; deliveries: number; waitlist: number }> {
  const deleted = { alerts: 0, deliveries: 0, waitlist: 0 }
  const rounds = async (sql: string, keepDays: number) => {
    if (keepDays <= 0) return 0
    let total = 0
    for (;;) {
      const res = await db.query(sql, [keepDays, DELETE_BATCH])
      total += res.rowCount ?? 0
      if ((res.rowCount ?? 0) < DELETE_BATCH) return total
    }
  }
  deleted.alerts = await rounds(`/* svc:retention_alerts */ DELETE FROM alerts WHERE id IN (
      SELECT id FROM alerts WHERE cleared_at < now() - make_interval(days => $1::int) LIMIT $2)`, days.alerts)
  deleted.deliveries = await rounds(`/* svc:retention_deliveries */ DELETE FROM notification_deliveries WHERE id IN (
      SELECT id FROM notification_deliveries WHERE finished_at < now() - make_interval(days => $1::int) LIMIT $2)`, days.alerts)
  deleted.waitlist = await rounds(`/* svc:retention_waitlist */ DELETE FROM waitlist WHERE id IN (
      SELECT id FROM waitlist WHERE created_at < now() - make_interval(days => $1::int) LIMIT $2)`, days.waitlist)
  return deleted
}
