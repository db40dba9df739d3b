-- The search columns of 018 (metadata_flat, search_text) from leaves the ingest path sends with each
-- row, instead of the engine flattening the JSON of `metadata` and `input` again on every insert:
-- most of what the search schema added to the engine's CPU per inserted event (bench/README.md,
-- "What the search schema costs an insert"). The ingest path has both objects parsed already; it
-- sends their scalar leaves as the three EPHEMERAL columns below (stored nowhere), by the rules of
-- 018 and 023, and the engine only lower-cases and joins them (src/domain/search-leaves.ts; a test
-- compares both ways over tricky JSON). A row that comes without them (`search_leaves` 0: an ingest
-- log line written by an earlier release, an analyst's insert, the search benchmark's rows built by
-- the engine) is flattened by the engine as before, so the values never depend on who inserted.
-- A new expression applies to the rows inserted from now on; rows stored before keep their values,
-- which are the same. Running this again changes nothing.
ALTER TABLE events
    ADD COLUMN IF NOT EXISTS search_leaves UInt8 EPHEMERAL 0
      COMMENT '1 when the insert sends search_meta_pairs and search_input_leaves',
    ADD COLUMN IF NOT EXISTS search_meta_pairs Array(Tuple(String, String)) EPHEMERAL []
      COMMENT 'metadata_flat as (path, value) pairs in order, from the ingest path',
    ADD COLUMN IF NOT EXISTS search_input_leaves Array(String) EPHEMERAL []
      COMMENT 'the scalar leaves of input, as metadata_flat values are, in order, from the ingest path';

ALTER TABLE events MODIFY COLUMN metadata_flat Map(String, String) MATERIALIZED
    if(search_leaves = 1, CAST(search_meta_pairs AS Map(String, String)),
    CAST(arrayMap(x -> (x.1, if(startsWith(x.2, '"'), if(position(x.2, '\\') = 0, substring(x.2, 2, length(x.2) - 2), JSONExtractString(x.2)), x.2)),
      arrayFilter(x -> NOT (startsWith(x.2, '{') OR startsWith(x.2, '[') OR startsWith(x.2, 'n')),
      arrayFlatten(arrayMap(a -> if(startsWith(a.2, '{'),
        arrayFlatten(arrayMap(b -> if(startsWith(b.2, '{'),
            arrayMap(c -> (concat(a.1, '.', b.1, '.', c.1), c.2), JSONExtractKeysAndValuesRaw(b.2)),
            [(concat(a.1, '.', b.1), b.2)]), JSONExtractKeysAndValuesRaw(a.2))),
        [(a.1, a.2)]), JSONExtractKeysAndValuesRaw(metadata))))) AS Map(String, String)));

ALTER TABLE events MODIFY COLUMN search_text String MATERIALIZED
    if(search_leaves = 1,
      lowerUTF8(arrayStringConcat(arrayConcat(search_input_leaves,
        [reasoning, error_message, CAST(tool_executed AS String), CAST(model AS String)], mapValues(metadata_flat)), '\n')),
    lowerUTF8(arrayStringConcat(arrayConcat(
      mapValues(CAST(arrayMap(x -> (x.1, if(startsWith(x.2, '"'), if(position(x.2, '\\') = 0, substring(x.2, 2, length(x.2) - 2), JSONExtractString(x.2)), x.2)),
      arrayFilter(x -> NOT (startsWith(x.2, '{') OR startsWith(x.2, '[') OR startsWith(x.2, 'n')),
      arrayFlatten(arrayMap(a -> if(startsWith(a.2, '{'),
        arrayFlatten(arrayMap(b -> if(startsWith(b.2, '{'),
            arrayMap(c -> (concat(a.1, '.', b.1, '.', c.1), c.2), JSONExtractKeysAndValuesRaw(b.2)),
            [(concat(a.1, '.', b.1), b.2)]), JSONExtractKeysAndValuesRaw(a.2))),
        [(a.1, a.2)]), JSONExtractKeysAndValuesRaw(input))))) AS Map(String, String))),
      [reasoning, error_message, CAST(tool_executed AS String), CAST(model AS String)],
      mapValues(metadata_flat)), '\n')));
