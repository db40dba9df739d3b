import t from 'tap'
import { buildTestApp, newUser, randomId, sendEvent, shipped } from '../helpers/app.ts'
import { eventLine } from '../../src/storage/events-repository.ts'
import { buildEventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'

const TOKEN = 'metrics-token-for-tests'
const app = await buildTestApp(t, { METRICS_TOKEN: TOKEN })

/** The value of one sample line (name with labels, as printed), or undefined. */
function sample (text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue
    return Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return undefined
}

async function scrape (): Promise<string> {
  return (await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).body
}

t.test('GET /metrics needs its own token', async (t) => {
  t.equal((await app.inject({ method: 'GET', url: '/metrics' })).statusCode, 401)
  t.equal((await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `bearer  ${TOKEN} ` } })).statusCode, 200, 'the scheme in any case, as every Bearer route')
  t.equal((await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer wrong-token-of-some-length' } })).statusCode, 401)
  const user = await newUser(app)
  t.equal((await app.inject({ method: 'GET', url: '/metrics', headers: user.auth })).statusCode, 401, 'a dashboard token is not enough')
  const none = await buildTestApp(t)
  t.equal((await none.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).statusCode, 404, 'no METRICS_TOKEN: no route')
})

t.test('ingestion, the ingest log, the shipper, queues and the process are measured', async (t) => {
  const user = await newUser(app)
  const key = await user.createKey()
  for (let i = 0; i < 3; i++) t.equal((await sendEvent(app, key.secret, { agentId: randomId('a-') })).statusCode, 202)
  t.equal((await sendEvent(app, 'vk_not_a_key', { agentId: 'x' })).statusCode, 401)
  await shipped(app)
  const res = await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  const text = res.body
  const p = 'agent_telemetry_'
  t.ok(sample(text, `${p}http_request_duration_seconds_count`, { route: '/v1/events', method: 'POST', status: '202' })! >= 3)
  t.ok(sample(text, `${p}ingest_responses_total`, { route: '/v1/events', status: '202' })! >= 3)
  t.ok(sample(text, `${p}ingest_responses_total`, { route: '/v1/events', status: '401' })! >= 1)
  t.ok(sample(text, `${p}events_accepted_total`)! >= 3)
  t.ok(sample(text, `${p}shipper_batch_rows_sum`)! >= 3)
  t.ok(sample(text, `${p}shipper_insert_duration_seconds_count`)! >= 1)
  t.equal(sample(text, `${p}ingest_log_backlog_rows`), 0)
  t.equal(sample(text, `${p}ingest_log_oldest_age_seconds`), 0)
  t.equal(sample(text, `${p}shipper_inserts_failing`), 0)
  t.not(sample(text, `${p}queue_jobs`, { queue: 'anomaly', state: 'waiting' }), undefined)
  t.not(sample(text, `${p}queue_jobs`, { queue: 'maintenance', state: 'failed' }), undefined)
  t.not(sample(text, `${p}process_cpu_user_seconds_total`), undefined)
  t.not(sample(text, `${p}nodejs_eventloop_lag_p99_seconds`), undefined)
  t.match(text, /# TYPE agent_telemetry_clickhouse_errors_total counter/)
})

t.test('every insert of the events repository is timed; a stored block counts its rows, a failed one its error code', async (t) => {
  const p = 'agent_telemetry_'
  const userId = randomId('user-')
  const block = Buffer.from([1, 2].map(() => eventLine(buildEventRow({ agentId: 'a' } as never, { eventId: newEventId(), userId, agentId: 'agent-1', receivedAt: Date.now() })) + '\n').join(''))
  const figures = (text: string) => ({
    inserts: sample(text, `${p}shipper_insert_duration_seconds_count`) ?? 0,
    rows: sample(text, `${p}shipper_batch_rows_sum`) ?? 0,
    errors: sample(text, `${p}clickhouse_errors_total`, { operation: 'insert', code: 'unknown' }) ?? 0,
  })
  const before = figures(await scrape())
  // No row count given: the repository counts the block's lines.
  await app.events.insertBlock(block, `test:${randomId()}`)
  await t.rejects(app.events.insertBlock(block, "not a token'"), /invalid deduplication token/)
  const after = figures(await scrape())
  t.same(after, { inserts: before.inserts + 2, rows: before.rows + 2, errors: before.errors + 1 })
})
