import t from 'tap'
import { migrateClickHouse, readMigrations, schemaMigrationsDdl } from '../../src/storage/clickhouse-client.ts'
import { clusterStatement, REPLICA_NAME, REPLICA_PATH } from '../../src/storage/cluster-ddl.ts'
import { EventsRepository } from '../../src/storage/events-repository.ts'
import { applyRetentionTtl } from '../../src/storage/retention.ts'
import { buildEventRow } from '../../src/domain/event-row.ts'
import { newEventId } from '../../src/domain/ids.ts'
import { loadConfig } from '../../src/config.ts'
import { openEmptyTestClickHouse, randomId } from '../helpers/app.ts'

// The cluster DDL cannot run here (ON CLUSTER needs the servers' DDL queue and Replicated tables need
// Keeper): the engine parses every cluster statement, and runs it without those two parts to build
// the schema a replica would have.
const handle = await openEmptyTestClickHouse()
t.teardown(() => handle.release())
const ch = handle.client
const CLUSTER = 'telemetry'

const rows = async <T>(query: string, params: Record<string, unknown> = {}) =>
  (await ch.query({ query, query_params: params, format: 'JSONEachRow' })).json<T>()

/** Every statement a migration runs, schema_migrations first, in both forms. */
const STATEMENTS = [
  { name: 'schema_migrations', single: schemaMigrationsDdl(), cluster: schemaMigrationsDdl(CLUSTER) },
  ...readMigrations().flatMap((m, i) => m.statements.map((single, j) => ({ name: m.name, single, cluster: readMigrations(CLUSTER)[i]!.statements[j]! }))),
]

/** The cluster form without what only a cluster can run: its ON CLUSTER clause and the replication arguments. */
function withoutCluster (statement: string): string {
  const replicated = new RegExp(String.raw`\bReplicated(\w*MergeTree)\('${REPLICA_PATH}', '${REPLICA_NAME}'(?:, )?`.replace(/[{}]/g, '\\$&'), 'g')
  return statement.replace(` ON CLUSTER '${CLUSTER}'`, '').replace(replicated, '$1(')
}

const formatted = async (sql: string) => (await rows<{ f: string }>('SELECT formatQuery({sql:String}) AS f', { sql }))[0]!.f

t.test('a statement gets ON CLUSTER where its kind takes it, and a Replicated engine with its own arguments after the replication ones', async (t) => {
  const on = (sql: string) => clusterStatement(sql, CLUSTER)
  t.equal(on("CREATE TABLE IF NOT EXISTS `db`.`t` (v DateTime COMMENT 'not ENGINE = MergeTree here') ENGINE = ReplacingMergeTree(v) ORDER BY v"),
    `CREATE TABLE IF NOT EXISTS \`db\`.\`t\` ON CLUSTER 'telemetry' (v DateTime COMMENT 'not ENGINE = MergeTree here') ENGINE = ReplicatedReplacingMergeTree('${REPLICA_PATH}', '${REPLICA_NAME}', v) ORDER BY v`)
  t.equal(on('/* svc:x */ CREATE TABLE t (a UInt8) ENGINE = SummingMergeTree() ORDER BY a'),
    `/* svc:x */ CREATE TABLE t ON CLUSTER 'telemetry' (a UInt8) ENGINE = ReplicatedSummingMergeTree('${REPLICA_PATH}', '${REPLICA_NAME}') ORDER BY a`)
  t.equal(on('RENAME TABLE a TO b, c TO d'), "RENAME TABLE a TO b, c TO d ON CLUSTER 'telemetry'")
  t.equal(on('DROP TABLE IF EXISTS a'), "DROP TABLE IF EXISTS a ON CLUSTER 'telemetry' SYNC", 'drops free the Keeper path at once')
  t.equal(on('TRUNCATE TABLE a'), "TRUNCATE TABLE a ON CLUSTER 'telemetry'")
  t.equal(on('INSERT INTO a SELECT * FROM b'), 'INSERT INTO a SELECT * FROM b', 'data statements run once; replication copies what they write')
  t.throws(() => on('OPTIMIZE TABLE events FINAL'), /no cluster form/, 'an unknown kind of statement is refused, not run on one replica')
  t.throws(() => on("CREATE TABLE t (a UInt8) ENGINE = ReplicatedMergeTree('/p', 'r') ORDER BY a"), /written for one node/)
})

t.test('CLICKHOUSE_CLUSTER is a plain cluster name, never SQL', async (t) => {
  t.equal(loadConfig({ CLICKHOUSE_CLUSTER: 'all-replicated' }).clickhouseCluster, 'all-replicated')
  t.equal(loadConfig({}).clickhouseCluster, undefined, 'unset: one node, or ClickHouse Cloud')
  t.throws(() => loadConfig({ CLICKHOUSE_CLUSTER: "c' SETTINGS x = 1 --" }), { name: 'ConfigError' })
})

t.test('every statement of every migration is re-runnable, so a cluster statement that failed on one replica can run again', async (t) => {
  for (const { name, single } of STATEMENTS) {
    if (/^\s*(?:\/\*.*?\*\/\s*)?(?:CREATE|ALTER\s+TABLE\s+\w+\s+ADD)\b/is.test(single)) t.match(single, /\bIF NOT EXISTS\b/i, `${name}: ${single.slice(0, 60)}`)
    if (/^\s*DROP\b/i.test(single)) t.match(single, /\bIF EXISTS\b/i, `${name}: ${single.slice(0, 60)}`)
  }
})

t.test('every cluster statement parses in the engine, DDL with ON CLUSTER and every MergeTree table replicated', async (t) => {
  for (const { name, single, cluster } of STATEMENTS) {
    const parsed = await formatted(cluster)
    if (/^\s*INSERT\b/i.test(single)) {
      t.equal(cluster, single, `${name}: a data statement is unchanged`)
      continue
    }
    t.match(parsed, /\bON CLUSTER `?telemetry`?(\s|$)/, `${name}: ${single.slice(0, 60)}`)
    for (const [, engine] of (await formatted(single)).matchAll(/\bENGINE = (\w*MergeTree)\b/g)) {
      t.ok(parsed.includes(`ENGINE = Replicated${engine}('${REPLICA_PATH}', '${REPLICA_NAME}'`), `${name}: ${engine} is replicated`)
    }
    t.notMatch(parsed, /\bENGINE = (?!Replicated)\w*MergeTree\b/, `${name}: no table is left unreplicated`)
  }
})

t.test('a store with a cluster the server does not know is refused before anything is created', async (t) => {
  await t.rejects(migrateClickHouse(ch, { cluster: 'nowhere' }), /no cluster named 'nowhere'/)
  t.same(await rows("SELECT name FROM system.tables WHERE database = currentDatabase() AND name = 'schema_migrations'"), [])
})

/** What an analyst or a query sees of the schema: tables and views, columns, skip indexes. */
async function schema () {
  const own = "database = currentDatabase() AND NOT endsWith(%s, '_single')"
  return {
    tables: await rows(`SELECT name, engine_full, comment, as_select FROM system.tables
      WHERE ${own.replace('%s', 'name')} ORDER BY name`),
    columns: await rows(`SELECT table, name, position, type, default_kind, default_expression, comment, compression_codec
      FROM system.columns WHERE ${own.replace('%s', 'table')} ORDER BY table, position`),
    indexes: await rows(`SELECT table, name, type_full, expr, granularity FROM system.data_skipping_indices
      WHERE ${own.replace('%s', 'table')} ORDER BY table, name`),
  }
}

// The upgrade's SQL as docs/cluster.md gives it: each query prints the statements to run.
const DROP_VIEWS = "SELECT 'DROP VIEW ' || name || ';' FROM system.tables WHERE database = currentDatabase() AND engine = 'MaterializedView'"
const SET_ASIDE = "SELECT 'RENAME TABLE ' || arrayStringConcat(groupArray(name || ' TO ' || name || '_single'), ', ') || ';' " +
  "FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree'"
const ATTACH_PARTS = "SELECT DISTINCT 'ALTER TABLE ' || replaceOne(table, '_single', '') || ' ATTACH PARTITION ID ''' || partition_id || ''' FROM ' || table || ';' " +
  "FROM system.parts WHERE database = currentDatabase() AND endsWith(table, '_single') AND table != 'schema_migrations_single' AND active"

async function runPrinted (query: string): Promise<void> {
  const printed = await (await ch.query({ query, format: 'JSONCompactEachRow' })).json<[string]>()
  for (const [statement] of printed) await ch.command({ query: statement })
}

t.test('from one node to a cluster: the cluster schema matches the single-node one column for column, and the data moves over (docs/cluster.md)', async (t) => {
  t.ok((await migrateClickHouse(ch)).length > 0, 'a single-node store')
  const single = await schema()
  await t.rejects(migrateClickHouse(ch, { cluster: CLUSTER }), /created for one node/, 'CLICKHOUSE_CLUSTER alone is refused, before any DDL')

  // A store in use: a retention TTL the replicated tables do not have yet, events, errors, names.
  await applyRetentionTtl(ch, { events: 90, rollups: 400, alerts: 0, waitlist: 0 })
  const userId = randomId('cluster-')
  const event = (fields: Record<string, unknown>) => buildEventRow({ agentId: 'a', model: 'gpt-4o', ...fields },
    { eventId: newEventId(), userId, agentId: 'agent-1', receivedAt: Date.now() })
  const events = new EventsRepository(ch)
  await events.insert([event({}), event({ type: 'error', errorMessage: 'boom', toolExecuted: 'db' }), event({ outcome: 'failed' })])
  await ch.insert({ table: 'agent_names', values: [{ agent_id: 'agent-1', user_id: userId, display_name: 'One', sns_name: '', deleted: false, changed_at: '2026-01-01 00:00:00' }], format: 'JSONEachRow' })

  // Step 3 of the upgrade: the views go, the single-node tables are set aside.
  await runPrinted(DROP_VIEWS)
  await runPrinted(SET_ASIDE)

  // Step 4: the migrations in their cluster form, here without ON CLUSTER and replication.
  for (const { cluster } of STATEMENTS) await ch.command({ query: withoutCluster(cluster) })
  t.same(await schema(), single, 'every table, view, column and index as on one node')

  // Step 5: the parts move over (hard links); attaching does not run the views, so nothing counts twice.
  await runPrinted(ATTACH_PARTS)
  const counts = async (suffix: string) => rows(`SELECT
      (SELECT count() FROM events${suffix} WHERE user_id = {u:String}) AS events,
      (SELECT sum(events) FROM spend_daily${suffix} WHERE user_id = {u:String}) AS spend_events,
      (SELECT sum(events) FROM error_clusters_hourly${suffix} WHERE user_id = {u:String}) AS error_events,
      (SELECT count() FROM agent_names${suffix} FINAL WHERE user_id = {u:String}) AS names`, { u: userId })
  t.same(await counts(''), await counts('_single'))
  t.same(await counts(''), [{ events: '3', spend_events: '3', error_events: '2', names: '1' }])

  await events.insert([event({})])
  t.same((await counts(''))[0], { events: '4', spend_events: '4', error_events: '2', names: '1' }, 'new events reach the new rollups')
})
