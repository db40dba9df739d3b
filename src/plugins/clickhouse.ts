import fp from 'fastify-plugin'
import type { ClickHouseClient } from '@clickhouse/client'
import { ClickHouseLogLevel, createClient } from '@clickhouse/client'
import { migrateClickHouse, openClickHouse } from '../storage/clickhouse-client.ts'
import { CLICKHOUSE_MIGRATION_LOCK, withPostgresLock } from '../storage/migration-lock.ts'
import { onCluster } from '../storage/cluster-ddl.ts'
import { registerEmbeddedStore } from '../storage/embedded-stores.ts'

declare module 'fastify' {
  interface FastifyInstance {
    clickhouse: ClickHouseClient
  }
}

interface ClickHouseOptions {
  url: string | undefined
  dataDir: string
  /** CLICKHOUSE_CLUSTER: migrations in their cluster form (src/storage/cluster-ddl.ts). */
  cluster: string | undefined
}

/**
 * Asks a server's `/ping` before anything else, allowing it `timeoutMs`: a server that takes the
 * connection and never answers (a wrong port, a proxy in front of nothing) is told in seconds rather
 * than after the client's 30 s request timeout. Throws the client's error; the path is open to any
 * user, so credentials are checked by the first query.
 */
export async function pingServer (url: string, timeoutMs = 5_000): Promise<void> {
  const probe = createClient({ url, request_timeout: timeoutMs, log: { level: ClickHouseLogLevel.OFF } })
  try {
    const res = await probe.ping()
    if (!res.success) throw res.error
  } finally {
    await probe.close()
  }
}

/**
 * Creates the database named in a server URL when missing (the embedded engine uses `default`); on
 * every node of the cluster when one is named, since the migrations create tables there.
 */
export async function ensureServerDatabase (url: string, cluster?: string): Promise<void> {
  const parsed = new URL(url)
  const database = parsed.pathname.slice(1)
  if (!database) return
  parsed.pathname = '/'
  // Its failure is the start-up error, reported once by main.ts: the client need not log it too.
  const admin = createClient({ url: parsed.toString(), log: { level: ClickHouseLogLevel.OFF } })
  try {
    if (cluster) {
      // ON CLUSTER waits for every node: skipped once this node has the database, so that a start
      // does not wait on a replica that is down.
      const rs = await admin.query({ query: '/* svc:migrate */ SELECT name FROM system.databases WHERE name = {database:String}', query_params: { database }, format: 'JSONEachRow' })
      if ((await rs.json()).length > 0) return
    }
    const onEveryNode = cluster ? ` ${onCluster(cluster)}` : ''
    await admin.command({ query: `CREATE DATABASE IF NOT EXISTS \`${database.replace(/`/g, '')}\`${onEveryNode}` })
  } finally {
    await admin.close()
  }
}

/**
 * ClickHouse: the embedded engine or a server, migrated at start. Events reach it through the
 * ingestion plugin's shipper, which closes before this plugin does.
 */
export default fp(async function clickhouse (app, opts: ClickHouseOptions) {
  if (opts.url) {
    await pingServer(opts.url)
    await ensureServerDatabase(opts.url, opts.cluster)
  }
  let handle: ReturnType<typeof openClickHouse> | undefined
  try {
    handle = openClickHouse({ url: opts.url, dataDir: opts.dataDir })
    // One instance at a time (api and worker processes, replicas): migrations are not all idempotent.
    const client = handle.client
    const applied = await withPostgresLock(app.db, CLICKHOUSE_MIGRATION_LOCK, () => migrateClickHouse(client, { cluster: opts.cluster }),
      () => app.log.info('waiting for another instance to finish the ClickHouse migrations'))
    if (applied.length) app.log.info({ applied }, 'ClickHouse migrations applied')
  } catch (err) {
    await handle?.release().catch(() => {})
    if (!opts.url && (err as { code?: unknown })?.code === 'CHDB_CONNECTION') {
      // The engine's own line above says why; the usual reason is a second process on the same directory.
      throw new Error(`could not open the embedded ClickHouse under ${opts.dataDir}: another process may be using this DATA_DIR ` +
        '(one process owns it: give each instance its own DATA_DIR, or set CLICKHOUSE_URL)', { cause: err })
    }
    throw err
  }
  app.decorate('clickhouse', handle.client)
  // Several instances each with an embedded store split the events between them: said at start.
  const store = opts.url ? null : await registerEmbeddedStore(app.db, opts.dataDir, (err) => app.log.warn({ err }, 'could not record this instance\'s embedded store in Postgres'))
  for (const other of store?.others ?? []) {
    app.log.warn({ otherHost: other.host, otherDataDir: other.dataDir, otherPid: other.pid },
      'another instance with its own embedded ClickHouse uses this Postgres database: each stores the events it receives in its own DATA_DIR, ' +
      'so neither shows all of them. Several instances need one ClickHouse server (set CLICKHOUSE_URL on each, docs/scaling.md)')
  }
  app.addHook('onClose', async () => {
    await store?.stop()
    await handle.release()
  })
}, { name: 'clickhouse', dependencies: ['postgres'] })
