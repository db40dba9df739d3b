-- Error events per user, fingerprint, hour and agent, so cluster lists never scan raw events.
CREATE TABLE IF NOT EXISTS error_clusters_hourly
(
    user_id           String                                                  COMMENT 'Postgres users.id',
    error_fingerprint String                                                  COMMENT 'events.error_fingerprint',
    hour              DateTime('UTC')                                         COMMENT 'hour of the event time',
    agent_id          String                                                  COMMENT 'Postgres agents.id',
    events            SimpleAggregateFunction(sum, UInt64)                    COMMENT 'error events',
    first_ts          SimpleAggregateFunction(min, DateTime64(3, 'UTC'))      COMMENT 'earliest event time',
    last_ts           SimpleAggregateFunction(max, DateTime64(3, 'UTC'))      COMMENT 'latest event time',
    sample            AggregateFunction(argMax, String, DateTime64(3, 'UTC')) COMMENT 'latest error message: argMaxMerge(sample)',
    tools             SimpleAggregateFunction(groupUniqArrayArray, Array(String)) COMMENT 'tools that failed'
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (user_id, error_fingerprint, hour, agent_id)
COMMENT 'Hourly rollup of error events (type error or outcome failed); read with sum/min/max/argMaxMerge and GROUP BY';

CREATE MATERIALIZED VIEW IF NOT EXISTS error_clusters_hourly_mv TO error_clusters_hourly AS
SELECT user_id, error_fingerprint, toStartOfHour(ts) AS hour, agent_id,
       count() AS events, min(ts) AS first_ts, max(ts) AS last_ts,
       argMaxState(error_message, ts) AS sample, groupUniqArray(tool_executed) AS tools
FROM events
WHERE error_fingerprint != ''
GROUP BY user_id, error_fingerprint, hour, agent_id;

-- Events stored before the view existed. Migrations run before the service accepts events (and the
-- embedded engine has no other writer), so every event present now predates the view. With a server
-- and other instances still ingesting, events inserted between the two statements would be counted
-- twice in this rollup (never in `events`): stop ingestion for this migration there.
INSERT INTO error_clusters_hourly
SELECT user_id, error_fingerprint, toStartOfHour(ts) AS hour, agent_id,
       count(), min(ts), max(ts), argMaxState(error_message, ts), groupUniqArray(tool_executed)
FROM events
WHERE error_fingerprint != ''
GROUP BY user_id, error_fingerprint, hour, agent_id;
