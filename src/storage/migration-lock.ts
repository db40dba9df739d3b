import type pg from 'pg'

// An arbitrary constant (not the Postgres migrations' one): serialises ClickHouse migrations across
// every process that shares the Postgres database, i.e. every instance of one deployment.
export const CLICKHOUSE_MIGRATION_LOCK = 738_201_118
const POLL_MS = 250
const MAX_WAIT_MS = 15 * 60_000

/**
 * Runs `fn` while holding a Postgres advisory lock, so instances starting at once (api and worker
 * containers, several replicas) run it one after the other: the second then finds every migration
 * applied. Polls with pg_try_advisory_lock rather than waiting inside one statement, which the pool's
 * statement timeout would cancel during a long migration.
 */
export async function withPostgresLock<T> (pool: pg.Pool, key: number, fn: () => Promise<T>, onWait?: () => void): Promise<T> {
  const client = await pool.connect()
  let locked = false
  try {
    const deadline = Date.now() + MAX_WAIT_MS
    let waited = false
    for (;;) {
      const res = await client.query<{ locked: boolean }>('/* svc:migration_lock */ SELECT pg_try_advisory_lock($1) AS locked', [key])
      if (res.rows[0]!.locked) break
      if (!waited) onWait?.()
      waited = true
      if (Date.now() > deadline) throw new Error(`waited ${MAX_WAIT_MS / 60_000} minutes for another instance's migrations (Postgres advisory lock ${key})`)
      await new Promise((resolve) => setTimeout(resolve, POLL_MS))
    }
    locked = true
    return await fn()
  } finally {
    if (locked) await client.query('SELECT pg_advisory_unlock($1)', [key]).catch(() => {})
    client.release()
  }
}
