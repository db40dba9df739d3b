import t from 'tap'
import { request } from 'undici'
import { enterpriseUserOf, exited, startService, waitHealthy, serviceSetup } from './helpers/service-process.ts'
import { TEST_CLICKHOUSE_ENV, TEST_CLICKHOUSE_URL, randomId } from './helpers/app.ts'
import { openClickHouse } from '../src/storage/clickhouse-client.ts'
import { seedClickHouseStore } from './helpers/clickhouse-template.ts'

// Scores acknowledged (synced to the ingest log) but not yet shipped when the service is SIGKILLed
// are shipped at the next start, each write stored once, and read as the latest write of each id.

const { dataDir, base, env } = await serviceSetup('score-durability', TEST_CLICKHOUSE_ENV)
if (!TEST_CLICKHOUSE_URL) seedClickHouseStore(dataDir)

async function post (path: string, secret: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await request(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: res.statusCode, body: await res.body.json() }
}

async function backlogRows (): Promise<number> {
  const res = await request(`${base}/health`)
  return ((await res.body.json()) as { ingest: { backlogRows: number } }).ingest.backlogRows
}

async function until (what: string, check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  for (const deadline = Date.now() + ms; Date.now() < deadline;) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${what}: not within ${ms} ms`)
}

/** The user's score rows in the store: how many, how many distinct row ids, and the latest write (row id and value) per score id. */
async function storedScores (userId: string) {
  const handle = openClickHouse({ url: TEST_CLICKHOUSE_URL, dataDir })
  try {
    const q = async <T>(query: string) => (await handle.client.query({ query, query_params: { u: userId }, format: 'JSONEachRow' })).json<T>()
    const [counts] = await q<{ n: string; rows: string }>('SELECT count() AS n, uniqExact(row_id) AS rows FROM scores WHERE user_id = {u:String}')
    const latest = await q<{ id: string; row: string; v: number }>('SELECT score_id AS id, argMax(row_id, version) AS row, argMax(value, version) AS v FROM scores WHERE user_id = {u:String} GROUP BY score_id ORDER BY score_id')
    return { writes: Number(counts!.n), rowIds: Number(counts!.rows), latest: new Map(latest.map((x) => [x.id, `${x.row} ${Number(x.v)}`])) }
  } finally {
    handle.release()
  }
}

t.test('SIGKILL with scores in the ingest log, not shipped: after a restart each write is stored once', async (t) => {
  // The shipper waits a minute after each insert before the next read: what is appended in that
  // minute stays in the log (no /v1/me read cuts the wait short: none is made until the restart).
  let child = startService(t, { ...env, INGEST_SHIP_MIN_INTERVAL_MS: '60000' })
  await waitHealthy(child, base)
  const { userId, secret } = await enterpriseUserOf(base, dataDir, 'score-durability')
  const traceId = randomId('durable-trace-')
  // One event ships at once (the shipper was idle) and starts the minute's wait.
  t.equal((await post('/v1/events', secret, { agentId: 'durable', type: 'decision', metadata: { traceId } })).status, 202)
  await until('the first event shipped', async () => (await backlogRows()) === 0)

  /** Per score id, its last write acknowledged: `<row id> <value>`. */
  const expected = new Map<string, string>()
  const first = await post('/v1/scores/batch', secret, { scores: Array.from({ length: 100 }, (_, i) => ({ scoreId: `k-${i}`, traceId, name: 'quality', value: i / 100 })) })
  t.equal(first.status, 207)
  first.body.results.forEach((r: { id: string; scoreId: string }, i: number) => expected.set(r.scoreId, `${r.id} ${i / 100}`))
  // Re-sent ids, one by one (the same id twice, in two requests), and scores without an id.
  for (let i = 0; i < 20; i++) {
    const again = await post('/v1/scores', secret, { scoreId: `k-${i}`, traceId, name: 'quality', value: 1 })
    t.equal(again.status, 202)
    expected.set(`k-${i}`, `${again.body.id} 1`)
  }
  const anonymous = await post('/v1/scores/batch', secret, { scores: Array.from({ length: 50 }, (_, i) => ({ traceId, name: 'quality', value: 0.5 + i / 1000 })) })
  t.equal(anonymous.status, 207)
  anonymous.body.results.forEach((r: { id: string; scoreId: string }, i: number) => expected.set(r.scoreId, `${r.id} ${0.5 + i / 1000}`))
  const writes = 100 + 20 + 50
  t.ok([...first.body.results, ...anonymous.body.results].every((r: { accepted: boolean }) => r.accepted), 'every score acknowledged')
  t.equal(await backlogRows(), writes, 'every score write is in the log, none shipped')

  const gone = exited(child)
  child.kill('SIGKILL')
  t.equal((await gone).signal, 'SIGKILL')
  t.equal((await storedScores(userId)).writes, 0, 'nothing of them reached the store before the kill')

  child = startService(t, env)
  await waitHealthy(child, base)
  await until('the backlog shipped after the restart', async () => (await backlogRows()) === 0)
  const stopped = exited(child)
  child.kill('SIGTERM')
  t.equal((await stopped).code, 0)

  const stored = await storedScores(userId)
  // A block's older writes of one id may be replaced as it is written (the engine's merge on
  // insert), so fewer rows than writes can be stored; none may be stored twice, none lost.
  t.ok(stored.writes >= expected.size && stored.writes <= writes, `${writes} writes acknowledged, ${stored.writes} rows stored`)
  t.equal(stored.rowIds, stored.writes, 'no write stored twice (each row id once)')
  t.equal(stored.latest.size, expected.size, 'every score id')
  t.same(Object.fromEntries(stored.latest), Object.fromEntries(expected), 'each score is its last write acknowledged (its row id and value)')
})
