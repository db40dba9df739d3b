-- The metadata facet's count of a path is the events holding a value at it (docs/api.md, facets).
-- 021 counts each distinct (path, value) of an event, and took a path's count as the sum of its
-- values' counts, which holds while an event has one value per path. An event can have two:
-- `{"git.branch": "a", "git": {"branch": "b"}}` holds `a` and `b` at `git.branch` (a dotted key is
-- the same path as the nesting), and was counted twice for the path.
--
-- The counts now hold, besides, one `metadup` row per value beyond an event's first at a path (key:
-- the path, value empty): a path's events are its values' counts less its `metadup` count. Only
-- events with such a collision add rows, so the insert of every other event costs what it did (the
-- view computes the event's distinct paths once more). Fed by a second view on `events`, so the
-- view of 021 keeps counting throughout. A path hidden from the facets (021) has no such row. 021
-- run again empties the table, these rows too: run this one again after it. A path's second and later
-- values are told by their occurrence number (arrayEnumerateUniq), linear in an event's paths: looking
-- each path up in the whole list, as this file first did, was quadratic (gigabytes for an event with
-- 20,000 paths); the rows are the same.
CREATE MATERIALIZED VIEW IF NOT EXISTS search_facets_path_dup_mv TO search_facets_hourly AS
SELECT user_id, toStartOfHour(ts) AS hour, 'metadup' AS facet, k AS key, '' AS value,
       count() AS events, max(received_at) AS last_received
FROM events
ARRAY JOIN arrayFilter((p, n) -> n > 1,
    arrayMap(kv -> kv.1, arrayDistinct(arrayFilter(kv -> extract(kv.1, '^[^.]*') NOT IN
      ('traceId', 'sessionId', 'spanId', 'parentSpanId', 'dedupKey', 'privacyLevel', 'tokensBreakdown'),
      arrayZip(metadata_flat.keys, metadata_flat.values)))) AS paths,
    arrayEnumerateUniq(paths)) AS k
GROUP BY user_id, hour, key;

-- Events stored before the view existed. Rows of an earlier run of this migration go first, so one
-- interrupted and run again counts nothing twice (as in 021: with a server, stop or drain instances
-- of an older release while this runs).
ALTER TABLE search_facets_hourly DELETE WHERE facet = 'metadup' SETTINGS mutations_sync = 2;

INSERT INTO search_facets_hourly
SELECT user_id, toStartOfHour(ts) AS hour, 'metadup' AS facet, k AS key, '' AS value, count(), max(received_at)
FROM events
ARRAY JOIN arrayFilter((p, n) -> n > 1,
    arrayMap(kv -> kv.1, arrayDistinct(arrayFilter(kv -> extract(kv.1, '^[^.]*') NOT IN
      ('traceId', 'sessionId', 'spanId', 'parentSpanId', 'dedupKey', 'privacyLevel', 'tokensBreakdown'),
      arrayZip(metadata_flat.keys, metadata_flat.values)))) AS paths,
    arrayEnumerateUniq(paths)) AS k
GROUP BY user_id, hour, key;
