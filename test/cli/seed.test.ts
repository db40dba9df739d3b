import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { openTestClickHouse, randomId, TEST_CLICKHOUSE_ENV, TEST_DATA_DIR, TEST_DATABASE_URL } from '../helpers/app.ts'
import { TS_LOADER_ARGS } from '../helpers/ts-loader.ts'

// The seed writes straight into the store, so this file opens the embedded engine only after it ran.
const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const env = { ...process.env, DATA_DIR: TEST_DATA_DIR, DATABASE_URL: TEST_DATABASE_URL, LOG_LEVEL: 'warn', ...TEST_CLICKHOUSE_ENV }
const seed = (args: string[]) => run(process.execPath, [...TS_LOADER_ARGS, 'src/cli/seed.ts', ...args], { cwd: root, env })

const user = randomId('seed-')
const first = await seed(['--events', '3000', '--agents', '3', '--user', user])
const grown = await seed(['--events', '2000', '--agents', '3', '--user', user, '--from', '3000', '--settle'])

t.test('npm run seed reports what it wrote, and how long the engine took to settle when asked', async (t) => {
  const a = JSON.parse(first.stdout)
  const b = JSON.parse(grown.stdout)
  t.match(a, { msg: 'seeded', user, events: 3000, agents: 3 })
  t.equal(a.settleSeconds, undefined, 'no settling unless asked')
  t.match(b, { msg: 'seeded', user, events: 2000, agents: 3 })
  t.type(b.settleSeconds, 'number')
})

t.test('a store grown with --from holds what one seed of the whole would: ids continue, rollups agree', async (t) => {
  const { client, release } = openTestClickHouse()
  t.teardown(release)
  const userId = JSON.parse(first.stdout).userId
  const one = async (query: string) => (await (await client.query({ query, query_params: { u: userId }, format: 'JSONEachRow' })).json<Record<string, string>>())[0]!
  const events = await one(`SELECT count() AS n, uniqExact(event_id) AS ids, uniqExact(session_id) AS sessions, uniqExact(trace_id) AS traces,
    uniqExact(agent_id) AS agents FROM events WHERE user_id = {u:String}`)
  t.same(events, { n: '5000', ids: '5000', sessions: '200', traces: '625', agents: '3' }, 'sessions of 25 events and traces of 8, numbered across both runs')
  const spend = await one('SELECT sum(events) AS n FROM spend_daily WHERE user_id = {u:String}')
  t.equal(Number(spend.n), 5000)
  const groups = await one(`SELECT sumIf(events, kind = 'session') AS sessions, sumIf(events, kind = 'trace') AS traces
    FROM group_totals WHERE user_id = {u:String}`)
  t.same(groups, { sessions: '5000', traces: '5000' })
})

t.test('npm run seed refuses arguments that are not counts', async (t) => {
  await t.rejects(seed(['--events', '0']), { code: 2 })
  await t.rejects(seed(['--events', '10', '--from', 'x']), { code: 2 })
})
