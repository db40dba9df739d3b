-- A session or trace ends when its last span finishes (an event's ts + duration_ms), which is not
-- always its last event to start: a root span outlasts its children, a long tool call the quick ones
-- started after it. group_totals kept only max(ts); `last_end` keeps the latest span end. A duration
-- counts up to 100 years (3155760000000 ms, MAX_SPAN_MS in src/domain/dashboard.ts), so that every
-- end is an instant with an ISO form. Parts stored before read last_end as their last_ts until the
-- backfill below adds their span ends.
ALTER TABLE group_totals ADD COLUMN IF NOT EXISTS last_end SimpleAggregateFunction(max, DateTime64(3, 'UTC')) DEFAULT last_ts
    COMMENT 'latest span end: ts + duration_ms' AFTER last_ts;

-- The view's new query, atomically: no insert is seen by neither query.
ALTER TABLE group_totals_mv MODIFY QUERY
SELECT user_id, g.1 AS kind, g.2 AS group_id, toStartOfHour(ts) AS hour, agent_id,
       count() AS events, min(ts) AS first_ts, max(ts) AS last_ts,
       max(ts + toIntervalMillisecond(least(ifNull(duration_ms, 0), 3155760000000))) AS last_end,
       max(received_at) AS last_received,
       countIf(error_fingerprint != '') AS errors, sum(toDecimal128(cost_usd, 9)) AS cost_usd,
       sum(tokens_input_base) AS tokens_input_base, sum(tokens_cache_creation) AS tokens_cache_creation,
       sum(tokens_cache_read) AS tokens_cache_read, sum(tokens_output) AS tokens_output
FROM events
ARRAY JOIN [('session', session_id), ('trace', trace_id)] AS g
WHERE g.2 != ''
GROUP BY user_id, kind, group_id, hour, agent_id;

-- The span ends of events stored before, as rows that add nothing to the sums (events, errors, cost
-- and tokens 0) and only the events' own times to the min/max columns: running it again, or for an
-- event the view has already counted, changes no figure. Only events with a duration can end after
-- their start.
INSERT INTO group_totals (user_id, kind, group_id, hour, agent_id, first_ts, last_ts, last_end, last_received)
SELECT user_id, g.1 AS kind, g.2 AS group_id, toStartOfHour(ts) AS hour, agent_id,
       min(ts), max(ts), max(ts + toIntervalMillisecond(least(ifNull(duration_ms, 0), 3155760000000))), max(received_at)
FROM events
ARRAY JOIN [('session', session_id), ('trace', trace_id)] AS g
WHERE g.2 != '' AND duration_ms > 0
GROUP BY user_id, kind, group_id, hour, agent_id;
