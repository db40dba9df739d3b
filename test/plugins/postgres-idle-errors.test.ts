import t from 'tap'
import { Writable } from 'node:stream'
import pg from 'pg'
import { testConfig, TEST_DATABASE_URL } from '../helpers/app.ts'
import { withDefaultUser } from '../../src/storage/postgres.ts'

// An idle pool connection that Postgres ends (a restart, an administrator, a proxy) is logged as one
// line an operator can read: the error and what happens next, never the client node-postgres hangs on
// it (its connection's parameters, the backend's process id and cancel key).
t.test('an idle Postgres connection that fails is logged without the client or its cancel key', async (t) => {
  const { buildApp } = await import('../../src/app.ts')
  const lines: Array<Record<string, any>> = []
  const stream = new Writable({ write (chunk, _enc, done) { for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l)); done() } })
  const app = await buildApp(testConfig(), { logger: { level: 'info', stream } })
  t.teardown(() => app.close())
  await app.ready()
  // Two idle connections of the app's pool, by their backend pids.
  const pids = await Promise.all([0, 1].map(async () => {
    const client = await app.db.connect()
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
    return { client, pid: rows[0]!.pid }
  }))
  for (const { client } of pids) client.release()
  const admin = new pg.Client({ connectionString: withDefaultUser(TEST_DATABASE_URL) })
  await admin.connect()
  t.teardown(() => admin.end())
  await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids.map((p) => p.pid)])
  const deadline = Date.now() + 5_000
  // Both ended connections are reported (and dropped from the pool) before the pool is used again.
  while (lines.filter((l) => l.msg?.startsWith('idle Postgres connection failed')).length < pids.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  const failed = lines.filter((l) => l.msg?.startsWith('idle Postgres connection failed'))
  t.ok(failed.length >= 1, 'the failure is logged')
  const line = JSON.stringify(failed[0])
  t.match(failed[0], { level: 50, error: { type: 'error', message: /terminat/, code: '57P01' } })
  t.notMatch(line, /secretKey|processID|"client"|password/i, 'no client, process id or cancel key in the line')
  t.ok(line.length < 2_000, `one readable line (${line.length} characters)`)
  t.equal((await app.db.query('SELECT 1 AS one')).rows[0].one, 1, 'the pool opens another connection when one is needed')
})
