-- Totals per session and per trace, split by agent and hour, so a page of the sessions or traces
-- lists reads a few rows per group instead of every event of its groups, and a list's time window
-- (or a page's snapshot) needs events only for the hours it cuts through. Rows of a group merge in
-- the background: read with min/max/sum and GROUP BY. Small granules: reads look up a few dozen
-- groups by key, each in every part.
CREATE TABLE IF NOT EXISTS group_totals
(
    user_id               String                                             COMMENT 'Postgres users.id',
    kind                  LowCardinality(String)                             COMMENT 'session (events.session_id) | trace (events.trace_id)',
    group_id              String                                             COMMENT 'the session id or trace id',
    hour                  DateTime('UTC')                                    COMMENT 'hour of the event time',
    agent_id              String                                             COMMENT 'Postgres agents.id',
    events                SimpleAggregateFunction(sum, UInt64)               COMMENT 'events',
    first_ts              SimpleAggregateFunction(min, DateTime64(3, 'UTC')) COMMENT 'earliest event time',
    last_ts               SimpleAggregateFunction(max, DateTime64(3, 'UTC')) COMMENT 'latest event time',
    last_received         SimpleAggregateFunction(max, DateTime64(3, 'UTC')) COMMENT 'latest receive time',
    errors                SimpleAggregateFunction(sum, UInt64)               COMMENT 'events of type error or outcome failed',
    cost_usd              SimpleAggregateFunction(sum, Decimal(38, 9))       COMMENT 'sum of events.cost_usd',
    tokens_input_base     SimpleAggregateFunction(sum, UInt64)               COMMENT 'sum of events.tokens_input_base',
    tokens_cache_creation SimpleAggregateFunction(sum, UInt64)               COMMENT 'sum of events.tokens_cache_creation',
    tokens_cache_read     SimpleAggregateFunction(sum, UInt64)               COMMENT 'sum of events.tokens_cache_read',
    tokens_output         SimpleAggregateFunction(sum, UInt64)               COMMENT 'sum of events.tokens_output'
)
ENGINE = AggregatingMergeTree
ORDER BY (user_id, kind, group_id, hour, agent_id)
SETTINGS index_granularity = 256, non_replicated_deduplication_window = 1000
COMMENT 'Sessions and traces: totals per group, hour and agent; read with sum/min/max and GROUP BY';

-- Events, errors and cost per user, agent and hour, for the agents' last-24-hours figures.
CREATE TABLE IF NOT EXISTS agent_hourly
(
    user_id   String          COMMENT 'Postgres users.id',
    agent_id  String          COMMENT 'Postgres agents.id',
    hour      DateTime('UTC') COMMENT 'hour of the event time',
    events    UInt64          COMMENT 'events',
    errors    UInt64          COMMENT 'events of type error or outcome failed',
    cost_usd  Decimal(38, 9)  COMMENT 'sum of events.cost_usd'
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (user_id, agent_id, hour)
SETTINGS non_replicated_deduplication_window = 1000
COMMENT 'Hourly rollup of events per agent; always read with sum() and GROUP BY, rows merge in the background';

-- Error events per user, agent, fingerprint and day: the error clusters of a month, or of one agent,
-- read a row per cluster and day rather than per hour (the hours before a window's first whole day
-- still come from error_clusters_hourly).
CREATE TABLE IF NOT EXISTS error_clusters_daily
(
    user_id           String                                                  COMMENT 'Postgres users.id',
    agent_id          String                                                  COMMENT 'Postgres agents.id',
    error_fingerprint String                                                  COMMENT 'events.error_fingerprint',
    day               Date                                                    COMMENT 'day of the event time (UTC)',
    events            SimpleAggregateFunction(sum, UInt64)                    COMMENT 'error events',
    first_ts          SimpleAggregateFunction(min, DateTime64(3, 'UTC'))      COMMENT 'earliest event time',
    last_ts           SimpleAggregateFunction(max, DateTime64(3, 'UTC'))      COMMENT 'latest event time',
    sample            AggregateFunction(argMax, String, DateTime64(3, 'UTC')) COMMENT 'latest error message: argMaxMerge(sample)',
    tools             SimpleAggregateFunction(groupUniqArrayArray, Array(String)) COMMENT 'tools that failed'
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (user_id, agent_id, error_fingerprint, day)
SETTINGS non_replicated_deduplication_window = 1000
COMMENT 'Daily rollup of error events (type error or outcome failed); read with sum/min/max/argMaxMerge and GROUP BY';

-- Emptied first, so a migration interrupted after the backfill below and run again
-- starts from nothing rather than counting the events twice.
TRUNCATE TABLE IF EXISTS group_totals;

TRUNCATE TABLE IF EXISTS agent_hourly;

TRUNCATE TABLE IF EXISTS error_clusters_daily;

CREATE MATERIALIZED VIEW IF NOT EXISTS group_totals_mv TO group_totals AS
SELECT user_id, g.1 AS kind, g.2 AS group_id, toStartOfHour(ts) AS hour, agent_id,
       count() AS events, min(ts) AS first_ts, max(ts) AS last_ts, max(received_at) AS last_received,
       countIf(error_fingerprint != '') AS errors, sum(toDecimal128(cost_usd, 9)) AS cost_usd,
       sum(tokens_input_base) AS tokens_input_base, sum(tokens_cache_creation) AS tokens_cache_creation,
       sum(tokens_cache_read) AS tokens_cache_read, sum(tokens_output) AS tokens_output
FROM events
ARRAY JOIN [('session', session_id), ('trace', trace_id)] AS g
WHERE g.2 != ''
GROUP BY user_id, kind, group_id, hour, agent_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS agent_hourly_mv TO agent_hourly AS
SELECT user_id, agent_id, toStartOfHour(ts) AS hour,
       count() AS events, countIf(error_fingerprint != '') AS errors, sum(toDecimal128(cost_usd, 9)) AS cost_usd
FROM events
GROUP BY user_id, agent_id, hour;

CREATE MATERIALIZED VIEW IF NOT EXISTS error_clusters_daily_mv TO error_clusters_daily AS
SELECT user_id, agent_id, error_fingerprint, toDate(ts) AS day,
       count() AS events, min(ts) AS first_ts, max(ts) AS last_ts,
       argMaxState(error_message, ts) AS sample, groupUniqArray(tool_executed) AS tools
FROM events
WHERE error_fingerprint != ''
GROUP BY user_id, agent_id, error_fingerprint, day;

-- Events stored before the views existed. Migrations run under a lock before the service ships
-- events (the embedded engine has no other writer), so every event present now predates the views.
-- With a server and instances of an older release still shipping, events they insert between the
-- views' creation and these statements would be counted twice here (never in `events`): stop them,
-- or let them drain, while this migration runs (docs/cluster.md).
INSERT INTO group_totals
SELECT user_id, g.1 AS kind, g.2 AS group_id, toStartOfHour(ts) AS hour, agent_id,
       count(), min(ts), max(ts), max(received_at), countIf(error_fingerprint != ''), sum(toDecimal128(cost_usd, 9)),
       sum(tokens_input_base), sum(tokens_cache_creation), sum(tokens_cache_read), sum(tokens_output)
FROM events
ARRAY JOIN [('session', session_id), ('trace', trace_id)] AS g
WHERE g.2 != ''
GROUP BY user_id, kind, group_id, hour, agent_id;

INSERT INTO agent_hourly
SELECT user_id, agent_id, toStartOfHour(ts) AS hour, count(), countIf(error_fingerprint != ''), sum(toDecimal128(cost_usd, 9))
FROM events
GROUP BY user_id, agent_id, hour;

INSERT INTO error_clusters_daily
SELECT user_id, agent_id, error_fingerprint, toDate(ts) AS day,
       count(), min(ts), max(ts), argMaxState(error_message, ts), groupUniqArray(tool_executed)
FROM events
WHERE error_fingerprint != ''
GROUP BY user_id, agent_id, error_fingerprint, day;
