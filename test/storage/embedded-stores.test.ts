import t from 'tap'
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { openPostgres } from '../../src/storage/postgres.ts'
import { embeddedStoreId, registerEmbeddedStore } from '../../src/storage/embedded-stores.ts'
import { ownTestDatabase } from '../helpers/env.ts'
import { TEST_CLICKHOUSE_URL, testConfig } from '../helpers/app.ts'

// Instances each with its own embedded ClickHouse on one Postgres database split the events between
// them: the one that starts beside another says so. A database of this file's own, so that the
// instances of other test files are not counted.
const DATABASE_URL = ownTestDatabase('embedded_stores')
const pool = await openPostgres(DATABASE_URL)
t.teardown(() => pool.end())
await pool.query('DELETE FROM embedded_stores')
const dirs = [0, 1, 2, 3].map(() => mkdtempSync(join(tmpdir(), 'embedded-store-')))
t.teardown(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }) })
const [dirA, dirB, dirC, dirD] = dirs as [string, string, string, string]
const failed: unknown[] = []
const fail = (err: unknown) => { failed.push(err) }

t.test('a store registered beside a live one is told about it; a stopped or silent one is not counted', async (t) => {
  const a = await registerEmbeddedStore(pool, dirA, fail)
  t.same(a.others, [], 'the first store is alone')
  t.equal(embeddedStoreId(dirA), embeddedStoreId(dirA), 'its id is kept in DATA_DIR')
  const b = await registerEmbeddedStore(pool, dirB, fail)
  t.match(b.others, [{ dataDir: dirA, pid: process.pid }], 'the second is told about the first')
  // A copied DATA_DIR is the same store, not another.
  copyFileSync(join(dirA, 'store-id'), join(dirC, 'store-id'))
  await a.stop()
  const c = await registerEmbeddedStore(pool, dirC, fail)
  t.match(c.others, [{ dataDir: dirB }], 'a stopped store is gone')
  t.equal(c.others.length, 1)
  await pool.query("UPDATE embedded_stores SET last_seen = now() - interval '5 minutes'")
  const d = await registerEmbeddedStore(pool, dirD, fail)
  t.same(d.others, [], 'a store without a heartbeat for minutes is not live')
  for (const s of [b, c, d]) await s.stop()
  t.same(failed, [])
})

t.test('the service warns at start when another instance with its own embedded store uses its database (a server: no store, no warning)', async (t) => {
  await pool.query("INSERT INTO embedded_stores (store_id, host, data_dir, pid) VALUES ('other-store', 'other-host', '/srv/other-data', 4242)")
  const lines: Array<{ level: number; msg: string; otherHost?: string; otherDataDir?: string }> = []
  const stream = new Writable({ write (chunk, _enc, done) { for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l)); done() } })
  const { buildApp } = await import('../../src/app.ts')
  const app = await buildApp(testConfig({ DATABASE_URL }), { logger: { level: 'warn', stream } })
  t.teardown(() => app.close())
  await app.ready()
  const warning = lines.find((l) => /another instance with its own embedded ClickHouse uses this Postgres database/.test(l.msg))
  const { rows } = await pool.query('SELECT count(*)::int AS n FROM embedded_stores')
  if (TEST_CLICKHOUSE_URL) {
    t.equal(warning, undefined, 'with CLICKHOUSE_URL the instance has no embedded store: nothing to warn about')
    t.equal(rows[0].n, 1, 'nor to record')
    return
  }
  t.match(warning, { level: 40, otherHost: 'other-host', otherDataDir: '/srv/other-data' })
  t.match(warning?.msg, /set CLICKHOUSE_URL on each/)
  t.equal(rows[0].n, 2, 'and records its own store beside it')
})
