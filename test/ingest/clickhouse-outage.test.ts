import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, ClickHouseLogLevel } from '@clickhouse/client'
import { buildTestApp, newUser, sendEvent, shipped } from '../helpers/app.ts'
import { startClickHouseEndpoint } from '../helpers/clickhouse-endpoint.ts'
import { seedClickHouseStore } from '../helpers/clickhouse-template.ts'

// A ClickHouse server of its own (in both test modes): this file stops it and starts it again.
const dataDir = mkdtempSync(join(tmpdir(), 'clickhouse-outage-'))
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
// Over a copy of the migrated template, as every test file's endpoint: the app finds nothing to migrate.
seedClickHouseStore(dataDir)
let endpoint = await startClickHouseEndpoint({ dataDir })
t.teardown(() => endpoint.close())
const port = Number(new URL(endpoint.url).port)
const app = await buildTestApp(t, { CLICKHOUSE_URL: endpoint.url })

async function health () {
  const res = await app.inject({ method: 'GET', url: '/health' })
  return res.json() as { ingest: { backlogRows: number; insertsFailing: { code: string; attempts: number } | null } }
}

t.test('with the ClickHouse server down, events are acknowledged, then stored exactly once when it is back', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  const send = async (n: number) => {
    const res = await Promise.all(Array.from({ length: n }, (_, i) => sendEvent(app, key.secret, { agentId: 'outage', type: 'tool', model: 'gpt-4o', durationMs: i })))
    return res.map((r) => r.statusCode)
  }
  t.same(await send(5), Array(5).fill(202))
  await shipped(app)

  await endpoint.close()
  t.same(await send(20), Array(20).fill(202), 'ingestion goes on while ClickHouse is down')
  const deadline = Date.now() + 30_000
  while ((await health()).ingest.insertsFailing === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
  const down = await health()
  t.match(down.ingest.insertsFailing, { code: /^E[A-Z]+$/ }, 'health names the failing inserts\' socket error')
  t.ok(down.ingest.backlogRows >= 20, 'the events wait in the ingest log')

  endpoint = await startClickHouseEndpoint({ dataDir, port })
  await shipped(app, 30_000)
  t.equal((await health()).ingest.insertsFailing, null, 'the shipper noticed the end of the outage')
  const ch = createClient({ url: endpoint.url, log: { level: ClickHouseLogLevel.OFF } })
  t.teardown(() => ch.close())
  const rs = await ch.query({
    query: 'SELECT count() AS n, uniqExact(event_id) AS ids, (SELECT sum(events) FROM spend_daily WHERE user_id = {u:String}) AS spend FROM events WHERE user_id = {u:String}',
    query_params: { u: user.id },
    format: 'JSONEachRow',
  })
  t.same(await rs.json(), [{ n: 25, ids: 25, spend: 25 }], 'every acknowledged event once, in events and in the rollup')
})
