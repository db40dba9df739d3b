import { ClickHouseLogLevel, createClient, parseError, type ClickHouseClient, type ClickHouseSettings } from '@clickhouse/client'
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { checkStoreForm, clusterStatement, migrationsTableEngine } from './cluster-ddl.ts'
import { spreadReads } from './embedded-reads.ts'
import { makeDirs } from '../data-dir.ts'

/**
 * Where ClickHouse lives: a server when a URL is given, else the embedded engine under dataDir.
 * The embedded engine is one per process, so clients for the same directory are shared and
 * reference-counted: two app instances in one process (tests) see the same data.
 */
export interface ClickHouseTarget { url?: string | undefined; dataDir: string }

export interface ClickHouseHandle {
  client: ClickHouseClient
  embedded: boolean
  release(): Promise<void>
}

const shared = new Map<string, { client: ClickHouseClient; refs: number }>()

/** Sessions of the embedded engine that reads are spread over: a request's reads and two requests' run side by side. */
const EMBEDDED_READ_SESSIONS = 3

/** An insert of raw bytes in a text format, handed to the embedded engine without a copy. */
export interface RawInsert {
  table: string
  columns: readonly string[]
  format: 'JSONCompactEachRow'
  values: Buffer
  settings: Record<string, string | number>
}

/** The embedded engine's raw insert, per client (a server's client has none). */
const rawInserts = new WeakMap<ClickHouseClient, (params: RawInsert) => Promise<void>>()

/**
 * The raw insert of an embedded engine's client, or undefined for a server. @clickhouse/client's
 * insert path turns a body into a string and the SQL text around it, copying a block several times
 * over; chdb's raw insert reads the caller's Buffer where it is. Its failures are turned into the
 * client's ClickHouseError (code and type), as the client's own calls are.
 */
export function embeddedRawInsert (client: ClickHouseClient): ((params: RawInsert) => Promise<void>) | undefined {
  return rawInserts.get(client)
}

/**
 * Settings of every query the service sends. The engine compiles an expression to machine code the
 * third time it meets it, in the query that meets it: 30-40 ms added to a read of a few milliseconds.
 * The service's reads are short, and their parameters are constants of the expression, so a new user,
 * agent or instant makes a new expression to compile: compiled code never pays for itself here.
 */
const SERVICE_QUERY_SETTINGS: ClickHouseSettings = { compile_expressions: 0, compile_aggregate_expressions: 0, compile_sort_description: 0 }

export function openClickHouse (target: ClickHouseTarget): ClickHouseHandle {
  if (target.url) {
    const client = createClient({
      url: target.url,
      clickhouse_settings: { date_time_input_format: 'best_effort', ...SERVICE_QUERY_SETTINGS },
      // The callers log and handle failures (the shipper's retry lines, start-up errors): no second log.
      log: { level: ClickHouseLogLevel.OFF },
    })
    return { client, embedded: false, release: () => client.close() }
  }
  const path = join(target.dataDir, 'clickhouse')
  let entry = shared.get(path)
  if (!entry) {
    makeDirs(path)
    // chdb (the embedded engine, a large native library built for Linux and macOS only) is loaded only
    // here, so a deployment with CLICKHOUSE_URL starts where chdb cannot load.
    const { createChdbConnection } = createRequire(import.meta.url)('chdb/connection') as typeof import('chdb/connection')
    // chdb implements the Connection contract of @clickhouse/client-common; the client re-declares
    // the same types under its own path, so TypeScript sees two nominally different copies.
    const chdbConnection = createChdbConnection({ path })
    const clientOf = (c: typeof chdbConnection) => createClient({
      connection: c as unknown as NonNullable<Parameters<typeof createClient>[0]>['connection'],
      clickhouse_settings: SERVICE_QUERY_SETTINGS,
    })
    // Reads go to the least busy of a few sessions of the one engine (see spreadReads).
    const sessions = [clientOf(chdbConnection), ...Array.from({ length: EMBEDDED_READ_SESSIONS - 1 }, () => clientOf(createChdbConnection({ path })))]
    const spread = spreadReads(sessions)
    entry = { client: spread.client, refs: 0 }
    // The raw insert runs on the first session (chdbConnection's): counted as its load.
    rawInserts.set(entry.client, (params) => spread.onFirst(async () => {
      try {
        // No timeout and no abort signal: with either, chdb settles the promise while the engine may
        // still read the Buffer, and the shipper reuses that memory for its next block.
        await chdbConnection.chdb.rawInsert({ ...params, columns: [...params.columns] })
      } catch (err) {
        const mapped = parseError(String((err as Error)?.message ?? err))
        if (mapped !== err) mapped.cause = err
        throw mapped
      }
    }))
    shared.set(path, entry)
  }
  entry.refs++
  const held = entry
  let released = false
  return {
    client: held.client,
    embedded: true,
    async release () {
      if (released) return
      released = true
      if (--held.refs === 0) {
        shared.delete(path)
        await held.client.close()
      }
    },
  }
}

/**
 * The SETTINGS clause of a read of `events` found through a skip index (an id: event, session, trace)
 * rather than the sort key. The engine weighs the `events_feed` projection (clickhouse/014) for every
 * read of `events`, and for one that a skip index narrows, that weighing alone cost 50-100 ms at 10
 * million events, for a plan that never picks the projection.
 */
export const BY_SKIP_INDEX = 'SETTINGS optimize_use_projections = 0'

const MIGRATIONS_DIR = new URL('../../clickhouse/', import.meta.url)

/** The statements of one migration file: split on a semicolon that ends a line. */
export function splitStatements (sql: string): string[] {
  return sql
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter(Boolean)
}

/** The table that records applied migrations; on a cluster it is replicated like the others. */
export function schemaMigrationsDdl (cluster?: string): string {
  const ddl = `/* svc:migrate */ CREATE TABLE IF NOT EXISTS schema_migrations
      (version UInt32, name String, applied_at DateTime DEFAULT now())
      ENGINE = MergeTree ORDER BY version COMMENT 'ClickHouse migrations applied from clickhouse/'`
  return cluster ? clusterStatement(ddl, cluster) : ddl
}

/** One clickhouse/NNN_name.sql file. */
interface Migration { version: number; name: string; statements: string[] }

/**
 * The migration files in order, each statement in its single-node form, or in its cluster form
 * (src/storage/cluster-ddl.ts) when a cluster is named.
 */
export function readMigrations (cluster?: string): Migration[] {
  return readdirSync(MIGRATIONS_DIR).filter((f) => /^\d+_.*\.sql$/.test(f)).sort().map((name) => ({
    version: Number(name.split('_')[0]),
    name,
    statements: splitStatements(readFileSync(new URL(name, MIGRATIONS_DIR), 'utf8'))
      .map((statement) => cluster ? clusterStatement(statement, cluster) : statement),
  }))
}

export interface MigrateOptions {
  /** Apply up to this version only; tests use it to build a store as an older release left it. */
  upTo?: number
  /** The cluster (CLICKHOUSE_CLUSTER) whose replicas hold the tables; unset: one node, or ClickHouse Cloud. */
  cluster?: string | undefined
}

/**
 * Applies clickhouse/NNN_name.sql files not yet recorded in schema_migrations, in order, after
 * checking that the store was created in the form the cluster setting asks for.
 * Statements are written IF NOT EXISTS, so two processes racing at start cannot break anything,
 * and a cluster statement that failed on some replica can be run again.
 */
export async function migrateClickHouse (client: ClickHouseClient, opts: MigrateOptions = {}): Promise<string[]> {
  const migrationsEngine = await migrationsTableEngine(client)
  await checkStoreForm(client, opts.cluster, migrationsEngine)
  // Created only when missing: on a cluster, ON CLUSTER waits for every replica, and a start with
  // nothing to migrate must not wait on a replica that is down.
  if (migrationsEngine === undefined) await client.command({ query: schemaMigrationsDdl(opts.cluster) })
  const rs = await client.query({ query: '/* svc:migrate */ SELECT version FROM schema_migrations', format: 'JSONEachRow' })
  const done = new Set((await rs.json<{ version: number }>()).map((r) => Number(r.version)))
  const applied: string[] = []
  for (const { version, name, statements } of readMigrations(opts.cluster)) {
    if (done.has(version) || (opts.upTo !== undefined && version > opts.upTo)) continue
    for (const statement of statements) {
      await client.command({ query: statement })
    }
    await client.insert({ table: 'schema_migrations', values: [{ version, name }], format: 'JSONEachRow' })
    applied.push(name)
  }
  return applied
}
