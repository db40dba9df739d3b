import t from 'tap'
import { ConfigError, loadConfig } from '../src/config.ts'

/** Every setting at a value other than its default, so a setting read into the wrong place shows. */
const EVERY_SETTING = {
  PORT: '4000',
  HOST: '0.0.0.0',
  DATABASE_URL: 'postgresql://db.example:5433/at',
  PG_CONNECT_TIMEOUT_MS: '2001',
  PG_STATEMENT_TIMEOUT_MS: '5001',
  PG_IDLE_IN_TRANSACTION_TIMEOUT_MS: '10001',
  REDIS_URL: 'rediss://cache.example:6380',
  REDIS_COMMAND_TIMEOUT_MS: '1001',
  REDIS_PREFIX: 'p:',
  CLICKHOUSE_URL: 'http://ch.example:8123/db',
  DATA_DIR: '/srv/at',
  AUTH_JWKS_URL: 'https://idp.example/jwks',
  AUTH_ISSUER: 'https://idp.example/',
  AUTH_AUDIENCE: 'agent-telemetry',
  CORS_ORIGINS: 'https://a.example, https://b.example,,',
  ROLES: 'worker',
  LOG_LEVEL: 'warn',
  LOG_FORMAT: 'pretty',
  BODY_LIMIT: '2048',
  BATCH_BODY_LIMIT: '4096',
  INGEST_LOG_DIR: '/srv/log',
  INGEST_LOG_MAX_BYTES: '65537',
  INGEST_BATCH_MAX_ROWS: '20001',
  INGEST_BATCH_MAX_BYTES: '16777217',
  INGEST_SHIP_MIN_INTERVAL_MS: '501',
  INGEST_DRAIN_TIMEOUT_MS: '10002',
  INGEST_DEGRADED_AFTER_MS: '10003',
  INGEST_ROW_THREAD_MIN_EVENTS: '65',
  IDEMPOTENCY_WINDOW_HOURS: '25',
  READ_YOUR_WRITES_TIMEOUT_MS: '2001',
  REQUEST_TIMEOUT_MS: '10004',
  KEEP_ALIVE_TIMEOUT_MS: '72001',
  CACHE_TTL_MS: '999',
  SHARED_CACHE_TTL_SECONDS: '301',
  TRUST_PROXY: 'true',
  X402_BASE_URL: 'https://base.example',
  X402_SOLANA_URL: 'https://solana.example',
  X402_TIMEOUT_MS: '3001',
  X402_CACHE_SECONDS: '61',
  STATS_CACHE_SECONDS: '6',
  EXPLORER_CACHE_SECONDS: '11',
  PROFILE_KPIS_CACHE_SECONDS: '2',
  ME_READS_PER_MINUTE: '601',
  ME_WRITES_PER_MINUTE: '121',
  BURST_LEASE_MS: '1002',
  ANOMALY_EVERY_MS: '60001',
  ACTIVITY_FLUSH_MS: '1003',
  DASHBOARD_URL: 'https://dash.example/',
  PAGERDUTY_EVENTS_URL: 'https://pd.example/v2/enqueue',
  NOTIFY_ALLOW_PRIVATE_NETWORKS: '1',
  NOTIFY_CONCURRENCY: '7',
  SECRETS_KEY: 'ZGV2ZWxvcG1lbnQtb25seS1kby1ub3QtdXNlLWtleSE=',
  SECRETS_PREVIOUS_KEYS: ' YWdlbnQtdGVsZW1ldHJ5LXRlc3RzLW9ubHkta2V5ISE= ,ZGV2ZWxvcG1lbnQtb25seS1kby1ub3QtdXNlLWtleSE=',
  METRICS_TOKEN: 'a-metrics-token-of-32-characters',
  NAMES_SYNC_EVERY_MS: '60002',
  RETENTION_DAYS: '91',
  ROLLUP_RETENTION_DAYS: '366',
  ALERT_RETENTION_DAYS: '92',
  WAITLIST_RETENTION_DAYS: '731',
  ANALYTICS_PORT: '9000',
  ANALYTICS_HOST: '0.0.0.0',
  ANALYST_PASSWORD: 'analyst-secret-of-24-chars',
  ANALYTICS_MAX_EXECUTION_SECONDS: '31',
  ANALYTICS_MAX_MEMORY_BYTES: '1073741825',
  ANALYTICS_MAX_RESULT_ROWS: '1000001',
  ANALYTICS_MAX_RESULT_BYTES: '104857601',
  ANALYTICS_MAX_THREADS: '2',
  ANALYTICS_MAX_CONCURRENT_QUERIES: '3',
  LIVE_HEARTBEAT_MS: '15001',
  LIVE_STREAM_BUFFER_BYTES: '262145',
  LIVE_MAX_STREAMS: '1001',
  LIVE_MAX_STREAMS_PER_USER: '11',
  LIVE_REPLAY_BATCHES: '101',
  LIVE_REPLAY_SECONDS: '61',
  LIVE_PUBLISH_WINDOW_MS: '6',
}

t.test('defaults: every setting unset', async (t) => {
  t.strictSame(JSON.parse(JSON.stringify(loadConfig({ DATA_DIR: '/srv/at' }))), {
    port: 3000,
    host: '127.0.0.1',
    databaseUrl: 'postgres://localhost:5432/agent_telemetry',
    postgresTimeouts: { connectMs: 2000, statementMs: 5000, idleInTransactionMs: 10000 },
    redisUrl: 'redis://127.0.0.1:6379',
    redisCommandTimeoutMs: 1000,
    redisPrefix: 'at:',
    dataDir: '/srv/at',
    auth: { local: true },
    corsOrigins: ['https://app.agent-telemetry.dev', 'https://dashboard.agent-telemetry.dev'],
    roles: { api: true, worker: true },
    logLevel: 'info',
    logFormat: 'json',
    bodyLimit: 1048576,
    batchBodyLimit: 5242880,
    ingest: {
      logDir: '/srv/at/ingest-log',
      logMaxBytes: 1073741824,
      batchMaxRows: 50000,
      batchMaxBytes: 33554432,
      shipMinIntervalMs: 1500,
      drainTimeoutMs: 10000,
      degradedAfterMs: 10000,
      rowThreadMinEvents: 64,
      retryWindowHours: 24,
      readYourWritesTimeoutMs: 2000,
    },
    requestTimeoutMs: 10000,
    keepAliveTimeoutMs: 72000,
    cacheTtlMs: 1000,
    sharedCacheTtlSeconds: 300,
    trustProxy: false,
    x402: { upstreams: {}, timeoutMs: 3000, freshSeconds: 60 },
    statsCacheSeconds: 5,
    explorerCacheSeconds: 10,
    profileKpisCacheSeconds: 1,
    meLimits: { readsPerMinute: 600, writesPerMinute: 120 },
    burstLeaseMs: 1000,
    anomalyEveryMs: 60000,
    activityFlushMs: 1000,
    notify: { dashboardUrl: 'http://127.0.0.1:3000', pagerdutyEventsUrl: 'https://events.pagerduty.com/v2/enqueue', allowPrivateNetworks: false, concurrency: 50 },
    live: { heartbeatMs: 15000, bufferBytes: 262144, maxStreams: 1000, maxStreamsPerUser: 10, replayBatches: 100, publishWindowMs: 5, replaySeconds: 60 },
    secrets: { previousKeys: [] },
    namesSyncEveryMs: 60000,
    retention: { events: 90, rollups: 0, alerts: 90, waitlist: 730 },
    analytics: {
      port: 8123,
      host: '127.0.0.1',
      caps: { maxExecutionSeconds: 30, maxMemoryBytes: 1073741824, maxResultRows: 1000000, maxResultBytes: 104857600, maxThreads: 1, maxConcurrentQueries: 2 },
    },
  })
})

t.test('every setting lands in its place', async (t) => {
  t.strictSame(loadConfig(EVERY_SETTING), {
    port: 4000,
    host: '0.0.0.0',
    databaseUrl: 'postgresql://db.example:5433/at',
    postgresTimeouts: { connectMs: 2001, statementMs: 5001, idleInTransactionMs: 10001 },
    redisUrl: 'rediss://cache.example:6380',
    redisCommandTimeoutMs: 1001,
    redisPrefix: 'p:',
    clickhouseUrl: 'http://ch.example:8123/db',
    dataDir: '/srv/at',
    auth: { jwksUrl: 'https://idp.example/jwks', issuer: 'https://idp.example/', audience: 'agent-telemetry' },
    corsOrigins: ['https://a.example', 'https://b.example'],
    roles: { api: false, worker: true },
    logLevel: 'warn',
    logFormat: 'pretty',
    bodyLimit: 2048,
    batchBodyLimit: 4096,
    ingest: {
      logDir: '/srv/log',
      logMaxBytes: 65537,
      batchMaxRows: 20001,
      batchMaxBytes: 16777217,
      shipMinIntervalMs: 501,
      drainTimeoutMs: 10002,
      degradedAfterMs: 10003,
      rowThreadMinEvents: 65,
      retryWindowHours: 25,
      readYourWritesTimeoutMs: 2001,
    },
    requestTimeoutMs: 10004,
    keepAliveTimeoutMs: 72001,
    cacheTtlMs: 999,
    sharedCacheTtlSeconds: 301,
    trustProxy: true,
    x402: { upstreams: { base: 'https://base.example', solana: 'https://solana.example' }, timeoutMs: 3001, freshSeconds: 61 },
    statsCacheSeconds: 6,
    explorerCacheSeconds: 11,
    profileKpisCacheSeconds: 2,
    meLimits: { readsPerMinute: 601, writesPerMinute: 121 },
    burstLeaseMs: 1002,
    anomalyEveryMs: 60001,
    activityFlushMs: 1003,
    notify: { dashboardUrl: 'https://dash.example', pagerdutyEventsUrl: 'https://pd.example/v2/enqueue', allowPrivateNetworks: true, concurrency: 7 },
    live: { heartbeatMs: 15001, bufferBytes: 262145, maxStreams: 1001, maxStreamsPerUser: 11, replayBatches: 101, publishWindowMs: 6, replaySeconds: 61 },
    secrets: { key: 'ZGV2ZWxvcG1lbnQtb25seS1kby1ub3QtdXNlLWtleSE=', previousKeys: ['YWdlbnQtdGVsZW1ldHJ5LXRlc3RzLW9ubHkta2V5ISE=', 'ZGV2ZWxvcG1lbnQtb25seS1kby1ub3QtdXNlLWtleSE='] },
    metricsToken: 'a-metrics-token-of-32-characters',
    namesSyncEveryMs: 60002,
    retention: { events: 91, rollups: 366, alerts: 92, waitlist: 731 },
    analytics: {
      port: 9000,
      host: '0.0.0.0',
      password: 'analyst-secret-of-24-chars',
      caps: { maxExecutionSeconds: 31, maxMemoryBytes: 1073741825, maxResultRows: 1000001, maxResultBytes: 104857601, maxThreads: 2, maxConcurrentQueries: 3 },
    },
  })
})

t.test('an empty value means unset; derived settings follow what is set', async (t) => {
  const c = loadConfig({ PORT: '', DATA_DIR: '/srv/at', X402_SOLANA_URL: 'https://solana.example', ANALYTICS_PORT: 'off', ROLES: 'worker,api' })
  t.equal(c.port, 3000)
  t.strictSame(c.x402.upstreams, { solana: 'https://solana.example' }, 'a chain without a URL is not proxied')
  t.equal(c.analytics.port, null)
  t.strictSame(c.roles, { api: true, worker: true })
  t.equal(c.ingest.logDir, '/srv/at/ingest-log', 'the ingest log under DATA_DIR')
  t.equal(loadConfig({ HOST: '0.0.0.0' }).analytics.host, '127.0.0.1', 'the analysts\' port stays on the loopback whatever HOST is')
  t.equal(loadConfig({ ANALYST_PASSWORD: 'sixteen-chars!!!' }).analytics.password, 'sixteen-chars!!!', 'a password of 16 characters is long enough')
})

t.test('a bad value stops start-up with a message naming the setting and the rule', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ PORT: 'abc' }, 'PORT must be integer'],
    [{ PORT: '1.5' }, 'PORT must be integer'],
    [{ PORT: '70000' }, 'PORT must be <= 65535'],
    [{ PORT: '0x10' }, 'PORT must be a number in decimal digits, not "0x10"'],
    [{ PORT: '1e3' }, 'PORT must be a number in decimal digits, not "1e3"'],
    [{ PORT: ' ' }, 'PORT must be a number in decimal digits, not " "'],
    [{ PORT: '4510', ANALYTICS_PORT: '4510' }, 'ANALYTICS_PORT must differ from PORT (both are 4510): the API and the analysts\' SQL port each need their own'],
    [{ ROLES: 'web' }, 'ROLES must match pattern "^(api|worker)(,(api|worker))*$"'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL must match pattern "^postgres(ql)?://"'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL must be equal to one of the allowed values: fatal, error, warn, info, debug, trace, silent'],
    [{ TRUST_PROXY: 'maybe' }, 'TRUST_PROXY must be boolean'],
    [{ METRICS_TOKEN: 'short' }, 'METRICS_TOKEN must NOT have fewer than 16 characters'],
    [{ CACHE_TTL_MS: '5000' }, 'CACHE_TTL_MS must be <= 1000'],
    [{ INGEST_BATCH_MAX_ROWS: '0' }, 'INGEST_BATCH_MAX_ROWS must be >= 1'],
    [{ ANALYTICS_MAX_THREADS: '65' }, 'ANALYTICS_MAX_THREADS must be <= 64'],
    [{ ANALYTICS_PORT: 'x' }, 'ANALYTICS_PORT must match pattern "^(off|[0-9]{1,5})$"'],
    [{ ANALYTICS_PORT: '99999' }, 'ANALYTICS_PORT must be a port (0-65535) or off'],
    [{ ANALYST_PASSWORD: 'fifteen-chars!!' }, 'ANALYST_PASSWORD must NOT have fewer than 16 characters'],
    [{ AUTH_JWKS_URL: 'https://idp.example/jwks' }, 'settings must have properties AUTH_ISSUER, AUTH_AUDIENCE when property AUTH_JWKS_URL is present'],
    [{ AUTH_ISSUER: 'i' }, 'settings must have property AUTH_JWKS_URL when property AUTH_ISSUER is present'],
    [{ NOTIFY_ALLOW_PRIVATE_NETWORKS: 'yes' }, 'NOTIFY_ALLOW_PRIVATE_NETWORKS must be equal to one of the allowed values: 0, 1'],
    [{ NOTIFY_CONCURRENCY: '0' }, 'NOTIFY_CONCURRENCY must be >= 1'],
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), new ConfigError(`invalid settings: ${message}`), JSON.stringify(env))
  }
})

t.test('every bad setting is named at once, each once', async (t) => {
  const err = t.throws(() => loadConfig({ PORT: 'abc', CACHE_TTL_MS: '5000', AUTH_ISSUER: 'i', AUTH_AUDIENCE: 'a' })) as Error
  t.equal(err.name, 'ConfigError')
  const problems = err.message.replace(/^invalid settings: /, '').split('; ').sort()
  t.strictSame(problems, [
    'CACHE_TTL_MS must be <= 1000',
    'PORT must be integer',
    'settings must have property AUTH_JWKS_URL when property AUTH_AUDIENCE is present',
    'settings must have property AUTH_JWKS_URL when property AUTH_ISSUER is present',
  ])
})

t.test('a secrets key that is not 32 bytes of base64 is refused, naming the setting and not echoing it', async (t) => {
  for (const [name, value] of [['SECRETS_KEY', 'too-short'], ['SECRETS_PREVIOUS_KEYS', 'ZGV2ZWxvcG1lbnQtb25seS1kby1ub3QtdXNlLWtleSE=,nope']]) {
    t.throws(() => loadConfig({ [name!]: value }), { name: 'ConfigError', message: new RegExp(`^invalid settings: ${name} must be (32 random bytes|earlier SECRETS_KEY values \\(32 bytes) in base64`) })
    try {
      loadConfig({ [name!]: value })
    } catch (err) {
      t.notMatch((err as Error).message, value!.split(',').at(-1)!, 'the value is not in the message')
    }
  }
})
