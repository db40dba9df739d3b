import { Ajv } from 'ajv'
import { resolve } from 'node:path'
import type { AnalyticsCaps } from './analytics-sql/engine.ts'

/**
 * Every setting of the service, validated once at start. Nothing else reads process.env.
 * Names and defaults follow ARCHITECTURE §5; the rest are tuning knobs with safe defaults.
 */
export interface Config {
  port: number
  host: string
  databaseUrl: string
  /**
   * Postgres timeouts (ms): opening a connection or waiting for one from the pool; one statement
   * (server-side statement_timeout; the client gives up a second later if the server is silent);
   * a transaction left idle.
   */
  postgresTimeouts: { connectMs: number; statementMs: number; idleInTransactionMs: number }
  redisUrl: string
  /** How long a command of the main Redis connection may take before it fails (ms). */
  redisCommandTimeoutMs: number
  /** Prefix for every Redis key and channel, so several deployments (or test runs) can share one Redis. */
  redisPrefix: string
  /** ClickHouse server URL; undefined means the embedded engine under dataDir. */
  clickhouseUrl: string | undefined
  /** The ClickHouse cluster whose replicas hold the tables (ON CLUSTER DDL, Replicated engines); undefined: one node or ClickHouse Cloud. */
  clickhouseCluster: string | undefined
  dataDir: string
  auth: { jwksUrl: string; issuer: string; audience: string } | { local: true }
  corsOrigins: string[]
  roles: { api: boolean; worker: boolean }
  logLevel: string
  /** json: one JSON object per line (default); pretty: human-readable lines for local runs. */
  logFormat: 'json' | 'pretty'
  /** Request body limits, in bytes. */
  bodyLimit: number
  batchBodyLimit: number
  /** The ingest log and its shipper (ARCHITECTURE §1). */
  ingest: {
    /** Where this instance's ingest log lives; one process per directory. */
    logDir: string
    /** Past this size the log refuses new events with 503 + Retry-After. */
    logMaxBytes: number
    /** One ClickHouse insert carries at most this many rows / bytes. */
    batchMaxRows: number
    batchMaxBytes: number
    /** Pause between inserts (ms); 0 ships back to back. */
    shipMinIntervalMs: number
    /** How long shutdown keeps shipping the log before leaving the rest for the next start (ms). */
    drainTimeoutMs: number
    /** /health reports degraded when the oldest unshipped event is older than this (ms). */
    degradedAfterMs: number
    /** Requests with at least this many events build their rows on the row thread (0: never). */
    rowThreadMinEvents: number
    /** How long a /v1/me read waits for the caller's acknowledged events to be shipped (ms). */
    readYourWritesTimeoutMs: number
  }
  /** How long a client may take to send a whole request, headers and body (ms); then 408 and close. */
  requestTimeoutMs: number
  /** How long an idle keep-alive connection is kept open (ms). */
  keepAliveTimeoutMs: number
  /** How long a cached API key or agent may be served before it is read again (ms). */
  cacheTtlMs: number
  /** How long a cached API key or agent resolution lives in Redis, shared by every instance (s). */
  sharedCacheTtlSeconds: number
  /** Whether to take the client address from X-Forwarded-For (only behind a trusted proxy). */
  trustProxy: boolean
  /** Upstreams of the /v1/x402 proxy, by chain; a chain without a URL is not proxied. */
  x402: { upstreams: Record<string, string>; timeoutMs: number; freshSeconds: number }
  /** How long public aggregates are cached in Redis. */
  statsCacheSeconds: number
  explorerCacheSeconds: number
  /** How long an agent's public KPIs (an engine query) are cached in Redis; 0: not cached. */
  profileKpisCacheSeconds: number
  /** Per-user, per-endpoint limits on /v1/me/*, requests a minute: reads (GET) and writes (the rest). */
  meLimits: { readsPerMinute: number; writesPerMinute: number }
  /** How long an instance may hold burst-limit tokens leased from Redis before giving them back (ms); 0: ask Redis every request. */
  burstLeaseMs: number
  /** How often the anomaly tick runs (ms). */
  anomalyEveryMs: number
  /** How often coalesced side effects (lastSeenAt, lastUsedAt, framework, monthly usage) are written (ms). */
  activityFlushMs: number
  /** Bearer token of GET /metrics; undefined: no /metrics route. */
  metricsToken: string | undefined
  /** How often agent names and user handles are copied to ClickHouse (ms). */
  namesSyncEveryMs: number
  /** Days each kind of data is kept (0: forever): events, rollups, cleared alerts, waitlist sign-ups. */
  retention: { events: number; rollups: number; alerts: number; waitlist: number }
  /** The analysts' read-only SQL port on the embedded engine (ClickHouse's HTTP interface); port null: off. */
  analytics: {
    port: number | null
    password: string | undefined
    caps: AnalyticsCaps
  }
}

const DEFAULT_CORS = 'https://app.agent-telemetry.dev,https://dashboard.agent-telemetry.dev'

const schema = {
  type: 'object',
  properties: {
    PORT: { type: 'integer', minimum: 0, maximum: 65535, default: 3000 },
    HOST: { type: 'string', minLength: 1, default: '127.0.0.1' },
    DATABASE_URL: { type: 'string', pattern: '^postgres(ql)?://', default: 'postgres://localhost:5432/agent_telemetry' },
    PG_CONNECT_TIMEOUT_MS: { type: 'integer', minimum: 100, maximum: 60000, default: 2000 },
    PG_STATEMENT_TIMEOUT_MS: { type: 'integer', minimum: 100, maximum: 600000, default: 5000 },
    PG_IDLE_IN_TRANSACTION_TIMEOUT_MS: { type: 'integer', minimum: 100, maximum: 3600000, default: 10000 },
    REDIS_URL: { type: 'string', pattern: '^rediss?://', default: 'redis://127.0.0.1:6379' },
    REDIS_COMMAND_TIMEOUT_MS: { type: 'integer', minimum: 100, maximum: 60000, default: 1000 },
    REDIS_PREFIX: { type: 'string', default: 'at:' },
    CLICKHOUSE_URL: { type: 'string', pattern: '^https?://' },
    CLICKHOUSE_CLUSTER: { type: 'string', pattern: '^[A-Za-z0-9_.-]+$' },
    DATA_DIR: { type: 'string', minLength: 1, default: './data' },
    AUTH_JWKS_URL: { type: 'string', pattern: '^https?://' },
    AUTH_ISSUER: { type: 'string', minLength: 1 },
    AUTH_AUDIENCE: { type: 'string', minLength: 1 },
    CORS_ORIGINS: { type: 'string', default: DEFAULT_CORS },
    ROLES: { type: 'string', pattern: '^(api|worker)(,(api|worker))*$', default: 'api,worker' },
    LOG_LEVEL: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info' },
    LOG_FORMAT: { enum: ['json', 'pretty'], default: 'json' },
    BODY_LIMIT: { type: 'integer', minimum: 1024, default: 1048576 },
    BATCH_BODY_LIMIT: { type: 'integer', minimum: 1024, default: 5242880 },
    INGEST_LOG_DIR: { type: 'string', minLength: 1 },
    INGEST_LOG_MAX_BYTES: { type: 'integer', minimum: 65536, default: 1073741824 },
    INGEST_BATCH_MAX_ROWS: { type: 'integer', minimum: 1, default: 20000 },
    INGEST_BATCH_MAX_BYTES: { type: 'integer', minimum: 1024, default: 16777216 },
    INGEST_SHIP_MIN_INTERVAL_MS: { type: 'integer', minimum: 0, maximum: 60000, default: 500 },
    INGEST_DRAIN_TIMEOUT_MS: { type: 'integer', minimum: 0, maximum: 25000, default: 10000 },
    INGEST_DEGRADED_AFTER_MS: { type: 'integer', minimum: 1000, default: 10000 },
    INGEST_ROW_THREAD_MIN_EVENTS: { type: 'integer', minimum: 0, default: 64 },
    READ_YOUR_WRITES_TIMEOUT_MS: { type: 'integer', minimum: 0, maximum: 10000, default: 2000 },
    REQUEST_TIMEOUT_MS: { type: 'integer', minimum: 100, maximum: 600000, default: 10000 },
    KEEP_ALIVE_TIMEOUT_MS: { type: 'integer', minimum: 1000, maximum: 600000, default: 72000 },
    CACHE_TTL_MS: { type: 'integer', minimum: 0, maximum: 1000, default: 1000 },
    SHARED_CACHE_TTL_SECONDS: { type: 'integer', minimum: 1, maximum: 86400, default: 300 },
    TRUST_PROXY: { type: 'boolean', default: false },
    X402_BASE_URL: { type: 'string', pattern: '^https?://' },
    X402_SOLANA_URL: { type: 'string', pattern: '^https?://' },
    X402_TIMEOUT_MS: { type: 'integer', minimum: 100, maximum: 60000, default: 3000 },
    X402_CACHE_SECONDS: { type: 'integer', minimum: 1, default: 60 },
    STATS_CACHE_SECONDS: { type: 'integer', minimum: 1, default: 5 },
    EXPLORER_CACHE_SECONDS: { type: 'integer', minimum: 1, default: 10 },
    PROFILE_KPIS_CACHE_SECONDS: { type: 'integer', minimum: 0, maximum: 60, default: 1 },
    ME_READS_PER_MINUTE: { type: 'integer', minimum: 1, default: 600 },
    ME_WRITES_PER_MINUTE: { type: 'integer', minimum: 1, default: 120 },
    BURST_LEASE_MS: { type: 'integer', minimum: 0, maximum: 10000, default: 1000 },
    ANOMALY_EVERY_MS: { type: 'integer', minimum: 1000, maximum: 300000, default: 60000 },
    ACTIVITY_FLUSH_MS: { type: 'integer', minimum: 100, maximum: 60000, default: 1000 },
    METRICS_TOKEN: { type: 'string', minLength: 16 },
    NAMES_SYNC_EVERY_MS: { type: 'integer', minimum: 1000, maximum: 3600000, default: 60000 },
    RETENTION_DAYS: { type: 'integer', minimum: 0, maximum: 36500, default: 90 },
    ROLLUP_RETENTION_DAYS: { type: 'integer', minimum: 0, maximum: 36500, default: 0 },
    ALERT_RETENTION_DAYS: { type: 'integer', minimum: 0, maximum: 36500, default: 90 },
    WAITLIST_RETENTION_DAYS: { type: 'integer', minimum: 0, maximum: 36500, default: 730 },
    ANALYTICS_PORT: { type: 'string', pattern: '^(off|[0-9]{1,5})$', default: '8123' },
    ANALYST_PASSWORD: { type: 'string', minLength: 8 },
    ANALYTICS_MAX_EXECUTION_SECONDS: { type: 'integer', minimum: 1, maximum: 3600, default: 30 },
    ANALYTICS_MAX_MEMORY_BYTES: { type: 'integer', minimum: 16777216, default: 1073741824 },
    ANALYTICS_MAX_RESULT_ROWS: { type: 'integer', minimum: 1, default: 1000000 },
    ANALYTICS_MAX_RESULT_BYTES: { type: 'integer', minimum: 1024, default: 104857600 },
    ANALYTICS_MAX_THREADS: { type: 'integer', minimum: 1, maximum: 64, default: 1 },
    ANALYTICS_MAX_CONCURRENT_QUERIES: { type: 'integer', minimum: 1, maximum: 64, default: 2 },
  },
  dependencies: {
    AUTH_JWKS_URL: ['AUTH_ISSUER', 'AUTH_AUDIENCE'],
    AUTH_ISSUER: ['AUTH_JWKS_URL'],
    AUTH_AUDIENCE: ['AUTH_JWKS_URL'],
  },
} as const

export class ConfigError extends Error {
  override name = 'ConfigError'
}

/** Reads and validates settings from an environment map; throws ConfigError naming every bad setting. */
export function loadConfig (env: Record<string, string | undefined> = process.env): Config {
  const ajv = new Ajv({ useDefaults: true, coerceTypes: true, allErrors: true })
  const validate = ajv.compile(schema)
  const raw: Record<string, unknown> = {}
  for (const key of Object.keys(schema.properties)) {
    const value = env[key]
    if (value !== undefined && value !== '') raw[key] = value
  }
  if (!validate(raw)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath.slice(1) || 'settings'} ${e.message}`)
    throw new ConfigError(`invalid settings: ${[...new Set(problems)].join('; ')}`)
  }
  const s = raw as Record<string, any>
  if (s.ANALYTICS_PORT !== 'off' && Number(s.ANALYTICS_PORT) > 65535) throw new ConfigError('invalid settings: ANALYTICS_PORT must be a port (0-65535) or off')
  const roles = String(s.ROLES).split(',')
  return {
    port: s.PORT,
    host: s.HOST,
    databaseUrl: s.DATABASE_URL,
    postgresTimeouts: {
      connectMs: s.PG_CONNECT_TIMEOUT_MS,
      statementMs: s.PG_STATEMENT_TIMEOUT_MS,
      idleInTransactionMs: s.PG_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
    redisUrl: s.REDIS_URL,
    redisCommandTimeoutMs: s.REDIS_COMMAND_TIMEOUT_MS,
    redisPrefix: s.REDIS_PREFIX,
    clickhouseUrl: s.CLICKHOUSE_URL,
    clickhouseCluster: s.CLICKHOUSE_CLUSTER,
    dataDir: resolve(s.DATA_DIR),
    auth: s.AUTH_JWKS_URL
      ? { jwksUrl: s.AUTH_JWKS_URL, issuer: s.AUTH_ISSUER, audience: s.AUTH_AUDIENCE }
      : { local: true },
    corsOrigins: String(s.CORS_ORIGINS).split(',').map((o) => o.trim()).filter(Boolean),
    roles: { api: roles.includes('api'), worker: roles.includes('worker') },
    logLevel: s.LOG_LEVEL,
    logFormat: s.LOG_FORMAT,
    bodyLimit: s.BODY_LIMIT,
    batchBodyLimit: s.BATCH_BODY_LIMIT,
    ingest: {
      logDir: resolve(s.INGEST_LOG_DIR ?? `${s.DATA_DIR}/ingest-log`),
      logMaxBytes: s.INGEST_LOG_MAX_BYTES,
      batchMaxRows: s.INGEST_BATCH_MAX_ROWS,
      batchMaxBytes: s.INGEST_BATCH_MAX_BYTES,
      shipMinIntervalMs: s.INGEST_SHIP_MIN_INTERVAL_MS,
      drainTimeoutMs: s.INGEST_DRAIN_TIMEOUT_MS,
      degradedAfterMs: s.INGEST_DEGRADED_AFTER_MS,
      rowThreadMinEvents: s.INGEST_ROW_THREAD_MIN_EVENTS,
      readYourWritesTimeoutMs: s.READ_YOUR_WRITES_TIMEOUT_MS,
    },
    requestTimeoutMs: s.REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: s.KEEP_ALIVE_TIMEOUT_MS,
    cacheTtlMs: s.CACHE_TTL_MS,
    sharedCacheTtlSeconds: s.SHARED_CACHE_TTL_SECONDS,
    trustProxy: s.TRUST_PROXY,
    x402: {
      upstreams: Object.fromEntries(Object.entries({ base: s.X402_BASE_URL, solana: s.X402_SOLANA_URL }).filter(([, url]) => url)),
      timeoutMs: s.X402_TIMEOUT_MS,
      freshSeconds: s.X402_CACHE_SECONDS,
    },
    statsCacheSeconds: s.STATS_CACHE_SECONDS,
    explorerCacheSeconds: s.EXPLORER_CACHE_SECONDS,
    profileKpisCacheSeconds: s.PROFILE_KPIS_CACHE_SECONDS,
    meLimits: { readsPerMinute: s.ME_READS_PER_MINUTE, writesPerMinute: s.ME_WRITES_PER_MINUTE },
    burstLeaseMs: s.BURST_LEASE_MS,
    anomalyEveryMs: s.ANOMALY_EVERY_MS,
    activityFlushMs: s.ACTIVITY_FLUSH_MS,
    metricsToken: s.METRICS_TOKEN,
    namesSyncEveryMs: s.NAMES_SYNC_EVERY_MS,
    retention: { events: s.RETENTION_DAYS, rollups: s.ROLLUP_RETENTION_DAYS, alerts: s.ALERT_RETENTION_DAYS, waitlist: s.WAITLIST_RETENTION_DAYS },
    analytics: {
      port: s.ANALYTICS_PORT === 'off' ? null : Number(s.ANALYTICS_PORT),
      password: s.ANALYST_PASSWORD,
      caps: {
        maxExecutionSeconds: s.ANALYTICS_MAX_EXECUTION_SECONDS,
        maxMemoryBytes: s.ANALYTICS_MAX_MEMORY_BYTES,
        maxResultRows: s.ANALYTICS_MAX_RESULT_ROWS,
        maxResultBytes: s.ANALYTICS_MAX_RESULT_BYTES,
        maxThreads: s.ANALYTICS_MAX_THREADS,
        maxConcurrentQueries: s.ANALYTICS_MAX_CONCURRENT_QUERIES,
      },
    },
  }
}
