import t from 'tap'
import type { ChildProcess } from 'node:child_process'
import { request } from 'undici'
import { enterpriseUserOf, exited, startService, waitHealthy, serviceSetup } from './helpers/service-process.ts'
import { TEST_CLICKHOUSE_ENV, TEST_CLICKHOUSE_URL } from './helpers/app.ts'
import { openClickHouse } from '../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../src/storage/events-repository.ts'
import { seedClickHouseStore } from './helpers/clickhouse-template.ts'

const { dataDir, base, env } = await serviceSetup('durability', TEST_CLICKHOUSE_ENV)
// The embedded store starts migrated, as each test app's does (server mode: the file's endpoint is).
if (!TEST_CLICKHOUSE_URL) seedClickHouseStore(dataDir)

function start (): ChildProcess {
  return startService(t, env)
}

/** Concurrent clients sending events until `stop()`; returns the ids that got a 202. */
function load (secret: string, clients: number) {
  const accepted: string[] = []
  const statuses = new Map<number, number>()
  let running = true
  const loops = Array.from({ length: clients }, async (_, c) => {
    let i = 0
    // eslint-disable-next-line no-unmodified-loop-condition -- another task changes it
    while (running) {
      try {
        const res = await request(`${base}/v1/events`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            agentId: `durable-${c % 4}`, reasoning: `client ${c} event ${i}`, model: 'gpt-4o', metadata: { sessionId: `s${c}`, tokensBreakdown: { output: 100 } },
            ...(i++ % 5 === 0 ? { outcome: 'failed', toolExecuted: 'http', errorMessage: `upstream ${c % 3} failed` } : {}),
          }),
        })
        const body = await res.body.json() as { eventId?: string }
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
        if (res.statusCode === 202 && body.eventId) accepted.push(body.eventId)
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }
  })
  return {
    accepted,
    statuses,
    stop: async () => {
      running = false
      await Promise.all(loops)
    },
  }
}

/** Resolves once `run` has had `n` events acknowledged: the load is under way (at most 60 s). */
async function underWay (run: { accepted: string[] }, n: number): Promise<void> {
  for (const deadline = Date.now() + 60_000; run.accepted.length < n && Date.now() < deadline;) await new Promise((resolve) => setTimeout(resolve, 20))
}

let child = start()
await waitHealthy(child, base)

// A user on the enterprise tier with a burst that load cannot reach, and a key, through the API.
const { userId, secret } = await enterpriseUserOf(base, dataDir, 'durability')

const allAccepted: string[] = []

t.test('SIGKILL mid-load loses no acknowledged event', async (t) => {
  const run = load(secret, 24)
  await underWay(run, 150)
  const gone = exited(child)
  child.kill('SIGKILL')
  t.equal((await gone).signal, 'SIGKILL')
  await run.stop()
  t.ok(run.accepted.length > 100, `events were accepted before the kill (${run.accepted.length})`)
  allAccepted.push(...run.accepted)
})

t.test('SIGTERM mid-load: in-flight requests finish, the process exits 0', async (t) => {
  child = start()
  await waitHealthy(child, base)
  const run = load(secret, 24)
  await underWay(run, 150)
  const gone = exited(child)
  child.kill('SIGTERM')
  const { code } = await gone
  await run.stop()
  t.equal(code, 0, 'clean exit')
  t.ok(run.accepted.length > 100, `events were accepted before the signal (${run.accepted.length})`)
  t.notOk(run.statuses.has(500), 'no request failed with a 500')
  allAccepted.push(...run.accepted)
})

t.test('after a restart the log ships: every event that got a 202 is stored exactly once, rollups agree', async (t) => {
  child = start()
  await waitHealthy(child, base)
  const deadline = Date.now() + 60_000
  let ingest = { backlogRows: -1, quarantinedRows: -1 }
  while (Date.now() < deadline) {
    const res = await request(`${base}/health`)
    ingest = ((await res.body.json()) as { ingest: typeof ingest }).ingest
    if (ingest.backlogRows === 0) break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.equal(ingest.backlogRows, 0, 'the backlog left by the kill and the stop is shipped')
  t.equal(ingest.quarantinedRows, 0, 'nothing quarantined: a write the kill cut short is not damage')
  const gone = exited(child)
  child.kill('SIGTERM')
  t.equal((await gone).code, 0)

  const handle = openClickHouse({ url: TEST_CLICKHOUSE_URL, dataDir })
  t.teardown(() => handle.release())
  const stored = await new EventsRepository(handle.client).existingIds(allAccepted)
  const lost = allAccepted.filter((id) => !stored.has(id))
  t.equal(lost.length, 0, `${allAccepted.length} acknowledged, ${lost.length} lost`)
  const q = async (sql: string) => Number((await (await handle.client.query({ query: sql, query_params: { u: userId }, format: 'JSONEachRow' })).json<{ n: string }>())[0]?.n ?? 0)
  const rows = await q('SELECT count() AS n FROM events WHERE user_id = {u:String}')
  t.ok(rows >= allAccepted.length, `${rows} rows (events synced but not yet answered when the process died count too)`)
  t.equal(await q('SELECT uniqExact(event_id) AS n FROM events WHERE user_id = {u:String}'), rows, 'no event stored twice')
  t.equal(await q('SELECT sum(events) AS n FROM spend_daily WHERE user_id = {u:String}'), rows, 'spend_daily equals the sum over events')
  const errors = await q("SELECT countIf(error_fingerprint != '') AS n FROM events WHERE user_id = {u:String}")
  t.ok(errors > 0)
  t.equal(await q('SELECT sum(events) AS n FROM error_clusters_hourly WHERE user_id = {u:String}'), errors, 'the error rollup equals the error events')
  t.equal(await q('SELECT sum(events) AS n FROM error_clusters_daily WHERE user_id = {u:String}'), errors, 'so does the daily one')
  t.equal(await q('SELECT sum(events) AS n FROM agent_hourly WHERE user_id = {u:String}'), rows, 'agent_hourly equals the sum over events')
  const inGroups = async (kind: string, column: string) => [
    await q(`SELECT sum(events) AS n FROM group_totals WHERE user_id = {u:String} AND kind = '${kind}'`),
    await q(`SELECT countIf(${column} != '') AS n FROM events WHERE user_id = {u:String}`),
  ]
  const [sessions, withSession] = await inGroups('session', 'session_id')
  t.equal(sessions, withSession, 'the session totals count each event of a session once')
  const [traces, withTrace] = await inGroups('trace', 'trace_id')
  t.equal(traces, withTrace, 'so do the trace totals')
})
