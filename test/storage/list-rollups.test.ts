import t, { type Test } from 'tap'
import { migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository, eventLine } from '../../src/storage/events-repository.ts'
import { buildEventRow, type EventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'
import { MAX_SPAN_MS } from '../../src/domain/dashboard.ts'

// The rollups of clickhouse/012 (group_totals, agent_hourly, error_clusters_daily) against the
// events they sum: backfilled for a store an older release left, fed by their views afterwards,
// never counted twice (a migration run again, a block replayed).
const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
const ch = handle.client
const events = new EventsRepository(ch)

const rows = async (sql: string, params: Record<string, unknown>) =>
  (await ch.query({ query: sql, query_params: params, format: 'JSONEachRow' })).json<Record<string, string | number>>()

/** The rows a projection of a table holds in its active parts. */
const projectionRows = async (table: string, name: string) => Number((await rows(`SELECT sum(rows) AS n FROM system.projection_parts
  WHERE database = currentDatabase() AND table = {table:String} AND name = {name:String} AND active`, { table, name }))[0]!.n)

/**
 * Each rollup, and the same figures computed from events, as sorted JSON lines to compare; with
 * `ends`, group_totals' span ends too (clickhouse/017 and later).
 */
async function rollupsAndEvents (userId: string, ends = true) {
  const p = { u: userId }
  const groups = `SELECT kind, group_id, agent_id, sum(events) AS n, toString(min(first_ts)) AS first, toString(max(last_ts)) AS last,
      ${ends ? 'toString(max(last_end)) AS end,' : ''}
      toString(max(last_received)) AS received, sum(errors) AS errors, toString(sum(cost_usd)) AS cost, sum(tokens_input_base) AS t_in,
      sum(tokens_output) AS t_out`
  const fromEvents = `count() AS n, toString(min(ts)) AS first, toString(max(ts)) AS last,
      ${ends ? `toString(max(ts + toIntervalMillisecond(least(ifNull(duration_ms, 0), ${MAX_SPAN_MS})))) AS end,` : ''}
      toString(max(received_at)) AS received,
      countIf(error_fingerprint != '') AS errors, toString(sum(toDecimal128(cost_usd, 9))) AS cost, sum(tokens_input_base) AS t_in, sum(tokens_output) AS t_out`
  const lines = (xs: Record<string, unknown>[]) => xs.map((x) => JSON.stringify(x)).sort()
  return {
    groups: lines(await rows(`${groups} FROM group_totals WHERE user_id = {u:String} GROUP BY kind, group_id, agent_id`, p)),
    groupsFromEvents: lines([
      ...await rows(`SELECT 'session' AS kind, session_id AS group_id, agent_id, ${fromEvents} FROM events WHERE user_id = {u:String} AND session_id != '' GROUP BY group_id, agent_id`, p),
      ...await rows(`SELECT 'trace' AS kind, trace_id AS group_id, agent_id, ${fromEvents} FROM events WHERE user_id = {u:String} AND trace_id != '' GROUP BY group_id, agent_id`, p),
    ]),
    hours: lines(await rows(`SELECT agent_id, toString(hour) AS h, sum(events) AS n, sum(errors) AS errors, toString(sum(cost_usd)) AS cost
      FROM agent_hourly WHERE user_id = {u:String} GROUP BY agent_id, hour`, p)),
    hoursFromEvents: lines(await rows(`SELECT agent_id, toString(toStartOfHour(ts)) AS h, count() AS n, countIf(error_fingerprint != '') AS errors,
      toString(sum(toDecimal128(cost_usd, 9))) AS cost FROM events WHERE user_id = {u:String} GROUP BY agent_id, h`, p)),
    days: lines(await rows(`SELECT agent_id, error_fingerprint AS fp, toString(day) AS d, sum(events) AS n, toString(min(first_ts)) AS first,
      toString(max(last_ts)) AS last, argMaxMerge(sample) AS sample FROM error_clusters_daily WHERE user_id = {u:String} GROUP BY agent_id, fp, day`, p)),
    daysFromEvents: lines(await rows(`SELECT agent_id, error_fingerprint AS fp, toString(toDate(ts)) AS d, count() AS n, toString(min(ts)) AS first,
      toString(max(ts)) AS last, argMax(error_message, ts) AS sample FROM events WHERE user_id = {u:String} AND error_fingerprint != '' GROUP BY agent_id, fp, d`, p)),
  }
}

function checkEqual (t: Test, got: Awaited<ReturnType<typeof rollupsAndEvents>>, what: string) {
  t.ok(got.groups.length > 0 && got.hours.length > 0 && got.days.length > 0, `${what}: the rollups hold rows`)
  t.same(got.groups, got.groupsFromEvents, `${what}: group_totals equals the sums over events`)
  t.same(got.hours, got.hoursFromEvents, `${what}: agent_hourly equals the sums over events`)
  t.same(got.days, got.daysFromEvents, `${what}: error_clusters_daily equals the sums over error events`)
}

/**
 * Events of two agents over three days: sessions and traces across both agents and across hours,
 * errors among them, and every third a span that outlasts the events started after it.
 */
function history (userId: string, count: number, start: number): EventRow[] {
  return Array.from({ length: count }, (_, i) => {
    const ts = start + i * 47 * 60_000
    const failed = i % 5 === 0
    return buildEventRow({
      agentId: 'a', type: failed ? 'error' : 'tool', toolExecuted: 'search', model: 'gpt-4o', timestamp: ts, durationMs: i % 3 === 0 ? 5_000_000 : 40,
      errorMessage: failed ? `timeout ${i % 3}` : undefined,
      metadata: { sessionId: `s-${Math.floor(i / 7)}`, traceId: i % 4 === 3 ? undefined : `t-${Math.floor(i / 3)}`, tokensBreakdown: { inputBase: 100 + i, output: 10 } },
    } as never, { eventId: newEventId(ts), userId, agentId: i % 2 ? 'agent-1' : 'agent-2', receivedAt: ts + 5 })
  })
}

t.test('a store an older release left is backfilled once; the views keep the rollups equal to events afterwards', async (t) => {
  const applied = await migrateClickHouse(ch, { upTo: 11 })
  t.notOk(applied.includes('012_list_rollups.sql'), 'a store as release 11 left it')
  const userId = randomId('rollups-')
  await events.insert(history(userId, 90, Date.parse('2026-05-01T09:10:00Z')))

  t.same(await migrateClickHouse(ch, { upTo: 12 }), ['012_list_rollups.sql'])
  checkEqual(t, await rollupsAndEvents(userId, false), 'after the backfill')

  // Interrupted after the backfill, before the version was recorded: the migration runs again whole.
  await ch.command({ query: 'ALTER TABLE schema_migrations DELETE WHERE version = 12 SETTINGS mutations_sync = 2' })
  t.same(await migrateClickHouse(ch, { upTo: 12 }), ['012_list_rollups.sql'], 'the migration runs again')
  checkEqual(t, await rollupsAndEvents(userId, false), 'after running the migration twice')

  t.same(await migrateClickHouse(ch, { upTo: 13 }), ['013_events_by_time.sql'])
  await events.insert(history(userId, 20, Date.parse('2026-05-03T08:00:00Z')))
  t.same(await migrateClickHouse(ch, { upTo: 16 }), ['014_events_feed.sql', '015_group_totals_small_blocks.sql', '016_errors_by_hour.sql'])
  await events.insert(history(userId, 20, Date.parse('2026-05-03T14:00:00Z')))
  const [stale] = await rows(`SELECT (SELECT max(last_ts) FROM group_totals WHERE user_id = {u:String}) < (SELECT max(ts + toIntervalMillisecond(duration_ms))
    FROM events WHERE user_id = {u:String}) AS behind`, { u: userId })
  t.equal(Number(stale!.behind), 1, 'before 017 the rollup knows of no span end later than the last start')

  t.same(await migrateClickHouse(ch, { upTo: 17 }), ['017_group_totals_span_end.sql'])
  checkEqual(t, await rollupsAndEvents(userId), 'after 017 backfilled the span ends')
  await ch.command({ query: 'ALTER TABLE schema_migrations DELETE WHERE version = 17 SETTINGS mutations_sync = 2' })
  t.same(await migrateClickHouse(ch, { upTo: 17 }), ['017_group_totals_span_end.sql'], '017 runs again')
  checkEqual(t, await rollupsAndEvents(userId), 'after running 017 twice: no figure counted twice')
  const [totals] = await rows("SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'group_totals'", {})
  t.match(totals!.engine_full, /min_compress_block_size = 4096, max_compress_block_size = 16384/, 'group_totals writes small compressed blocks')
  await events.insert(history(userId, 40, Date.parse('2026-05-03T20:00:00Z')))
  checkEqual(t, await rollupsAndEvents(userId), 'after new events came through the views')
  await migrateClickHouse(ch)
  t.same(await migrateClickHouse(ch), [], 'a second start applies nothing')
  // The projection holds every event, as the table does: a read it serves misses none.
  const [inTable] = await rows('SELECT count() AS n FROM events', {})
  t.equal(await projectionRows('events', 'events_feed'), Number(inTable!.n), 'events_feed has the old events (materialized) and the new ones')
  t.equal(await projectionRows('events', 'events_by_time'), 0, 'the projection it replaces is gone')
  const [hourly] = await rows('SELECT count() AS n FROM error_clusters_hourly', {})
  t.ok(Number(hourly!.n) > 0, 'error_clusters_hourly holds rows')
  t.equal(await projectionRows('error_clusters_hourly', 'errors_by_hour'), Number(hourly!.n), 'errors_by_hour has the rows stored before 016 (materialized) and the new ones')
  // Every column is in it: the newest events of a user, any column, are read from it, in its order.
  const plan = await ch.query({
    query: `EXPLAIN projections = 1 SELECT * FROM events WHERE user_id = {u:String} AND ts >= '2026-05-03 20:00:00'
            ORDER BY ts DESC, event_id DESC LIMIT 51`,
    query_params: { u: userId },
    format: 'TabSeparatedRaw',
  })
  t.match(await plan.text(), /ReadFromMergeTree \(events_feed\)/, 'the newest-events read is served by events_feed')
})

t.test('a block replayed with its deduplication token is counted once in every rollup', async (t) => {
  await migrateClickHouse(ch)
  const userId = randomId('replay-')
  const block = history(userId, 30, Date.parse('2026-06-01T00:00:00Z')).map((r) => eventLine(r) + '\n').join('')
  const token = `test:${randomId()}`
  await events.insertBlock(block, token)
  const once = await rollupsAndEvents(userId)
  await events.insertBlock(block, token)
  const replayed = await rollupsAndEvents(userId)
  t.same(replayed, once, 'nothing changed with the replay')
  checkEqual(t, replayed, 'after the replay')
})

t.test('errors_by_hour holds the rows of error_clusters_hourly once parts merge, and a read by hours through it sums the events', async (t) => {
  await migrateClickHouse(ch)
  const userId = randomId('by-hour-')
  const start = Date.parse('2026-07-01T00:00:00Z')
  // The same errors twice, in separate parts while merges are stopped: the merge aggregates their rows.
  await ch.command({ query: 'SYSTEM STOP MERGES error_clusters_hourly' })
  try {
    await events.insert(history(userId, 60, start))
    await events.insert(history(userId, 60, start))
  } finally {
    await ch.command({ query: 'SYSTEM START MERGES error_clusters_hourly' })
  }
  const stored = async () => Number((await rows('SELECT count() AS n FROM error_clusters_hourly WHERE user_id = {u:String}', { u: userId }))[0]!.n)
  const before = await stored()
  await ch.command({ query: 'OPTIMIZE TABLE error_clusters_hourly FINAL' })
  t.ok(await stored() < before, `the merge aggregated rows of the window (${before} → ${await stored()})`)
  const [hourly] = await rows('SELECT count() AS n FROM error_clusters_hourly', {})
  t.equal(await projectionRows('error_clusters_hourly', 'errors_by_hour'), Number(hourly!.n), 'the merged parts have the projection, with every row')

  // Hours 5 to 29 of the history, as stored in the projection, against the events themselves.
  const from = new Date(start + 5 * 3_600_000).toISOString().slice(0, 19).replace('T', ' ')
  const to = new Date(start + 29 * 3_600_000).toISOString().slice(0, 19).replace('T', ' ')
  const p = { u: userId, from, to }
  const inProjection = await rows(`SELECT error_fingerprint AS fp, agent_id, sum(events) AS n
    FROM mergeTreeProjection(currentDatabase(), error_clusters_hourly, errors_by_hour)
    WHERE user_id = {u:String} AND hour >= {from:DateTime} AND hour < {to:DateTime} GROUP BY fp, agent_id ORDER BY fp, agent_id`, p)
  const fromEvents = await rows(`SELECT error_fingerprint AS fp, agent_id, count() AS n FROM events
    WHERE user_id = {u:String} AND error_fingerprint != '' AND ts >= {from:DateTime} AND ts < {to:DateTime} GROUP BY fp, agent_id ORDER BY fp, agent_id`, p)
  t.ok(fromEvents.length > 0, 'the window holds errors')
  t.same(inProjection.map((x) => ({ ...x, n: Number(x.n) })), fromEvents.map((x) => ({ ...x, n: Number(x.n) })), 'the window as errors_by_hour holds it sums as the events do')

  // For a user whose clusters span many granules, the errors list's read of a few hours is served by it.
  await ch.command({
    query: `INSERT INTO error_clusters_hourly (user_id, error_fingerprint, hour, agent_id, events)
      SELECT 'other-' || toString(number % 3), toString(number % 50), toDateTime('2026-07-01 00:00:00') + 3600 * (intDiv(number, 150) % 700), 'a', 1
      FROM numbers(200000)`,
  })
  const plan = await ch.query({
    // The errors list's read of the hours before its window's first whole day (DashboardRepository.clusters).
    query: `EXPLAIN projections = 1 SELECT error_fingerprint, agent_id, events, first_ts, last_ts, sample, tools FROM error_clusters_hourly
      WHERE user_id = {u:String} AND agent_id NOT IN {hidden:Array(String)}
        AND hour >= toDateTime({fromS:UInt32}, 'UTC') AND hour < toDateTime({dayS:UInt32}, 'UTC')`,
    query_params: { u: 'other-1', fromS: Date.parse('2026-07-05T06:00:00Z') / 1000, dayS: Date.parse('2026-07-06T00:00:00Z') / 1000, hidden: ['x'] },
    format: 'TabSeparatedRaw',
  })
  t.match(await plan.text(), /ReadFromMergeTree \(errors_by_hour\)/, 'a read of a user\'s hours is served by errors_by_hour')
})
