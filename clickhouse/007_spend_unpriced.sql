-- Events whose model the price catalogue does not know, per model and day, so the spend summary can
-- name what is unpriced. Events stored before this migration count as priced here (0).
ALTER TABLE spend_daily ADD COLUMN IF NOT EXISTS unpriced_events UInt64 DEFAULT 0 COMMENT 'events with cost_status = unknown_model (cost 0 because the catalogue does not know the model)';

-- The view is re-created with the new column. Migrations run before the service accepts events
-- (the embedded engine has no other writer); with a server and other instances ingesting, events
-- inserted between the two statements would be missing from this rollup: stop ingestion for this migration there.
DROP VIEW IF EXISTS spend_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS spend_daily_mv TO spend_daily AS
SELECT
    user_id, agent_id, model, toDate(ts) AS day,
    count() AS events,
    countIf(error_fingerprint != '') AS errors,
    sum(toDecimal128(cost_usd, 9)) AS cost_usd,
    sum(tokens_input_base) AS tokens_input_base,
    sum(tokens_cache_creation) AS tokens_cache_creation,
    sum(tokens_cache_read) AS tokens_cache_read,
    sum(tokens_output) AS tokens_output,
    countIf(cost_status = 'unknown_model') AS unpriced_events
FROM events
GROUP BY user_id, agent_id, model, day;
