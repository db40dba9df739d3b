import t from 'tap'
import pg from 'pg'
import { readdirSync } from 'node:fs'
import { TEST_DATABASE_URL, randomId } from '../helpers/env.ts'
import { openPostgres, withDefaultUser } from '../../src/storage/postgres.ts'

t.test('the migrations applied at start are reported (and none the second time), so the start log names them', async (t) => {
  const url = new URL(TEST_DATABASE_URL)
  const name = `agent_telemetry_${randomId('mig')}_test`
  url.pathname = `/${name}`
  const admin = new pg.Client({ connectionString: withDefaultUser(TEST_DATABASE_URL) })
  await admin.connect()
  t.teardown(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`)
    await admin.end()
  })
  const reported: string[][] = []
  const first = await openPostgres(url.toString(), undefined, (applied) => reported.push(applied))
  await first.end()
  const second = await openPostgres(url.toString(), undefined, (applied) => reported.push(applied))
  await second.end()
  const files = readdirSync(new URL('../../postgres/', import.meta.url)).filter((f) => /^\d+\.do\..*\.sql$/.test(f)).sort()
  t.same(reported, [files, []])
})
