import pg from 'pg'
import Postgrator from 'postgrator'
import { fileURLToPath } from 'node:url'
import { userInfo } from 'node:os'
import { readdirSync } from 'node:fs'
import { basename, dirname } from 'node:path'
import { NETWORK_ERROR_WORDS } from '../domain/network-errors.ts'

const MIGRATIONS = fileURLToPath(new URL('../../postgres/*.sql', import.meta.url))
// An arbitrary constant: the advisory lock that serialises migrations across processes.
const MIGRATION_LOCK = 738_201_117

/**
 * A connection string with a user name: like libpq, a URL without one means the operating-system
 * user (node-postgres would read $USER, which services and CI often do not set).
 */
export function withDefaultUser (databaseUrl: string): string {
  const url = new URL(databaseUrl)
  if (!url.username) url.username = userInfo().username
  return url.toString()
}

/**
 * Creates the database named in the URL when it does not exist yet (connecting to `postgres`). With
 * timeouts (the service), a server that accepts the connection and says nothing fails it in time.
 */
async function ensureDatabase (databaseUrl: string, timeouts?: PostgresTimeouts): Promise<void> {
  const url = new URL(withDefaultUser(databaseUrl))
  const name = decodeURIComponent(url.pathname.slice(1))
  if (!name) throw new Error('DATABASE_URL names no database')
  url.pathname = '/postgres'
  const admin = new pg.Client({
    connectionString: url.toString(),
    ...(timeouts && { connectionTimeoutMillis: timeouts.connectMs, query_timeout: timeouts.statementMs + CLIENT_GRACE_MS }),
  })
  await admin.connect()
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])
    if (found.rowCount === 0) {
      try {
        await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`)
      } catch (err) {
        // Another process created it between our check and our CREATE.
        if ((err as { code?: string }).code !== '42P04' && (err as { code?: string }).code !== '23505') throw err
      }
    }
  } finally {
    await admin.end()
  }
}

/**
 * Applies postgres/NNN.do.*.sql migrations not applied yet, one process at a time; returns the files
 * applied. The connection is bounded by the timeouts; the wait for another process's migrations is not.
 */
async function migratePostgres (databaseUrl: string, timeouts?: PostgresTimeouts): Promise<string[]> {
  const client = new pg.Client({ connectionString: withDefaultUser(databaseUrl), ...(timeouts && { connectionTimeoutMillis: timeouts.connectMs }) })
  await client.connect()
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK])
    const postgrator = new Postgrator({
      migrationPattern: MIGRATIONS,
      driver: 'pg',
      schemaTable: 'schema_migrations',
      execQuery: (query) => client.query(query),
    })
    const applied = await postgrator.migrate()
    return applied.map((m) => basename(m.filename))
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {})
    await client.end()
  }
}

/** Bounds on how long the service waits for Postgres (ms); see Config.postgresTimeouts. */
/**
 * Runs `work` in a transaction that holds a lock on the user's row: a user's requests that count
 * and insert under a limit (channels, model prices) run one after another, so together they cannot
 * pass it.
 */
export async function underUserLock<T> (db: pg.Pool, userId: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect()
  try {
    await client.query('BEGIN')
    await client.query('/* svc:user_lock */ SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [userId])
    const result = await work(client)
    await client.query('COMMIT')
    return result
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}

export interface PostgresTimeouts { connectMs: number; statementMs: number; idleInTransactionMs: number }

// The server's statement_timeout answers first (57014, and the connection stays usable); the client
// gives up this much later only when the server says nothing at all (stalled or unreachable).
const CLIENT_GRACE_MS = 1000

/**
 * A pg pool that counts the queries sent through its `query` (the service reads the count as
 * `pgQueries`). Queries of a client checked out with `connect()` are sent through that client and
 * not counted.
 */
export interface CountingPool extends pg.Pool {
  /** Queries sent through `query` since the pool was created. */
  readonly queriesSent: number
}

// Callers see it as a CountingPool, whose `query` keeps pg's typed overloads; the one signature
// here stands for all of them (text or config, promise or callback): count, then send.
class QueryCountingPool extends pg.Pool implements CountingPool {
  #sent = 0

  get queriesSent (): number {
    return this.#sent
  }

  override query (...args: unknown[]): any {
    this.#sent++
    return (super.query as (...args: unknown[]) => unknown).apply(this, args)
  }
}

/**
 * A pool of at most 10 connections that counts its queries (CountingPool). With timeouts (the
 * service), a stalled or refusing Postgres fails requests within those bounds instead of holding
 * them; without (command-line tools), statements may run as long as they need.
 */
export function createPool (databaseUrl: string, timeouts?: PostgresTimeouts): CountingPool {
  return new QueryCountingPool({
    connectionString: withDefaultUser(databaseUrl),
    max: 10,
    ...(timeouts && {
      connectionTimeoutMillis: timeouts.connectMs,
      statement_timeout: timeouts.statementMs,
      query_timeout: timeouts.statementMs + CLIENT_GRACE_MS,
      idle_in_transaction_session_timeout: timeouts.idleInTransactionMs,
    }),
  })
}

/** The database a URL names, for people: `postgres://host:port/name`, without user or password. */
export function describePostgres (databaseUrl: string): string {
  const url = new URL(withDefaultUser(databaseUrl))
  return `postgres://${url.hostname || 'localhost'}:${url.port || '5432'}${url.pathname}`
}

/** A store a command-line tool refuses to change: it names the store and what to do. */
export class StoreNotReady extends Error {}

/**
 * A pool on a database the service has already created and migrated, for command-line tools that
 * change what is in it: they never create a database, nor apply migrations (a tool pointed at the
 * wrong DATABASE_URL must fail, not fill a new database). Throws StoreNotReady, naming the store
 * (never its user or password), when DATABASE_URL is not a URL, the server cannot be reached or
 * refuses the login, the database does not exist, or its migrations are not all applied.
 */
export async function openExistingPostgres (databaseUrl: string): Promise<CountingPool> {
  let where: string
  try {
    where = describePostgres(databaseUrl)
  } catch {
    throw new StoreNotReady('DATABASE_URL is not a valid URL: set it to postgres://user:password@host:5432/database')
  }
  const pool = createPool(databaseUrl)
  try {
    const { rows } = await pool.query(
      "/* svc:cli_schema_check */ SELECT to_regclass('public.schema_migrations') IS NOT NULL AS migrated",
    )
    const latest = Math.max(...postgresMigrationVersions())
    const applied = rows[0].migrated
      ? Number((await pool.query('/* svc:cli_schema_version */ SELECT max(version)::int AS v FROM schema_migrations')).rows[0].v ?? 0)
      : 0
    if (applied < latest) {
      throw new StoreNotReady(`${where} has ${applied === 0 ? 'none' : `${applied} of ${latest}`} of the service's migrations applied: ` +
        'set DATABASE_URL to the service\'s database, or start the service (or src/cli/migrate.ts) once to create and migrate it')
    }
    return pool
  } catch (err) {
    await pool.end().catch(() => {})
    const code = (err as { code?: string }).code ?? ''
    if (code === '3D000') {
      throw new StoreNotReady(`no database ${where}: set DATABASE_URL to the service's database (command-line tools never create one)`)
    }
    // Postgres answered and refused the login (unknown role, wrong password): its message names the
    // role, never the password.
    if (code === '28000' || code === '28P01') {
      throw new StoreNotReady(`${where} refused the login: ${(err as Error).message} (check the user and password in DATABASE_URL)`)
    }
    if (Object.hasOwn(NETWORK_ERROR_WORDS, code)) {
      throw new StoreNotReady(`cannot reach ${where}: ${NETWORK_ERROR_WORDS[code]} (start Postgres, or set DATABASE_URL to the service's database)`)
    }
    throw err
  }
}

/** The versions of the Postgres migrations in postgres/ (NNN of NNN.do.*.sql). */
function postgresMigrationVersions (): number[] {
  return readdirSync(dirname(MIGRATIONS)).filter((f) => /^\d+\.do\..*\.sql$/.test(f)).map((f) => Number(f.split('.')[0]))
}

/** Creates the database if missing, applies the migrations, and opens a pool: what every entry point does first. */
export async function openPostgres (databaseUrl: string, timeouts?: PostgresTimeouts, onMigrated?: (applied: string[]) => void): Promise<CountingPool> {
  await ensureDatabase(databaseUrl, timeouts)
  const applied = await migratePostgres(databaseUrl, timeouts)
  onMigrated?.(applied)
  return createPool(databaseUrl, timeouts)
}
