import t from 'tap'
import { readFileSync } from 'node:fs'
import { migrateClickHouse } from '../../src/storage/clickhouse-client.ts'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { FACET_HIDDEN_OTEL_SQL, SearchRepository, type SearchWindow } from '../../src/storage/search-repository.ts'
import { COST_STATUSES, parseSearchFilters, type SearchFilters } from '../../src/domain/search-filters.ts'
import { buildEventRow, type EventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'

// The facets without a filter are read from the hourly counts (clickhouse/021) and the edges of the
// window from `events`; they must equal the facets counted from `events` alone (any filter takes that
// path: here one that every event meets), whatever the window's edges, the reader's hidden agents and
// events received after the snapshot instant in an hour the counts already hold.
const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
const ch = handle.client
await migrateClickHouse(ch)
const events = new EventsRepository(ch)
const search = new SearchRepository(ch)
const HOUR = 3_600_000

const noFilter = (): SearchFilters => {
  const parsed = parseSearchFilters({})
  if (!parsed.ok) throw new Error('filters')
  return parsed.filters
}

function row (userId: string, i: number, ts: number, receivedAt: number, agentId = `agent-${i % 4}`): EventRow {
  return buildEventRow({
    agentId,
    type: (['tool', 'decision', 'error', 'reasoning'] as const)[i % 4]!,
    timestamp: ts,
    model: ['gpt-4o', 'claude-sonnet-4', undefined][i % 3],
    toolExecuted: ['bash', 'search', undefined][i % 3],
    outcome: i % 5 === 0 ? 'failed' : 'success',
    metadata: {
      traceId: `tr-${i % 7}`,
      env: ['prod', 'staging'][i % 2],
      customer: `c-${i % 11}`,
      ...(i % 3 === 0 ? { git: { branch: ['main', 'dev'][i % 2] } } : {}),
      // Two values at one path: the dotted key and the nesting name the same path.
      ...(i % 6 === 0 ? { 'git.branch': 'dotted' } : {}),
    },
  }, { eventId: newEventId(receivedAt), userId, agentId, receivedAt })
}

t.test('facets from the hourly counts equal those counted from events', async (t) => {
  const userId = randomId('facets-')
  const asOf = Date.parse('2026-06-10T12:34:56.789Z')
  // Events over two days before asOf, some ahead of it, with odd minutes (the window's edges cut hours).
  const stored: EventRow[] = []
  for (let i = 0; i < 400; i++) {
    const ts = asOf - 50 * HOUR + i * 8 * 60_000 + (i % 13) * 1000
    stored.push(row(userId, i, ts, Math.min(ts, asOf) + 100))
  }
  await events.insert(stored)
  const all = [...COST_STATUSES]
  const scanned = async (w: SearchWindow, f: SearchFilters, hidden: string[] = []) =>
    search.facets({ userId, hidden }, w, { ...f, costStatuses: all })
  const byHour = async (w: SearchWindow, f: SearchFilters, hidden: string[] = []) => search.facets({ userId, hidden }, w, f)

  for (const [name, w, f] of [
    ['all time', { sinceMs: 0, asOf }, noFilter()],
    ['since a cut hour', { sinceMs: asOf - 30 * HOUR - 17 * 60_000, asOf }, noFilter()],
    ['from/to cutting hours', { sinceMs: 0, asOf }, { ...noFilter(), fromMs: asOf - 40 * HOUR + 5 * 60_000, toMs: asOf - 3 * HOUR - 1234 }],
    ['to ahead of asOf', { sinceMs: 0, asOf }, { ...noFilter(), toMs: asOf + 5 * HOUR }],
    ['a short window', { sinceMs: asOf - 90 * 60_000, asOf }, noFilter()],
  ] as [string, SearchWindow, SearchFilters][]) {
    const want = await scanned(w, f)
    t.ok(want.total > 0, `${name}: some events`)
    t.same(await byHour(w, f), want, `${name}: the same facets`)
    t.same(await byHour(w, f, ['agent-1', 'agent-2']), await scanned(w, f, ['agent-1', 'agent-2']), `${name}, two agents hidden: the same facets`)
  }

  // Old events received after the snapshot instant: the hours holding them are counted from events.
  const late = [0, 1, 2].map((i) => row(userId, 1000 + i, asOf - 20 * HOUR + i * 60_000, asOf + 5_000, 'agent-late'))
  await events.insert(late)
  const w = { sinceMs: 0, asOf }
  const want = await scanned(w, noFilter())
  t.equal(want.total, stored.filter((e) => Number(e.received_at) <= asOf).length, 'events received after the snapshot are not counted')
  t.same(await byHour(w, noFilter()), want, 'nor from the hourly counts')
  t.equal((await byHour({ sinceMs: 0, asOf: asOf + 10_000 }, noFilter())).total, stored.length + late.length, 'a later snapshot counts them')

  const other = await search.facets({ userId: randomId('nobody-'), hidden: [] }, w, noFilter())
  t.same(other, { total: 0, facets: { type: [], outcome: [], model: [], tool: [], agentId: [], costStatus: [] }, metadata: [] }, 'another user: zeros')
})

t.test('the hourly counts are backfilled once, however often the migration runs', async (t) => {
  const userId = randomId('facets-backfill-')
  const asOf = Date.parse('2026-07-01T10:00:00Z')
  await events.insert(Array.from({ length: 60 }, (_, i) => row(userId, i, asOf - 30 * HOUR + i * 20 * 60_000, asOf - HOUR)))
  const count = async () => Number((await (await ch.query({
    query: "SELECT sum(events) AS n FROM search_facets_hourly WHERE user_id = {u:String} AND facet = 'total'",
    query_params: { u: userId },
    format: 'JSONEachRow',
  })).json<{ n: string }>())[0]!.n)
  t.equal(await count(), 60, 'fed by the view')
  // 021 empties the counts, 022's rows too, 022 brings back the view 023 replaces, 023 the query 025
  // replaces, and 025 the one 028 replaces: they run again together.
  await ch.command({ query: 'ALTER TABLE schema_migrations DELETE WHERE version IN (21, 22, 23, 25, 28) SETTINGS mutations_sync = 2' })
  t.same(await migrateClickHouse(ch), ['021_search_feed_and_facets.sql', '022_search_facets_path_events.sql', '023_search_insert_cost.sql', '025_search_facets_otel.sql', '028_search_facets_sessions.sql'], 'the migrations run again')
  t.equal(await count(), 60, 'each event counted once after the backfill ran again')
  const f = noFilter()
  t.same(await search.facets({ userId, hidden: [] }, { sinceMs: 0, asOf }, f), await search.facets({ userId, hidden: [] }, { sinceMs: 0, asOf }, { ...f, costStatuses: [...COST_STATUSES] }), 'and the facets agree')
})

t.test('the path counts of 022 are backfilled once, however often the migration runs', async (t) => {
  const userId = randomId('facets-paths-')
  const asOf = Date.parse('2026-07-01T10:00:00Z')
  await events.insert(Array.from({ length: 60 }, (_, i) => row(userId, i, asOf - 30 * HOUR + i * 20 * 60_000, asOf - HOUR)))
  const f = noFilter()
  const branch = async () => (await search.facets({ userId, hidden: [] }, { sinceMs: 0, asOf }, f)).metadata.find((m) => m.key === 'git.branch')
  // i % 3 === 0: 20 events at git.branch, 10 of them (i % 6 === 0) with a second value.
  t.same(await branch(), { key: 'git.branch', count: 20, values: [{ value: 'dev', count: 10 }, { value: 'dotted', count: 10 }, { value: 'main', count: 10 }] }, 'fed by the view: 20 events')
  await ch.command({ query: 'ALTER TABLE schema_migrations DELETE WHERE version IN (22, 23, 25, 28) SETTINGS mutations_sync = 2' })
  t.same(await migrateClickHouse(ch), ['022_search_facets_path_events.sql', '023_search_insert_cost.sql', '025_search_facets_otel.sql', '028_search_facets_sessions.sql'], 'the migrations run again')
  t.equal((await branch())?.count, 20, 'each event counted once after the backfill ran again')
})

t.test('per-span OTLP paths are neither counted by the view nor read from counts made before 025', async (t) => {
  const userId = randomId('facets-otel-')
  const asOf = Date.parse('2026-07-02T10:00:00Z')
  const spans = Array.from({ length: 40 }, (_, i) => buildEventRow({
    agentId: 'otel-agent',
    type: 'reasoning',
    timestamp: asOf - 6 * HOUR + i * 60_000,
    model: 'gpt-4o',
    metadata: {
      otel: {
        name: 'chat gpt-4o',
        attributes: {
          'gen_ai.request.model': 'gpt-4o',
          'gen_ai.response.id': `resp-${i}`,
          'gen_ai.usage.input_tokens': 1000 + i,
          'gen_ai.prompt.0.content': `question ${i}`,
          'gen_ai.promptly': 'shared',
          // The conversation, as Langfuse, the Vercel AI SDK and OpenLLMetry name it (028).
          'langfuse.session.id': `conv-${i}`,
          'ai.telemetry.metadata.sessionId': `conv-${i}`,
          'traceloop.association.properties.session_id': `conv-${i}`,
          'traceloop.association.properties.customer': 'acme',
          // Token counts, as OpenInference and Langfuse name them (028).
          'llm.token_count.prompt': 100 + i,
          'langfuse.observation.usage_details': `{"input":${100 + i}}`,
        },
        resource: { 'service.name': 'svc' },
      },
    },
  }, { eventId: newEventId(asOf - HOUR), userId, agentId: 'otel-agent', receivedAt: asOf - HOUR }))
  await events.insert(spans)
  const keys = async () => (await (await ch.query({
    query: "SELECT DISTINCT key FROM search_facets_hourly WHERE user_id = {u:String} AND facet = 'meta' ORDER BY key",
    query_params: { u: userId },
    format: 'JSONEachRow',
  })).json<{ key: string }>()).map((r) => r.key)
  t.same(await keys(), ['otel.attributes.gen_ai.promptly', 'otel.attributes.gen_ai.request.model', 'otel.attributes.traceloop.association.properties.customer', 'otel.name', 'otel.resource.service.name'],
    'the view counts the shared paths only (a name that only begins like a hidden one is shared)')
  // Rows counted at a hidden path, as the view did before 025.
  await ch.insert({
    table: 'search_facets_hourly',
    values: [{ user_id: userId, hour: '2026-07-02 05:00:00', facet: 'meta', key: 'otel.attributes.gen_ai.response.id', value: 'resp-0', events: 40, last_received: '2026-07-02 09:00:00.000' }],
    format: 'JSONEachRow',
  })
  const w = { sinceMs: 0, asOf }
  const byHour = await search.facets({ userId, hidden: [] }, w, noFilter())
  t.same(byHour, await search.facets({ userId, hidden: [] }, w, { ...noFilter(), costStatuses: [...COST_STATUSES] }), 'the hourly counts give what counting the events gives')
  t.same(byHour.metadata.map((m) => m.key).sort(), ['otel.attributes.gen_ai.promptly', 'otel.attributes.gen_ai.request.model', 'otel.attributes.traceloop.association.properties.customer', 'otel.name', 'otel.resource.service.name'])
  t.equal(byHour.metadata.find((m) => m.key === 'otel.attributes.gen_ai.request.model')?.count, 40)
})

t.test('the view of 028 and the reads leave out the same paths', async (t) => {
  const sql = readFileSync(new URL('../../clickhouse/028_search_facets_sessions.sql', import.meta.url), 'utf8')
  t.equal(sql.split(FACET_HIDDEN_OTEL_SQL).length - 1, 2, 'the migration holds FACET_HIDDEN_OTEL as it is now, in the view and in the delete')
  const view = (await (await ch.query({
    query: "SELECT create_table_query AS q FROM system.tables WHERE database = currentDatabase() AND name = 'search_facets_hourly_mv'",
    format: 'JSONEachRow',
  })).json<{ q: string }>())[0]!.q
  t.ok(view.includes('gen_ai\\\\.response\\\\.id'), 'the view in the store has the pattern')
  t.ok(view.includes('langfuse\\\\.session\\\\.id'), 'as 028 left it')
})

t.test('the columns say what they hold: the metadup facet, the empty tool name of the error clusters (clickhouse/027), a score\'s stored id (029)', async (t) => {
  const rs = await ch.query({
    query: "SELECT table, name, comment FROM system.columns WHERE database = currentDatabase() AND ((table = 'search_facets_hourly' AND name IN ('facet', 'key', 'value')) OR (table IN ('error_clusters_hourly', 'error_clusters_daily') AND name = 'tools') OR (table = 'scores' AND name = 'score_id')) ORDER BY table, name",
    format: 'JSONEachRow',
  })
  const comments = Object.fromEntries((await rs.json<{ table: string; name: string; comment: string }>()).map((c) => [`${c.table}.${c.name}`, c.comment]))
  t.match(comments['search_facets_hourly.facet'], /\| metadup \(/)
  t.match(comments['search_facets_hourly.key'], /meta and metadup/)
  t.match(comments['error_clusters_hourly.tools'], /empty string for an event that named none/)
  t.match(comments['error_clusters_daily.tools'], /empty string for an event that named none/)
  t.match(comments['scores.score_id'], /pk:<key id>:<scoreId>.*ag:<agent id>:<scoreId>/)
})
