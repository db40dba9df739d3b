-- Rows are sorted by (user_id, agent_id, ts): within each agent's run, time is ordered, so a minmax
-- index on ts lets per-user time-window reads skip every granule outside the window.
ALTER TABLE events ADD INDEX IF NOT EXISTS idx_ts ts TYPE minmax GRANULARITY 1;
