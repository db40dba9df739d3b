import t from 'tap'
import { createClient, ClickHouseLogLevel } from '@clickhouse/client'
import { buildTestApp, newUser, randomId, sendEvent, shipped } from '../helpers/app.ts'
import { startClickHouseEndpoint } from '../helpers/clickhouse-endpoint.ts'

// A ClickHouse server of its own (in both test modes): the database in its URL is this file's.
const endpoint = await startClickHouseEndpoint()
t.teardown(() => endpoint.close())

t.test('with a database in CLICKHOUSE_URL, the service creates it, migrates into it and ships there', async (t) => {
  const database = randomId('agent_telemetry_')
  const app = await buildTestApp(t, { CLICKHOUSE_URL: `${endpoint.url}/${database}` })
  const user = await newUser(app)
  const key = await user.createKey()
  t.equal((await sendEvent(app, key.secret, { agentId: 'db', type: 'decision' })).statusCode, 202)
  await shipped(app)

  const ch = createClient({ url: endpoint.url, log: { level: ClickHouseLogLevel.OFF } })
  t.teardown(() => ch.close())
  const tables = await ch.query({
    query: "SELECT database, count() AS n FROM system.tables WHERE name IN ('events', 'schema_migrations') AND database != 'system' GROUP BY database",
    format: 'JSONEachRow',
  })
  t.same(await tables.json(), [{ database, n: 2 }], 'the tables are in that database only')
  const rs = await ch.query({ query: `SELECT count() AS n FROM \`${database}\`.events WHERE user_id = {u:String}`, query_params: { u: user.id }, format: 'JSONEachRow' })
  t.same(await rs.json(), [{ n: 1 }])
})
