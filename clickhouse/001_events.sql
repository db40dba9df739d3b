-- Every accepted event, one row each. Append-only; the dashboard reads it through the rollups below
-- where they answer. Sorted by owner, agent and time so per-user scans read only that user's ranges.
CREATE TABLE IF NOT EXISTS events
(
    event_id              String                    COMMENT 'evt_ + ULID; sorts by receive time',
    user_id               String                    COMMENT 'owner of the API key that sent the event (Postgres users.id)',
    agent_id              String                    COMMENT 'resolved agent cuid (Postgres agents.id)',
    ts                    DateTime64(3, 'UTC')      COMMENT 'event time: the payload timestamp, else the receive time',
    received_at           DateTime64(3, 'UTC')      COMMENT 'when the service accepted the event',
    type                  LowCardinality(String)    COMMENT 'reasoning | tool | tx | decision | action | error',
    outcome               LowCardinality(String)    COMMENT 'pending | success | failed, empty when not sent',
    model                 LowCardinality(String)    COMMENT 'model name as sent, empty when not sent',
    tool_executed         LowCardinality(String)    COMMENT 'toolExecuted as sent',
    tools_considered      Array(String)             COMMENT 'toolsConsidered as sent',
    duration_ms           Nullable(UInt64)          COMMENT 'durationMs as sent',
    input                 String COMMENT 'input object as JSON text, empty when not sent' CODEC(ZSTD(3)),
    reasoning             String COMMENT 'reasoning text as sent' CODEC(ZSTD(3)),
    transaction           Nullable(String)          COMMENT 'transaction signature as sent (null when null or absent)',
    amount_token          LowCardinality(String)    COMMENT 'amount.token, empty when no amount',
    amount_value          Nullable(Float64)         COMMENT 'amount.value',
    error_message         String COMMENT 'errorMessage as sent' CODEC(ZSTD(3)),
    error_fingerprint     String                    COMMENT '16 hex chars grouping error/failed events (agent, tool, normalised message); empty otherwise',
    session_id            String                    COMMENT 'metadata.sessionId',
    trace_id              String                    COMMENT 'metadata.traceId',
    privacy_level         LowCardinality(String)    COMMENT 'metadata.privacyLevel: minimal | standard | full, empty when not sent',
    cwd                   String COMMENT 'metadata.cwd' CODEC(ZSTD(3)),
    git                   String COMMENT 'metadata.git as JSON text' CODEC(ZSTD(3)),
    framework_tool        LowCardinality(String)    COMMENT 'metadata.tool (the client framework)',
    tokens_input_base     UInt64                    COMMENT 'metadata.tokensBreakdown.inputBase',
    tokens_cache_creation UInt64                    COMMENT 'metadata.tokensBreakdown.cacheCreation',
    tokens_cache_read     UInt64                    COMMENT 'metadata.tokensBreakdown.cacheRead',
    tokens_output         UInt64                    COMMENT 'metadata.tokensBreakdown.output',
    cost_usd              Decimal(18, 9)            COMMENT 'USD cost from the model price table (src/domain/model-prices.json)',
    cost_status           LowCardinality(String)    COMMENT 'priced | unknown_model (cost 0) | no_model (cost 0)',
    metadata              String COMMENT 'the whole metadata object as JSON text (use JSONExtract*)' CODEC(ZSTD(3)),
    content_hash          FixedString(64)           COMMENT 'SHA-256 hex of the canonical JSON of the accepted payload',
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_error_fingerprint error_fingerprint TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_event_id event_id TYPE bloom_filter(0.001) GRANULARITY 4
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (user_id, agent_id, ts, event_id)
COMMENT 'Accepted telemetry events, one row per event';

-- Events per user and calendar month (UTC), for the advisory monthly quota.
CREATE TABLE IF NOT EXISTS usage_monthly
(
    user_id String                  COMMENT 'Postgres users.id',
    month   Date                    COMMENT 'first day of the month of received_at (UTC)',
    events  UInt64                  COMMENT 'accepted events'
)
ENGINE = SummingMergeTree
ORDER BY (user_id, month)
COMMENT 'Accepted events per user and month; sum(events) when reading, rows merge in the background';

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_monthly_mv TO usage_monthly AS
SELECT user_id, toStartOfMonth(received_at) AS month, count() AS events
FROM events
GROUP BY user_id, month;

-- Spend, tokens and counts per user, agent, model and day, for the spend summary and agent KPIs.
CREATE TABLE IF NOT EXISTS spend_daily
(
    user_id               String                 COMMENT 'Postgres users.id',
    agent_id              String                 COMMENT 'Postgres agents.id',
    model                 LowCardinality(String) COMMENT 'model as sent, empty when none',
    day                   Date                   COMMENT 'day of the event time (UTC)',
    events                UInt64                 COMMENT 'events',
    errors                UInt64                 COMMENT 'events of type error or outcome failed',
    cost_usd              Decimal(38, 9)         COMMENT 'sum of events.cost_usd',
    tokens_input_base     UInt64                 COMMENT 'sum of events.tokens_input_base',
    tokens_cache_creation UInt64                 COMMENT 'sum of events.tokens_cache_creation',
    tokens_cache_read     UInt64                 COMMENT 'sum of events.tokens_cache_read',
    tokens_output         UInt64                 COMMENT 'sum of events.tokens_output'
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (user_id, agent_id, model, day)
COMMENT 'Daily rollup of events; always read with sum() and GROUP BY, rows merge in the background';

CREATE MATERIALIZED VIEW IF NOT EXISTS spend_daily_mv TO spend_daily AS
SELECT
    user_id, agent_id, model, toDate(ts) AS day,
    count() AS events,
    countIf(error_fingerprint != '') AS errors,
    sum(toDecimal128(cost_usd, 9)) AS cost_usd,
    sum(tokens_input_base) AS tokens_input_base,
    sum(tokens_cache_creation) AS tokens_cache_creation,
    sum(tokens_cache_read) AS tokens_cache_read,
    sum(tokens_output) AS tokens_output
FROM events
GROUP BY user_id, agent_id, model, day;
