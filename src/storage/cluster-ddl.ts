import type { ClickHouseClient } from '@clickhouse/client'

/**
 * The cluster form of the ClickHouse migrations (CLICKHOUSE_CLUSTER). The files in clickhouse/ are
 * written once, for one node; on a cluster each statement is rewritten here rather than kept in a
 * second set of files, so the two forms cannot drift apart (docs/cluster.md).
 *
 * The cluster is one shard of replicas: every replica holds every table whole, so the service's
 * queries, its inserts (with their deduplication tokens) and its runtime DDL (retention TTLs) run
 * unchanged on any replica, and no `Distributed` table is needed for reads.
 */

/**
 * Where a replicated table keeps its replication log in Keeper, and the replica's name. `{database}`
 * and `{table}` are expanded when the table is created; `{shard}` and `{replica}` are the server's
 * macros. A path derived from the table's name (rather than the engine's default, which derives it
 * from the table's UUID) lets a replica added later join by running the same CREATE statement.
 */
export const REPLICA_PATH = '/clickhouse/tables/{shard}/{database}/{table}'
export const REPLICA_NAME = '{replica}'

/** The MergeTree engines the migrations may use; each has a Replicated variant taking the same arguments. */
const MERGE_TREE_ENGINE = /\bENGINE(\s*=\s*)((?:Replacing|Summing|Aggregating|Collapsing|VersionedCollapsing|Graphite|Coalescing)?MergeTree)\b(\s*\((\s*\))?)?/gi
const REPLICATED_ENGINE = /\bENGINE\s*=\s*(?:Replicated|Shared)\w*/i

/** A table's name, bare or quoted, with or without its database. */
const IDENTIFIER = String.raw`(?:\`[^\`]+\`|\w+)`
const NAME = `(?:${IDENTIFIER}\\.)?${IDENTIFIER}`
/** Statements that take ON CLUSTER right after the object's name. */
const CLAUSE_AFTER_NAME = [
  new RegExp(String.raw`^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TABLE|(?:MATERIALIZED\s+)?VIEW|DICTIONARY)\s+(?:IF\s+NOT\s+EXISTS\s+)?${NAME}`, 'i'),
  new RegExp(String.raw`^ALTER\s+TABLE\s+${NAME}`, 'i'),
  new RegExp(String.raw`^DROP\s+(?:TABLE|VIEW|DICTIONARY)\s+(?:IF\s+EXISTS\s+)?${NAME}`, 'i'),
  new RegExp(String.raw`^TRUNCATE\s+(?:TABLE\s+)?(?:IF\s+EXISTS\s+)?${NAME}`, 'i'),
]
/** Statements that take ON CLUSTER at their end. */
const CLAUSE_AT_END = /^(?:RENAME|EXCHANGE)\s+(?:TABLE|TABLES|DICTIONARY)\b/i
/** Statements that move data, not schema: they run once, and replication copies what they write. */
const DATA_STATEMENT = /^(?:INSERT|SELECT|WITH)\b/i
const LEADING_COMMENTS = /^(?:\s*\/\*[\s\S]*?\*\/)*\s*/

/** A single-quoted SQL string literal; text inside one is never rewritten. */
const STRING_LITERAL = /('(?:[^'\\]|\\.)*')/

/**
 * The cluster form of one single-node migration statement: `ON CLUSTER '<cluster>'` on every DDL
 * statement, `Replicated*MergeTree(REPLICA_PATH, REPLICA_NAME, …)` for every MergeTree engine, and
 * `SYNC` on drops. Data statements are returned unchanged. Throws on a statement it has no cluster
 * form for, so a new kind of migration statement cannot run on one replica only unnoticed.
 */
export function clusterStatement (statement: string, cluster: string): string {
  const comments = LEADING_COMMENTS.exec(statement)![0]
  const body = statement.slice(comments.length)
  if (DATA_STATEMENT.test(body)) return statement
  if (REPLICATED_ENGINE.test(body)) {
    throw new Error(`migrations are written for one node (the cluster form adds replication): ${head(body)}`)
  }
  const clause = onCluster(cluster)
  let rewritten: string | undefined
  for (const pattern of CLAUSE_AFTER_NAME) {
    const match = pattern.exec(body)
    if (match) {
      rewritten = `${match[0]} ${clause}${body.slice(match[0].length)}`
      break
    }
  }
  if (!rewritten && CLAUSE_AT_END.test(body)) rewritten = `${body} ${clause}`
  if (!rewritten) throw new Error(`no cluster form for this migration statement: ${head(body)}`)
  // A dropped table's Keeper path is freed only once the drop completes; without SYNC an Atomic
  // database finishes it minutes later, and a table created again under the same name (the same
  // path) would find the old replicas still registered.
  if (/^DROP\b/i.test(rewritten) && !/\bSYNC$/i.test(rewritten)) rewritten += ' SYNC'
  return comments + replicateEngines(rewritten)
}

function replicateEngines (sql: string): string {
  // Odd pieces of the split are string literals (comments of columns and tables): left as they are.
  return sql.split(STRING_LITERAL).map((piece, i) => i % 2 === 1
    ? piece
    : piece.replace(MERGE_TREE_ENGINE, (_all, equals: string, engine: string, open?: string, empty?: string) => {
      const replicated = `ENGINE${equals}Replicated${engine}('${REPLICA_PATH}', '${REPLICA_NAME}'`
      // The engine's own arguments, if any, follow the two replication arguments.
      return open && !empty ? `${replicated}, ` : `${replicated})`
    })).join('')
}

/** The ON CLUSTER clause; the name as a string literal, so names like all-replicated need no identifier quoting. */
export function onCluster (cluster: string): string {
  return `ON CLUSTER '${cluster.replace(/[\\']/g, (c) => `\\${c}`)}'`
}

function head (sql: string): string {
  return sql.replace(/\s+/g, ' ').slice(0, 80)
}

/** The engine of the store's schema_migrations table, undefined when the store has none yet. */
export async function migrationsTableEngine (client: ClickHouseClient): Promise<string | undefined> {
  return scalar(client, `/* svc:migrate */ SELECT engine AS value FROM system.tables
    WHERE database = currentDatabase() AND name = 'schema_migrations'`)
}

/**
 * Refuses to migrate a store whose form does not match the setting, before any DDL runs (the form
 * of schema_migrations, created first, is the store's):
 * - a store created for one node with CLICKHOUSE_CLUSTER set: ON CLUSTER DDL would add replicated
 *   tables on the other nodes beside the single-node ones;
 * - a store created for a cluster without it: new tables would exist on one replica only;
 * - with a cluster: a database of the Replicated engine (it replicates DDL itself and refuses ON
 *   CLUSTER), a cluster the server does not know, or one of several shards (the service keeps
 *   whole tables on each replica; several shards would each hold part of the data).
 */
export async function checkStoreForm (client: ClickHouseClient, cluster: string | undefined, migrationsEngine: string | undefined): Promise<void> {
  const replicated = migrationsEngine?.startsWith('Replicated')
  if (!cluster) {
    if (replicated) {
      throw new Error(`the ClickHouse store was created for a cluster (schema_migrations is ${migrationsEngine}): ` +
        'set CLICKHOUSE_CLUSTER to its cluster, or new tables would exist on one replica only (docs/cluster.md)')
    }
    return
  }
  if (migrationsEngine !== undefined && !replicated) {
    throw new Error(`the ClickHouse store was created for one node (schema_migrations is ${migrationsEngine}): ` +
      'convert it before setting CLICKHOUSE_CLUSTER (docs/cluster.md, "From one node to a cluster")')
  }
  const databaseEngine = await scalar(client, '/* svc:migrate */ SELECT engine AS value FROM system.databases WHERE name = currentDatabase()')
  if (databaseEngine === 'Replicated') {
    throw new Error('the ClickHouse database uses the Replicated engine, which replicates DDL itself and refuses ON CLUSTER: ' +
      'use an Atomic database with CLICKHOUSE_CLUSTER (docs/cluster.md)')
  }
  const shards = Number(await scalar(client, `/* svc:migrate */ SELECT toString(uniqExact(shard_num)) AS value FROM system.clusters
    WHERE cluster = {cluster:String}`, { cluster }))
  if (shards === 0) {
    throw new Error(`ClickHouse has no cluster named '${cluster}' (system.clusters): CLICKHOUSE_CLUSTER must name ` +
      'a cluster of the server\'s remote_servers (the embedded engine has none)')
  }
  if (shards > 1) {
    throw new Error(`cluster '${cluster}' has ${shards} shards: the service keeps whole tables on every replica of one shard, ` +
      'so name a cluster of one shard whose replicas are the nodes that hold its data (docs/cluster.md)')
  }
}

async function scalar (client: ClickHouseClient, query: string, params: Record<string, unknown> = {}): Promise<string | undefined> {
  const rs = await client.query({ query, query_params: params, format: 'JSONEachRow' })
  return (await rs.json<{ value: string }>())[0]?.value
}
