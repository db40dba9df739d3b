-- Search reads (docs/api.md#search) without reading every match of their window.
--
-- 1. `events_feed` (014) again, now with the search columns of 018. It was made with `SELECT *`,
-- which leaves out MATERIALIZED columns, so a search read the table itself, sorted by agent before
-- time: a common term's first page read and sorted every match of the window. With `metadata_flat`
-- and `search_text` in it, that page reads the newest granule or two in order, as the plain list
-- does. A projection cannot be changed in place: it is dropped and added again, then built for the
-- parts stored before (a mutation that waits until done; 45 s at 10 million events). Until it is
-- built, reads that used it read `events` itself (slower, never wrong). Running this again rebuilds
-- it. The rare-term and metadata searches keep reading `events` through its skip indexes (a
-- projection has none): the engine picks whichever reads fewer granules.
ALTER TABLE events DROP PROJECTION IF EXISTS events_feed SETTINGS mutations_sync = 2;

ALTER TABLE events ADD PROJECTION IF NOT EXISTS events_feed
(
    SELECT *, metadata_flat, search_text ORDER BY user_id, ts, event_id
);

ALTER TABLE events MATERIALIZE PROJECTION events_feed SETTINGS mutations_sync = 2;

-- 2. The facets (GET /v1/me/events/facets) without a filter other than the window: the counts per
-- user, hour of the event time, facet and value, so thirty days are read as 720 hours of counts
-- rather than every event. `facet` is total | type | outcome | model | tool | agentId | costStatus
-- (key ''), or meta (key: a metadata path of metadata_flat whose first segment is not one of the
-- keys the facets hide, src/storage/search-repository.ts FACET_HIDDEN_KEYS; an event counts once per
-- distinct path and value). `last_received` lets a read tell an hour that got an event after its
-- snapshot instant (an old event received late): it counts that hour from `events` instead, so the
-- answer stays that of the snapshot. Sorted by facet before hour: the check of the hours reads the
-- `total` rows of the window only, and each facet's rows of the window are side by side.
CREATE TABLE IF NOT EXISTS search_facets_hourly
(
    user_id       String                                             COMMENT 'Postgres users.id',
    hour          DateTime('UTC')                                    COMMENT 'hour of the event time',
    facet         LowCardinality(String)                             COMMENT 'total | type | outcome | model | tool | agentId | costStatus | meta',
    key           String                                             COMMENT 'the metadata path (facet meta), else empty',
    value         String                                             COMMENT 'the value counted (empty: not sent)',
    events        SimpleAggregateFunction(sum, UInt64)               COMMENT 'events of the hour with this value',
    last_received SimpleAggregateFunction(max, DateTime64(3, 'UTC')) COMMENT 'latest receive time of those events'
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (user_id, facet, hour, key, value)
SETTINGS non_replicated_deduplication_window = 1000
COMMENT 'Facet counts of events per user, hour and value; read with sum/max and GROUP BY, rows merge in the background';

-- Emptied first, so this migration interrupted after the backfill and run again counts nothing twice.
TRUNCATE TABLE IF EXISTS search_facets_hourly;

CREATE MATERIALIZED VIEW IF NOT EXISTS search_facets_hourly_mv TO search_facets_hourly AS
SELECT user_id, toStartOfHour(ts) AS hour, f.1 AS facet, f.2 AS key, f.3 AS value,
       count() AS events, max(received_at) AS last_received
FROM events
ARRAY JOIN arrayConcat(
    [('total', '', ''), ('type', '', toString(type)), ('outcome', '', toString(outcome)), ('model', '', toString(model)),
     ('tool', '', toString(tool_executed)), ('agentId', '', agent_id), ('costStatus', '', toString(cost_status))],
    arrayMap(kv -> ('meta', kv.1, kv.2), arrayDistinct(arrayFilter(kv -> extract(kv.1, '^[^.]*') NOT IN
      ('traceId', 'sessionId', 'spanId', 'parentSpanId', 'dedupKey', 'privacyLevel', 'tokensBreakdown'),
      arrayZip(metadata_flat.keys, metadata_flat.values))))) AS f
GROUP BY user_id, hour, facet, key, value;

-- Events stored before the view existed (as in 012: with a server, stop or drain instances of an
-- older release while this runs, or events they insert meanwhile are counted twice).
INSERT INTO search_facets_hourly
SELECT user_id, toStartOfHour(ts) AS hour, f.1 AS facet, f.2 AS key, f.3 AS value, count(), max(received_at)
FROM events
ARRAY JOIN arrayConcat(
    [('total', '', ''), ('type', '', toString(type)), ('outcome', '', toString(outcome)), ('model', '', toString(model)),
     ('tool', '', toString(tool_executed)), ('agentId', '', agent_id), ('costStatus', '', toString(cost_status))],
    arrayMap(kv -> ('meta', kv.1, kv.2), arrayDistinct(arrayFilter(kv -> extract(kv.1, '^[^.]*') NOT IN
      ('traceId', 'sessionId', 'spanId', 'parentSpanId', 'dedupKey', 'privacyLevel', 'tokensBreakdown'),
      arrayZip(metadata_flat.keys, metadata_flat.values))))) AS f
GROUP BY user_id, hour, facet, key, value;
