import { Ajv, type ErrorObject } from 'ajv'
import type { FromSchema } from 'json-schema-to-ts'
import { resolve } from 'node:path'

/**
 * A group of settings that belong together in Config (one object). `default: {}` lets the group be
 * left out, so its settings' own defaults apply; no other property is allowed in it.
 */
function group<const P> (properties: P) {
  return { type: 'object', properties, additionalProperties: false, default: {} } as const
}

/**
 * Every setting of the service, once: its place in Config (the property), its environment variable
 * (`env`), type and bounds, default and description. The Config type is derived from it, and so is
 * the settings table of docs/operations.md (`npm run docs:settings`). ARCHITECTURE §5 names the
 * first ones; the rest are tuning knobs with safe defaults.
 */
const settingsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    port: { env: 'PORT', type: 'integer', minimum: 0, maximum: 65535, default: 3000, description: 'port of the HTTP API' },
    host: { env: 'HOST', type: 'string', minLength: 1, default: '127.0.0.1', description: 'address the HTTP API listens on (the analysts\' SQL port: `ANALYTICS_HOST`)' },
    databaseUrl: {
      env: 'DATABASE_URL', type: 'string', pattern: '^postgres(ql)?://', default: 'postgres://localhost:5432/agent_telemetry',
      description: 'Postgres; created and migrated at start. Without a user name the OS user is used, as libpq does',
    },
    postgresTimeouts: group({
      connectMs: {
        env: 'PG_CONNECT_TIMEOUT_MS', type: 'integer', minimum: 100, maximum: 60000, default: 2000,
        description: 'longest wait to open a Postgres connection or get one from the pool (then 503)',
      },
      statementMs: {
        env: 'PG_STATEMENT_TIMEOUT_MS', type: 'integer', minimum: 100, maximum: 600000, default: 5000,
        description: 'longest Postgres statement: Postgres cancels it (`statement_timeout`), and the service gives up 1 s later if Postgres says nothing at all (then 503)',
      },
      idleInTransactionMs: {
        env: 'PG_IDLE_IN_TRANSACTION_TIMEOUT_MS', type: 'integer', minimum: 100, maximum: 3600000, default: 10000,
        description: 'Postgres ends a session left idle inside a transaction this long',
      },
    }),
    redisUrl: { env: 'REDIS_URL', type: 'string', pattern: '^rediss?://', default: 'redis://127.0.0.1:6379', description: 'Redis' },
    redisCommandTimeoutMs: {
      env: 'REDIS_COMMAND_TIMEOUT_MS', type: 'integer', minimum: 100, maximum: 60000, default: 1000,
      description: 'longest command of the main Redis connection, as while answering a request (then 503)',
    },
    redisPrefix: {
      env: 'REDIS_PREFIX', type: 'string', default: 'at:',
      description: 'prefix of every Redis key and channel, so several deployments (or test runs) can share a Redis',
    },
    clickhouseUrl: {
      env: 'CLICKHOUSE_URL', type: 'string', pattern: '^https?://',
      description: 'a ClickHouse server (`http://user:pass@host:8123/database`); unset: the embedded engine under `DATA_DIR`',
    },
    clickhouseCluster: {
      env: 'CLICKHOUSE_CLUSTER', type: 'string', pattern: '^[A-Za-z0-9_.-]+$',
      description: 'the ClickHouse cluster (one shard of replicas) that holds the tables: migrations run `ON CLUSTER` with `Replicated*` engines ([cluster.md](cluster.md)); unset: one node, or ClickHouse Cloud',
    },
    dataDir: { env: 'DATA_DIR', type: 'string', minLength: 1, default: './data', description: 'the embedded engine\'s files and the local signing key' },
    auth: {
      ...group({
        jwksUrl: {
          env: 'AUTH_JWKS_URL', type: 'string', pattern: '^https?://',
          description: 'JWKS of the identity provider whose tokens (ES256, RS256) open `/v1/me/*`; unset: tokens of the local signing key under `DATA_DIR` (`npm run token`)',
        },
        issuer: { env: 'AUTH_ISSUER', type: 'string', minLength: 1, description: 'issuer (`iss`) of the identity provider\'s tokens; set with `AUTH_JWKS_URL`' },
        audience: { env: 'AUTH_AUDIENCE', type: 'string', minLength: 1, description: 'audience (`aud`) of the identity provider\'s tokens; set with `AUTH_JWKS_URL`' },
      }),
      // All three or none: a provider without issuer or audience would accept any token it signed.
      dependencies: { jwksUrl: ['issuer', 'audience'], issuer: ['jwksUrl'], audience: ['jwksUrl'] },
    },
    corsOrigins: {
      env: 'CORS_ORIGINS', type: 'string', default: 'https://app.agent-telemetry.dev,https://dashboard.agent-telemetry.dev',
      description: 'comma-separated origins allowed to call from browsers',
    },
    roles: {
      env: 'ROLES', type: 'string', pattern: '^(api|worker)(,(api|worker))*$', default: 'api,worker',
      description: 'which roles this process runs, comma-separated: `api` (HTTP API, ingest log and shipper), `worker` (BullMQ workers)',
    },
    logLevel: {
      env: 'LOG_LEVEL', enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info',
      description: 'lowest level logged; a line per request only at `debug` and `trace`',
    },
    logFormat: {
      env: 'LOG_FORMAT', enum: ['json', 'pretty'], default: 'json',
      description: '`json`: one JSON object a line; `pretty`: human-readable lines for local runs',
    },
    bodyLimit: { env: 'BODY_LIMIT', type: 'integer', minimum: 1024, default: 1048576, description: 'largest request body in bytes (413 above)' },
    batchBodyLimit: {
      env: 'BATCH_BODY_LIMIT', type: 'integer', minimum: 1024, default: 5242880,
      description: 'largest body of `POST /v1/events/batch` and of OTLP requests, in bytes',
    },
    ingest: group({
      logDir: {
        env: 'INGEST_LOG_DIR', type: 'string', minLength: 1,
        description: 'this instance\'s ingest log (one process per directory; keep it on a persistent volume); unset: `$DATA_DIR/ingest-log`',
      },
      logMaxBytes: {
        env: 'INGEST_LOG_MAX_BYTES', type: 'integer', minimum: 65536, default: 1073741824,
        description: 'size at which the ingest log refuses new events (503 + `Retry-After`) until the shipper catches up',
      },
      batchMaxRows: { env: 'INGEST_BATCH_MAX_ROWS', type: 'integer', minimum: 1, default: 50000, description: 'most rows in one ClickHouse insert of the shipper' },
      batchMaxBytes: { env: 'INGEST_BATCH_MAX_BYTES', type: 'integer', minimum: 1024, default: 33554432, description: 'most bytes in one ClickHouse insert of the shipper' },
      shipMinIntervalMs: {
        env: 'INGEST_SHIP_MIN_INTERVAL_MS', type: 'integer', minimum: 0, maximum: 60000, default: 1500,
        description: 'least time from one insert\'s read of the ingest log to the next (the insert\'s own time counts in it), cut short when a `/v1/me` request waits for its events, and skipped when a full block (`INGEST_BATCH_MAX_*`) is already waiting: ' +
          'fewer, larger inserts (each costs the engine a part write per table, and the merges after it) at the cost of visibility (an event waits at most this plus one insert), ' +
          'without ever capping the rate the shipper can follow; 0 ships back to back',
      },
      drainTimeoutMs: {
        env: 'INGEST_DRAIN_TIMEOUT_MS', type: 'integer', minimum: 0, maximum: 25000, default: 10000,
        description: 'how long shutdown keeps shipping the log; what is left ships at the next start',
      },
      degradedAfterMs: {
        env: 'INGEST_DEGRADED_AFTER_MS', type: 'integer', minimum: 1000, default: 10000,
        description: '`/health` says `degraded` when the oldest event waiting in the log is older than this',
      },
      rowThreadMinEvents: {
        env: 'INGEST_ROW_THREAD_MIN_EVENTS', type: 'integer', minimum: 0, default: 64,
        description: 'requests with at least this many accepted events build their rows (hash, cost, line) on the row thread instead of the main thread; 0 never uses the thread',
      },
      retryWindowHours: {
        env: 'IDEMPOTENCY_WINDOW_HOURS', type: 'integer', minimum: 24, maximum: 720, default: 24,
        description: 'how long every instance recognises a re-sent OTLP span and replays the answer to a retried `Idempotency-Key` request (kept in Redis: [ingest.md](ingest.md#retries-stored-once))',
      },
      readYourWritesTimeoutMs: {
        env: 'READ_YOUR_WRITES_TIMEOUT_MS', type: 'integer', minimum: 0, maximum: 10000, default: 2000,
        description: 'how long a `/v1/me` request waits for the caller\'s acknowledged events to reach ClickHouse',
      },
    }),
    requestTimeoutMs: {
      env: 'REQUEST_TIMEOUT_MS', type: 'integer', minimum: 100, maximum: 600000, default: 10000,
      description: 'time a client has to send a whole request, headers and body; then 408 and the connection is closed',
    },
    keepAliveTimeoutMs: {
      env: 'KEEP_ALIVE_TIMEOUT_MS', type: 'integer', minimum: 1000, maximum: 600000, default: 72000,
      description: 'how long an idle keep-alive connection stays open (above the 60 s of common load balancers)',
    },
    cacheTtlMs: {
      env: 'CACHE_TTL_MS', type: 'integer', minimum: 0, maximum: 1000, default: 1000,
      description: 'longest time an instance serves its own copy of an API key, agent resolution or user without asking again',
    },
    sharedCacheTtlSeconds: {
      env: 'SHARED_CACHE_TTL_SECONDS', type: 'integer', minimum: 1, maximum: 86400, default: 300,
      description: 'how long an API key or agent resolution is kept in Redis for every instance; unknown keys 60 s at most',
    },
    trustProxy: {
      env: 'TRUST_PROXY', type: 'boolean', default: false,
      description: 'take the client address from `X-Forwarded-For` (only behind a trusted proxy)',
    },
    x402: group({
      // Keyed by chain; a chain left unset is absent, so it is not proxied.
      upstreams: group({
        base: { env: 'X402_BASE_URL', type: 'string', pattern: '^https?://', description: 'upstream of `GET /v1/x402` for the Base chain; unset: not proxied' },
        solana: { env: 'X402_SOLANA_URL', type: 'string', pattern: '^https?://', description: 'upstream of `GET /v1/x402` for Solana; unset: not proxied' },
      }),
      timeoutMs: {
        env: 'X402_TIMEOUT_MS', type: 'integer', minimum: 100, maximum: 60000, default: 3000,
        description: 'how long an x402 upstream may take (headers and body)',
      },
      freshSeconds: {
        env: 'X402_CACHE_SECONDS', type: 'integer', minimum: 1, default: 60,
        description: 'how long an x402 answer is served from Redis before the upstream is asked again',
      },
    }),
    statsCacheSeconds: { env: 'STATS_CACHE_SECONDS', type: 'integer', minimum: 1, default: 5, description: 'how long `/v1/stats` is cached in Redis' },
    explorerCacheSeconds: { env: 'EXPLORER_CACHE_SECONDS', type: 'integer', minimum: 1, default: 10, description: 'how long `/v1/explorer` is cached in Redis' },
    profileKpisCacheSeconds: {
      env: 'PROFILE_KPIS_CACHE_SECONDS', type: 'integer', minimum: 0, maximum: 60, default: 1,
      description: 'how long an agent\'s public KPIs (`GET /v1/agents/:identifier`) are cached in Redis; 0 queries ClickHouse on every read',
    },
    meLimits: group({
      readsPerMinute: {
        env: 'ME_READS_PER_MINUTE', type: 'integer', minimum: 1, default: 600,
        description: 'per-user, per-endpoint limit on `GET` requests to `/v1/me/*`, a minute',
      },
      writesPerMinute: {
        env: 'ME_WRITES_PER_MINUTE', type: 'integer', minimum: 1, default: 120,
        description: 'per-user, per-endpoint limit on other requests to `/v1/me/*`, a minute',
      },
    }),
    live: group({
      heartbeatMs: {
        env: 'LIVE_HEARTBEAT_MS', type: 'integer', minimum: 1000, maximum: 60000, default: 15000,
        description: 'how often an idle live tail (`GET /v1/me/events/stream`) gets a heartbeat comment',
      },
      bufferBytes: {
        env: 'LIVE_STREAM_BUFFER_BYTES', type: 'integer', minimum: 65536, maximum: 16777216, default: 262144,
        description: 'bytes a live tail may have waiting for a slow reader; beyond, its events are dropped and counted, and an `event: gap` says how many once it catches up',
      },
      maxStreams: {
        env: 'LIVE_MAX_STREAMS', type: 'integer', minimum: 1, maximum: 100000, default: 1000,
        description: 'live tails one instance serves at most (503 beyond); with `LIVE_STREAM_BUFFER_BYTES` it bounds their memory',
      },
      maxStreamsPerUser: {
        env: 'LIVE_MAX_STREAMS_PER_USER', type: 'integer', minimum: 1, maximum: 1000, default: 10,
        description: 'live tails of one user one instance serves at most (429 beyond)',
      },
      replayBatches: {
        env: 'LIVE_REPLAY_BATCHES', type: 'integer', minimum: 1, maximum: 100000, default: 100,
        description: 'batches of a watched user\'s accepted requests (one per publishing window) kept in Redis for `Last-Event-ID` resumption (the newest)',
      },
      publishWindowMs: {
        env: 'LIVE_PUBLISH_WINDOW_MS', type: 'integer', minimum: 0, maximum: 1000, default: 5,
        description: 'a watched user\'s accepted requests gathered this long go to the live tails in one Redis call (0: those of one event-loop turn); adds up to this much to delivery, saves the instance CPU under load',
      },
      replaySeconds: {
        env: 'LIVE_REPLAY_SECONDS', type: 'integer', minimum: 1, maximum: 3600, default: 60,
        description: 'and for how long: a live tail resumes without a gap within this time and `LIVE_REPLAY_BATCHES`',
      },
    }),
    burstLeaseMs: {
      env: 'BURST_LEASE_MS', type: 'integer', minimum: 0, maximum: 10000, default: 1000,
      description: 'how long an instance holds burst-limit tokens leased from Redis before giving unused ones back; 0 asks Redis on every request',
    },
    anomalyEveryMs: {
      env: 'ANOMALY_EVERY_MS', type: 'integer', minimum: 1000, maximum: 300000, default: 60000,
      description: 'how often the anomaly tick runs',
    },
    activityFlushMs: {
      env: 'ACTIVITY_FLUSH_MS', type: 'integer', minimum: 100, maximum: 60000, default: 1000,
      description: 'how often coalesced side effects (`lastSeenAt`, `lastUsedAt`, `framework`, monthly usage) are written',
    },
    notify: group({
      dashboardUrl: {
        env: 'DASHBOARD_URL', type: 'string', pattern: '^https?://',
        description: 'where people open the dashboard: notifications link to its pages; unset: `http://HOST:PORT`',
      },
      pagerdutyEventsUrl: {
        env: 'PAGERDUTY_EVENTS_URL', type: 'string', pattern: '^https?://', default: 'https://events.pagerduty.com/v2/enqueue',
        description: 'PagerDuty Events API v2 endpoint that `pagerduty` notification channels post to',
      },
      allowPrivateNetworks: {
        env: 'NOTIFY_ALLOW_PRIVATE_NETWORKS', enum: ['0', '1'], default: '0',
        description: '`1` lets notification channels reach loopback, private and link-local addresses (local use and tests); `0` refuses them at delivery',
      },
      concurrency: {
        env: 'NOTIFY_CONCURRENCY', type: 'integer', minimum: 1, maximum: 1000, default: 50,
        description: 'notification attempts a worker process makes at once, for every user: each waits up to 5 s on its receiver, so receivers that hang hold this many slots (the rest wait)',
      },
    }),
    secrets: group({
      key: {
        env: 'SECRETS_KEY', type: 'string', pattern: '^\\s*[A-Za-z0-9+/_-]{43}=?\\s*$',
        description: 'key (32 random bytes in base64: `openssl rand -base64 32`) that encrypts the notification secrets stored in Postgres ' +
          '([operations.md](operations.md#secrets-at-rest)); required when `CLICKHOUSE_URL` is set; unset on the embedded engine: generated once into `$DATA_DIR/secrets-key` (0600)',
      },
      previousKeys: {
        env: 'SECRETS_PREVIOUS_KEYS', type: 'string', pattern: '^\\s*[A-Za-z0-9+/_-]{43}=?\\s*(,\\s*[A-Za-z0-9+/_-]{43}=?\\s*)*$',
        description: 'comma-separated earlier values of `SECRETS_KEY`: they still decrypt, never encrypt; what they encrypted is encrypted again with `SECRETS_KEY` at start, after which they can be dropped',
      },
    }),
    metricsToken: {
      env: 'METRICS_TOKEN', type: 'string', minLength: 16,
      description: 'bearer token of `GET /metrics`; unset: no `/metrics` route and nothing collected',
    },
    namesSyncEveryMs: {
      env: 'NAMES_SYNC_EVERY_MS', type: 'integer', minimum: 1000, maximum: 3600000, default: 60000,
      description: 'how often changed agent names and user handles are copied to ClickHouse (worker role)',
    },
    retention: group({
      events: {
        env: 'RETENTION_DAYS', type: 'integer', minimum: 0, maximum: 36500, default: 90,
        description: 'days an event is kept after it was received (ClickHouse TTL on `events`, and on `group_totals` by the newest event of a session or trace); 0: forever',
      },
      rollups: {
        env: 'ROLLUP_RETENTION_DAYS', type: 'integer', minimum: 0, maximum: 36500, default: 0,
        description: 'days the rollups (`spend_daily`, `error_clusters_hourly`, `error_clusters_daily`, `agent_hourly`) keep a day / hour (by event time); 0: forever',
      },
      alerts: { env: 'ALERT_RETENTION_DAYS', type: 'integer', minimum: 0, maximum: 36500, default: 90, description: 'days a cleared alert is kept in Postgres; 0: forever' },
      waitlist: { env: 'WAITLIST_RETENTION_DAYS', type: 'integer', minimum: 0, maximum: 36500, default: 730, description: 'days a waitlist sign-up is kept in Postgres; 0: forever' },
    }),
    analytics: group({
      port: {
        env: 'ANALYTICS_PORT', type: 'string', pattern: '^(off|[0-9]{1,5})$', default: '8123',
        description: 'the analysts\' read-only SQL port (ClickHouse HTTP interface), embedded engine only, bound to `ANALYTICS_HOST`; `off` disables it',
      },
      host: {
        env: 'ANALYTICS_HOST', type: 'string', minLength: 1, default: '127.0.0.1',
        description: 'address the analysts\' SQL port listens on, independent of `HOST`; loopback unless set (SECURITY.md)',
      },
      password: {
        env: 'ANALYST_PASSWORD', type: 'string', minLength: 16,
        description: 'password of user `analyst`, at least 16 characters; unset: generated once into `$DATA_DIR/analyst-password` (0600)',
      },
      caps: group({
        maxExecutionSeconds: { env: 'ANALYTICS_MAX_EXECUTION_SECONDS', type: 'integer', minimum: 1, maximum: 3600, default: 30, description: 'longest analyst query, in seconds' },
        maxMemoryBytes: { env: 'ANALYTICS_MAX_MEMORY_BYTES', type: 'integer', minimum: 16777216, default: 1073741824, description: 'memory of one analyst query, in bytes' },
        maxResultRows: { env: 'ANALYTICS_MAX_RESULT_ROWS', type: 'integer', minimum: 1, default: 1000000, description: 'most rows in an analyst query\'s result' },
        maxResultBytes: { env: 'ANALYTICS_MAX_RESULT_BYTES', type: 'integer', minimum: 1024, default: 104857600, description: 'most bytes in an analyst query\'s result' },
        maxThreads: { env: 'ANALYTICS_MAX_THREADS', type: 'integer', minimum: 1, maximum: 64, default: 1, description: 'threads of one analyst query' },
        maxConcurrentQueries: {
          env: 'ANALYTICS_MAX_CONCURRENT_QUERIES', type: 'integer', minimum: 1, maximum: 64, default: 2,
          description: 'analyst queries at once on this instance (more: 503)',
        },
      }),
    }),
  },
} as const

/** The settings as validated, before the derived ones are computed. */
type Settings = FromSchema<typeof settingsSchema>

/** What a node of settingsSchema may hold, as the code that walks it sees it. */
interface SchemaNode {
  env?: string
  type?: string
  properties?: Record<string, SchemaNode>
  default?: unknown
  description?: string
  [keyword: string]: unknown
}

/** One setting: its environment variable, its place in Config and its schema. */
export interface Setting {
  name: string
  path: readonly string[]
  schema: SchemaNode
}

function settingsOf (node: SchemaNode, path: readonly string[] = []): Setting[] {
  return Object.entries(node.properties ?? {}).flatMap(([key, child]) =>
    child.env ? [{ name: child.env, path: [...path, key], schema: child }] : settingsOf(child, [...path, key]))
}

/** Every setting, in the order of settingsSchema. */
export const SETTINGS: readonly Setting[] = settingsOf(settingsSchema as SchemaNode)

const NAME_AT = new Map(SETTINGS.map((s) => [`/${s.path.join('/')}`, s.name]))

const validate = new Ajv({ useDefaults: true, coerceTypes: true, allErrors: true, keywords: ['env'] }).compile<Settings>(settingsSchema)

export class ConfigError extends Error {
  override name = 'ConfigError'
}

/** The settings set in env (an empty value counts as unset), placed as in Config; those in `refused` are left out. */
function readSettings (env: Record<string, string | undefined>, refused: ReadonlySet<string> = new Set()): Record<string, unknown> {
  const raw: Record<string, unknown> = {}
  for (const { name, path } of SETTINGS) {
    const value = env[name]
    if (value === undefined || value === '' || refused.has(name)) continue
    let node = raw
    for (const key of path.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>
    node[path.at(-1)!] = value
  }
  return raw
}

/**
 * One problem in the words of the operator: Ajv names a property by its key in Config, the operator
 * knows it by its environment variable, both for the subject and for the siblings a message names
 * (AUTH_JWKS_URL needs AUTH_ISSUER…).
 */
/** What a setting's pattern means, said instead of the pattern. */
const PATTERN_SAYS: ReadonlyMap<string, string> = new Map([
  ['SECRETS_KEY', 'must be 32 random bytes in base64 (openssl rand -base64 32)'],
  ['SECRETS_PREVIOUS_KEYS', 'must be earlier SECRETS_KEY values (32 bytes in base64 each), separated by commas'],
])

function problem (error: ErrorObject): string {
  const name = NAME_AT.get(error.instancePath)
  if (error.keyword === 'pattern' && name !== undefined && PATTERN_SAYS.has(name)) return `${name} ${PATTERN_SAYS.get(name)}`
  let message = (error.message ?? 'is invalid').replace(/\w+/g, (word) => NAME_AT.get(`${error.instancePath}/${word}`) ?? word)
  if (error.keyword === 'enum') message += `: ${(error.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`
  return `${name ?? 'settings'} ${message}`
}

type IdentityProvider = { jwksUrl: string; issuer: string; audience: string } | { local: true }

function identityProvider ({ jwksUrl, issuer, audience }: Settings['auth']): IdentityProvider {
  // The schema's dependencies make issuer and audience present whenever jwksUrl is.
  return jwksUrl ? { jwksUrl, issuer: issuer!, audience: audience! } : { local: true }
}

function analyticsPort (value: string): number | null {
  if (value === 'off') return null
  const port = Number(value)
  if (port > 65535) throw new ConfigError('invalid settings: ANALYTICS_PORT must be a port (0-65535) or off')
  return port
}

/** The settings whose value is computed from what was set: paths, lists, roles, the identity provider, the analysts' port, secrets keys, notification links. */
function derive (s: Settings) {
  const roles = s.roles.split(',')
  return {
    ...s,
    dataDir: resolve(s.dataDir),
    auth: identityProvider(s.auth),
    corsOrigins: s.corsOrigins.split(',').map((o) => o.trim()).filter(Boolean),
    roles: { api: roles.includes('api'), worker: roles.includes('worker') },
    ingest: { ...s.ingest, logDir: resolve(s.ingest.logDir ?? `${s.dataDir}/ingest-log`) },
    analytics: { ...s.analytics, port: analyticsPort(s.analytics.port) },
    secrets: { key: s.secrets.key?.trim(), previousKeys: (s.secrets.previousKeys ?? '').split(',').map((k) => k.trim()).filter(Boolean) },
    notify: {
      ...s.notify,
      dashboardUrl: (s.notify.dashboardUrl ?? `http://${s.host}:${s.port}`).replace(/\/+$/, ''),
      allowPrivateNetworks: s.notify.allowPrivateNetworks === '1',
    },
  }
}

/** Every setting of the service, validated once at start; each is described in settingsSchema. */
export type Config = ReturnType<typeof derive>

/** A number written as people write one in a setting: digits, an optional sign and decimals. */
const PLAIN_NUMBER = /^\s*[+-]?\d+(\.\d+)?\s*$/

/**
 * Reads and validates settings from an environment map; throws ConfigError naming every bad setting.
 * Only this module reads process.env.
 */
export function loadConfig (env: Record<string, string | undefined> = process.env): Config {
  // Ajv's coercion reads `0x10` as 16, `1e3` as 1000 and ` ` as 0 (a random port): a number setting
  // that reads as a number only so is refused (what reads as none, `abc`, Ajv refuses itself).
  const unnumbered = SETTINGS.filter((s) => {
    const value = env[s.name]
    return (s.schema.type === 'integer' || s.schema.type === 'number') && value !== undefined && value !== '' &&
      !PLAIN_NUMBER.test(value) && Number.isFinite(Number(value))
  })
  const raw = readSettings(env, new Set(unnumbered.map((s) => s.name)))
  const problems = unnumbered.map((s) => `${s.name} must be a number in decimal digits, not ${JSON.stringify(env[s.name])}`)
  if (!validate(raw)) problems.push(...(validate.errors ?? []).map(problem))
  if (problems.length > 0) throw new ConfigError(`invalid settings: ${[...new Set(problems)].join('; ')}`)
  const settings = raw as unknown as Settings
  // A URL that starts right but does not parse (`postgres://localhost:abc/x`) fails here, not at its first use.
  const unparsable = ([['DATABASE_URL', settings.databaseUrl], ['REDIS_URL', settings.redisUrl], ['CLICKHOUSE_URL', settings.clickhouseUrl]] as const)
    .filter(([, url]) => url !== undefined && !URL.canParse(url))
  if (unparsable.length > 0) {
    throw new ConfigError(`invalid settings: ${unparsable.map(([name]) => `${name} is not a valid URL (a port must be a number from 0 to 65535)`).join('; ')}`)
  }
  const config = derive(settings)
  if (config.clickhouseUrl === undefined && config.analytics.port !== null && config.analytics.port === config.port && config.analytics.port !== 0) {
    throw new ConfigError(`invalid settings: ANALYTICS_PORT must differ from PORT (both are ${config.port}): the API and the analysts' SQL port each need their own`)
  }
  return config
}
