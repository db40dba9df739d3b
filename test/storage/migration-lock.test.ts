import t from 'tap'
import { readdirSync } from 'node:fs'
import { TEST_DATABASE_URL, openEmptyTestClickHouse } from '../helpers/app.ts'
import { createPool } from '../../src/storage/postgres.ts'
import { migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { withPostgresLock } from '../../src/storage/migration-lock.ts'

// This file's data directory is fresh: nothing has migrated its engine yet.
const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
const KEY = 900_000_000 + Math.floor(Math.random() * 1_000_000)

t.test('instances starting at once migrate one after the other, and each migration is applied once', async (t) => {
  const pools = [createPool(TEST_DATABASE_URL, { connectMs: 2000, statementMs: 5000, idleInTransactionMs: 10000 }), createPool(TEST_DATABASE_URL)]
  t.teardown(() => Promise.all(pools.map((p) => p.end())))
  const spans: Array<{ start: number; end: number; applied: string[] }> = []
  let waited = 0
  await Promise.all(pools.map((pool) => withPostgresLock(pool, KEY, async () => {
    const start = performance.now()
    const applied = await migrateClickHouse(handle.client)
    spans.push({ start, end: performance.now(), applied })
  }, () => { waited++ })))
  const files = readdirSync(new URL('../../clickhouse/', import.meta.url)).filter((f) => /^\d+_.*\.sql$/.test(f)).sort()
  spans.sort((a, b) => a.start - b.start)
  t.same(spans[0]!.applied, files, 'the first applies every migration')
  t.same(spans[1]!.applied, [], 'the second finds nothing left')
  t.ok(spans[1]!.start >= spans[0]!.end, 'the runs did not overlap')
  t.equal(waited, 1, 'one instance waited for the other')
  const rs = await handle.client.query({ query: 'SELECT version, count() AS n FROM schema_migrations GROUP BY version HAVING n > 1', format: 'JSONEachRow' })
  t.same(await rs.json(), [], 'no migration recorded twice')
})

t.test('the lock is released when the migration fails', async (t) => {
  const pool = createPool(TEST_DATABASE_URL)
  t.teardown(() => pool.end())
  await t.rejects(withPostgresLock(pool, KEY, async () => { throw new Error('boom') }), /boom/)
  t.equal(await withPostgresLock(pool, KEY, async () => 'again'), 'again')
})
