import { createServer } from 'node:net'
import { existsSync, readFileSync } from 'node:fs'
import { join, resolve, sep } from 'node:path'
import type { Config } from './config.ts'
import { ownerRuns } from './ingest/log/pid-lock.ts'
import { isClickHouseRequestTimeout, NETWORK_ERROR_WORDS } from './domain/network-errors.ts'

/** A start-up failure already phrased for the operator: one line naming the setting and what to do. */
export class StartupError extends Error {
  override name = 'StartupError'
}

type Failure = Error & { code?: unknown; address?: unknown; port?: unknown; path?: unknown; hostname?: unknown; errors?: unknown[]; cause?: unknown }

/** The error and everything it wraps (causes, aggregated errors), outermost first. */
function chain (err: unknown): Failure[] {
  const out: Failure[] = []
  const walk = (e: unknown, depth: number) => {
    if (!e || typeof e !== 'object' || depth > 8 || out.includes(e as Failure)) return
    out.push(e as Failure)
    walk((e as Failure).cause, depth + 1)
    for (const inner of (e as Failure).errors ?? []) walk(inner, depth + 1)
  }
  walk(err, 0)
  return out
}

function endpoint (url: string | undefined, defaultPort: number): { host: string; port: number; user: string } | null {
  if (!url) return null
  try {
    const u = new URL(url)
    return { host: u.hostname, port: Number(u.port || defaultPort), user: decodeURIComponent(u.username) }
  } catch {
    return null
  }
}

/**
 * One line saying why the service could not start, naming the setting to look at and what to do.
 * Recognises unreachable or refusing Postgres, Redis and ClickHouse servers, Postgres logins and
 * databases, ports in use, and a DATA_DIR or ingest log held by another process; anything else is
 * reported with its own message.
 */
export function describeStartupFailure (err: unknown, config: Config): string {
  const errors = chain(err)
  const found = errors.find((e) => e instanceof StartupError)
  if (found) return found.message
  const pg = endpoint(config.databaseUrl, 5432)
  const redis = endpoint(config.redisUrl, 6379)
  const clickhouse = endpoint(config.clickhouseUrl, 8123)

  for (const e of errors) {
    const code = typeof e.code === 'string' ? e.code : ''
    // Postgres answered and refused.
    if (code === '28000' || code === '28P01') {
      return `Postgres refused the login of user "${pg?.user || 'the OS user'}" (DATABASE_URL): ${e.message}. ` +
        'Create that role in Postgres, or set DATABASE_URL to an existing user (postgres://user:password@host:5432/agent_telemetry).'
    }
    if (code === '42501' || code === '3D000') {
      return `Postgres: ${e.message} (DATABASE_URL). Give the user CREATEDB or create the database first, or set DATABASE_URL to a database the user can use.`
    }
    if (code === '57P03' || code === '53300') {
      return `Postgres is not accepting connections: ${e.message} (DATABASE_URL). Try again when it is up.`
    }
    if (code === 'EADDRINUSE') {
      const port = Number(e.port)
      const [setting, host, hostSetting] = port === config.analytics.port ? ['ANALYTICS_PORT', config.analytics.host, 'ANALYTICS_HOST'] : ['PORT', config.host, 'HOST']
      return `${setting} ${port} on ${host} (${hostSetting}) is already in use: stop the other process or choose another ${setting}.`
    }
    if (code === 'EACCES' && typeof e.port === 'number') {
      return `not allowed to listen on port ${e.port} (PORT or ANALYTICS_PORT): choose a port above 1023.`
    }
    // A full disk, said with no path (a write's ENOSPC) or in the engine's words ("Cannot reserve 1.00 MiB, not enough space").
    if ((code === 'ENOSPC' && typeof e.path !== 'string') || /not enough space|NOT_ENOUGH_SPACE/i.test(e.message ?? '')) {
      return `the disk under DATA_DIR ${config.dataDir} (or INGEST_LOG_DIR ${config.ingest.logDir}) is full (${e.message}). Free space there, or set DATA_DIR (and INGEST_LOG_DIR) to a disk with room.`
    }
    // A path of DATA_DIR's (or the ingest log's) that cannot be made or written: not a directory, read-only, full.
    const path = typeof e.path === 'string' ? resolve(e.path) : ''
    const touches = (dir: string) => path !== '' && (path === dir || path.startsWith(`${dir}${sep}`) || dir.startsWith(`${path}${sep}`))
    const ours = touches(config.dataDir) || touches(config.ingest.logDir)
    if (['EACCES', 'EROFS', 'ENOSPC', 'EEXIST', 'ENOTDIR', 'ENOENT', 'EPERM'].includes(code) && (ours || (code !== 'ENOENT' && code !== 'EEXIST' && /DATA_DIR|data|ingest/i.test(e.message)))) {
      const why = code === 'EEXIST' || code === 'ENOTDIR' ? 'a file is where a directory must be' : code === 'EROFS' ? 'the file system is read-only' : code === 'ENOSPC' ? 'the disk is full' : code === 'ENOENT' ? 'a directory on the way cannot be made' : 'not allowed'
      // The ingest log's own directory when the path is its (INGEST_LOG_DIR set apart from DATA_DIR).
      const log = config.ingest.logDir
      const inLog = !log.startsWith(`${config.dataDir}${sep}`) && touches(log)
      return inLog
        ? `cannot write under INGEST_LOG_DIR ${log}: ${why} (${e.message}). Make it a directory this user can write, or set INGEST_LOG_DIR.`
        : `cannot write under DATA_DIR ${config.dataDir}: ${why} (${e.message}). Make it a directory this user can write, or set DATA_DIR (and INGEST_LOG_DIR).`
    }
    // HOST (or ANALYTICS_HOST) names no address of this machine.
    if (((code === 'ENOTFOUND' || code === 'EAI_AGAIN') && typeof e.hostname === 'string') || (code === 'EADDRNOTAVAIL' && typeof e.address === 'string')) {
      const host = String(e.hostname ?? e.address)
      const setting = host === config.host ? 'HOST' : config.analytics.host === host ? 'ANALYTICS_HOST' : null
      if (setting) {
        const why = code === 'EADDRNOTAVAIL' ? 'it is no address of this machine' : 'the name does not resolve'
        return `cannot listen on ${setting} ${host}: ${why} (${code}). Set ${setting} to an address of this machine: 127.0.0.1 (this machine only) or 0.0.0.0 (every interface).`
      }
    }
    if (code === 'CHDB_CONNECTION' || /Another server instance in same directory|another process may be using this DATA_DIR/.test(e.message)) {
      return `DATA_DIR ${config.dataDir} is in use by another process (the embedded ClickHouse belongs to one process): ` +
        'stop the other process, give this instance its own DATA_DIR, or set CLICKHOUSE_URL to use a ClickHouse server.'
    }
    if (/^the ingest log .* belongs to running process/.test(e.message)) return `${e.message}.`
    if (Object.hasOwn(NETWORK_ERROR_WORDS, code) || /Connection terminated due to connection timeout|timeout exceeded when trying to connect|^Query read timeout$|^timeout expired$/i.test(e.message)) {
      const words = NETWORK_ERROR_WORDS[code] ?? 'timed out'
      const port = Number(e.port)
      const host = String(e.address ?? (e as { hostname?: unknown }).hostname ?? '')
      const matches = (x: typeof pg) => x !== null && (port === x.port || (!port && host === x.host))
      if (matches(redis) && !matches(pg)) {
        return `cannot reach Redis at ${redis!.host}:${redis!.port} (REDIS_URL): ${words}. Start Redis, or set REDIS_URL.`
      }
      if (matches(clickhouse) && !matches(pg)) {
        return `cannot reach ClickHouse at ${clickhouse!.host}:${clickhouse!.port} (CLICKHOUSE_URL): ${words}. Start the ClickHouse server, fix CLICKHOUSE_URL, or unset it to use the embedded engine.`
      }
      if (matches(pg) || !port) {
        return `cannot reach Postgres at ${pg!.host}:${pg!.port} (DATABASE_URL): ${words}. Start Postgres, or set DATABASE_URL.`
      }
    }
  }
  // pg's word for a server that took the connection and closed it before answering (not Postgres, or
  // one going down): only Postgres is reached through pg.
  if (errors.some((e) => /^Connection terminated unexpectedly$/.test(e.message)) && pg) {
    return `cannot reach Postgres at ${pg.host}:${pg.port} (DATABASE_URL): the server closed the connection without answering. Check that DATABASE_URL names a Postgres server, or start it.`
  }
  // @clickhouse/client's request timeout: a server that took the connection and never answered.
  if (errors.some(isClickHouseRequestTimeout) && clickhouse) {
    return `cannot reach ClickHouse at ${clickhouse.host}:${clickhouse.port} (CLICKHOUSE_URL): it took the connection but did not answer in time. Check that CLICKHOUSE_URL names a ClickHouse server that is up, or unset it to use the embedded engine.`
  }
  // ioredis reports a failed first connection as "Connection is closed" once its retries are spent:
  // a server that closed the connection, or took it and never answered (not Redis, or stalled).
  if (errors.some((e) => /^Connection is closed\.?$/.test(e.message)) && redis) {
    return `cannot reach Redis at ${redis.host}:${redis.port} (REDIS_URL): no answer (the server closed the connection, or took it and did not answer). ` +
      'Check that REDIS_URL names a Redis server that is up, or start Redis.'
  }
  const first = errors[0]
  return `${first?.message ?? String(err)} (set LOG_LEVEL=debug for the stack)`
}

/**
 * Refuses to start when the embedded engine's directory is held by another live process, before the
 * engine prints its own lock error: the engine's status file names the process holding it.
 */
export function checkDataDirFree (dataDir: string, remedy = 'stop that process, give this instance its own DATA_DIR, or set CLICKHOUSE_URL to use a ClickHouse server.', what = 'DATA_DIR'): void {
  const status = join(dataDir, 'clickhouse', 'status')
  if (!existsSync(status)) return
  const pid = Number(/^PID: (\d+)/m.exec(readFileSync(status, 'utf8'))?.[1])
  // A pid reused by an unrelated program does not hold the directory.
  if (!ownerRuns(pid, { command: 'node' })) return
  throw new StartupError(`${what} ${dataDir} is in use by process ${pid} (the embedded ClickHouse belongs to one process): ${remedy}`)
}

/**
 * Fails (EADDRINUSE, EACCES, as listening would) when `port` cannot be listened on now: a port in use
 * is told at once rather than after the start's work. Port 0 is any free port.
 */
export async function checkPortFree (port: number, host: string): Promise<void> {
  if (port === 0) return
  await new Promise<void>((resolve, reject) => {
    const probe = createServer()
    probe.once('error', (err: NodeJS.ErrnoException) => reject(Object.assign(err, { port })))
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()))
  })
}
