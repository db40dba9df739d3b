-- A second sort order of events by (user_id, ts): the dashboard's user-wide reads of a recent window
-- (the sessions and traces active lately, the edge of the agents' last 24 hours) read a few granules
-- of it, where `events`, sorted by agent first, has at least one granule per agent and part in any
-- window. It holds only the columns those reads need (about a third of the table's size on disk);
-- ClickHouse picks it by itself when it reads fewer granules, and keeps it within each part
-- (deduplicated and expired with the part).
ALTER TABLE events ADD PROJECTION IF NOT EXISTS events_by_time
(
    SELECT user_id, ts, agent_id, received_at, session_id, trace_id, cost_usd, error_fingerprint
    ORDER BY user_id, ts
);

-- Builds it for the parts stored before (a mutation; waits until done, so the service starts with it).
-- Running it again rebuilds it: harmless.
ALTER TABLE events MATERIALIZE PROJECTION events_by_time SETTINGS mutations_sync = 2;
