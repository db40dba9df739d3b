-- The same search columns and facet counts as 018, 021 and 022, for less of the engine's CPU per
-- inserted event (bench/README.md, "Where the search schema's engine CPU goes"). Nothing read
-- changes: the values computed and the rows counted are the same, only how the engine gets to them.
--
-- 1. metadata_flat and search_text tell a JSON value's kind by its first character (as
-- JSONExtractKeysAndValuesRaw gives it: `"` a string, `{` an object, `[` an array, `n` null, anything
-- else a number or a boolean) rather than by JSONType, which parsed each value again, up to four
-- times; and a string without a backslash is the text between its quotes, decoded by JSONExtractString
-- only when it holds an escape. A new expression applies to the rows inserted from now on; the rows
-- stored before keep their values, which are the same. Running this again changes nothing.
ALTER TABLE events MODIFY COLUMN metadata_flat Map(String, String) MATERIALIZED
    CAST(arrayMap(x -> (x.1, if(startsWith(x.2, '"'), if(position(x.2, '\\') = 0, substring(x.2, 2, length(x.2) - 2), JSONExtractString(x.2)), x.2)),
      arrayFilter(x -> NOT (startsWith(x.2, '{') OR startsWith(x.2, '[') OR startsWith(x.2, 'n')),
      arrayFlatten(arrayMap(a -> if(startsWith(a.2, '{'),
        arrayFlatten(arrayMap(b -> if(startsWith(b.2, '{'),
            arrayMap(c -> (concat(a.1, '.', b.1, '.', c.1), c.2), JSONExtractKeysAndValuesRaw(b.2)),
            [(concat(a.1, '.', b.1), b.2)]), JSONExtractKeysAndValuesRaw(a.2))),
        [(a.1, a.2)]), JSONExtractKeysAndValuesRaw(metadata))))) AS Map(String, String));

ALTER TABLE events MODIFY COLUMN search_text String MATERIALIZED
    lowerUTF8(arrayStringConcat(arrayConcat(
      mapValues(CAST(arrayMap(x -> (x.1, if(startsWith(x.2, '"'), if(position(x.2, '\\') = 0, substring(x.2, 2, length(x.2) - 2), JSONExtractString(x.2)), x.2)),
      arrayFilter(x -> NOT (startsWith(x.2, '{') OR startsWith(x.2, '[') OR startsWith(x.2, 'n')),
      arrayFlatten(arrayMap(a -> if(startsWith(a.2, '{'),
        arrayFlatten(arrayMap(b -> if(startsWith(b.2, '{'),
            arrayMap(c -> (concat(a.1, '.', b.1, '.', c.1), c.2), JSONExtractKeysAndValuesRaw(b.2)),
            [(concat(a.1, '.', b.1), b.2)]), JSONExtractKeysAndValuesRaw(a.2))),
        [(a.1, a.2)]), JSONExtractKeysAndValuesRaw(input))))) AS Map(String, String))),
      [reasoning, error_message, CAST(tool_executed AS String), CAST(model AS String)],
      mapValues(metadata_flat)), '\n'));

-- 2. One view instead of two for search_facets_hourly: the events of an insert are first counted
-- per user, hour, plain facet values and shown metadata pairs (few distinct groups: most events of an
-- hour share them), and only those groups are spread into the (facet, key, value) tuples of 021 and
-- the `metadup` rows of 022, so the engine groups a row per group rather than eight or more per
-- event. The view of 022 goes first: between the two statements an insert's collisions of paths are
-- not counted (an insert of this release happens only after its migrations; with a server, as in 021,
-- stop or drain instances of an older release while this runs). 021 or 022 run again bring the
-- second view back: run this one again after them.
DROP VIEW IF EXISTS search_facets_path_dup_mv;

ALTER TABLE search_facets_hourly_mv MODIFY QUERY
SELECT user_id, hour, f.1 AS facet, f.2 AS key, f.3 AS value, sum(n) AS events, max(last) AS last_received
FROM
(
    SELECT user_id, toStartOfHour(ts) AS hour, type, outcome, model, tool_executed, agent_id, cost_status,
           arrayDistinct(arrayFilter(kv -> substringIndex(kv.1, '.', 1) NOT IN
             ('traceId', 'sessionId', 'spanId', 'parentSpanId', 'dedupKey', 'privacyLevel', 'tokensBreakdown'),
             arrayZip(metadata_flat.keys, metadata_flat.values))) AS meta,
           count() AS n, max(received_at) AS last
    FROM events
    GROUP BY user_id, hour, type, outcome, model, tool_executed, agent_id, cost_status, meta
)
ARRAY JOIN arrayConcat(
    [('total', '', ''), ('type', '', toString(type)), ('outcome', '', toString(outcome)), ('model', '', toString(model)),
     ('tool', '', toString(tool_executed)), ('agentId', '', agent_id), ('costStatus', '', toString(cost_status))],
    arrayMap(kv -> ('meta', kv.1, kv.2), meta),
    arrayMap(p -> ('metadup', p, ''), arrayFilter((p, n) -> n > 1, meta.1, arrayEnumerateUniq(meta.1)))) AS f
GROUP BY user_id, hour, facet, key, value;
