-- The user-wide second sort order of events becomes a whole copy of each row, sorted by
-- (user_id, ts, event_id): the newest events of a user (GET /v1/me/events without an agent) are then
-- side by side on disk, and a page of them reads one or two granules, where `events`, sorted by
-- agent first, holds them in a granule per agent and part, each decompressed whole for a few rows.
-- It serves everything `events_by_time` (013) served, which it replaces. Its price: the bytes of
-- `events` once more on disk and on every insert. Columns added to `events` later are not in it
-- (a query naming one reads `events` itself).
ALTER TABLE events ADD PROJECTION IF NOT EXISTS events_feed
(
    SELECT * ORDER BY user_id, ts, event_id
);

-- Built for the parts stored before (a mutation; waits until done). Running it again rebuilds it.
ALTER TABLE events MATERIALIZE PROJECTION events_feed SETTINGS mutations_sync = 2;

ALTER TABLE events DROP PROJECTION IF EXISTS events_by_time SETTINGS mutations_sync = 2;
