-- Search over events (GET /v1/me/events, /traces, /sessions and /events/facets; docs/api.md#search).
-- Two columns computed by the engine from what every event already holds (MATERIALIZED: nothing on
-- the ingest path changes, and an insert names neither), and one skip index.
--
-- metadata_flat: every scalar leaf of the metadata object, up to three levels deep, by its dotted
-- path: {"git":{"branch":"main"},"retries":3} gives {'git.branch':'main','retries':'3'}. A string
-- is its decoded text, a number or boolean its JSON text; nulls, arrays and deeper levels are left
-- out. Serves the meta.<path>=<value> and hasMeta=<path> filters and the metadata facets.
ALTER TABLE events ADD COLUMN IF NOT EXISTS metadata_flat Map(String, String) MATERIALIZED
    CAST(arrayMap(x -> (x.1, if(JSONType(x.2) = 'String', JSONExtractString(x.2), x.2)),
      arrayFilter(x -> JSONType(x.2) IN ('String', 'Int64', 'UInt64', 'Double', 'Bool'),
      arrayFlatten(arrayMap(a -> if(JSONType(a.2) = 'Object',
        arrayFlatten(arrayMap(b -> if(JSONType(b.2) = 'Object',
            arrayMap(c -> (concat(a.1, '.', b.1, '.', c.1), c.2), JSONExtractKeysAndValuesRaw(b.2)),
            [(concat(a.1, '.', b.1), b.2)]), JSONExtractKeysAndValuesRaw(a.2))),
        [(a.1, a.2)]), JSONExtractKeysAndValuesRaw(metadata))))) AS Map(String, String))
    COMMENT 'scalar leaves of metadata up to three levels deep by dotted path (strings decoded; numbers and booleans as JSON text)'
    AFTER metadata;

-- search_text: what the full-text search (q) looks in, lower-cased, one field per line: the scalar
-- leaves of input (three levels, as above), reasoning, error_message, tool_executed, model and the
-- values of metadata_flat. A search term is a substring of it (LIKE); the index below only lets a
-- read skip granules that cannot hold the term, it never decides a match.
ALTER TABLE events ADD COLUMN IF NOT EXISTS search_text String MATERIALIZED
    lowerUTF8(arrayStringConcat(arrayConcat(
      mapValues(CAST(arrayMap(x -> (x.1, if(JSONType(x.2) = 'String', JSONExtractString(x.2), x.2)),
      arrayFilter(x -> JSONType(x.2) IN ('String', 'Int64', 'UInt64', 'Double', 'Bool'),
      arrayFlatten(arrayMap(a -> if(JSONType(a.2) = 'Object',
        arrayFlatten(arrayMap(b -> if(JSONType(b.2) = 'Object',
            arrayMap(c -> (concat(a.1, '.', b.1, '.', c.1), c.2), JSONExtractKeysAndValuesRaw(b.2)),
            [(concat(a.1, '.', b.1), b.2)]), JSONExtractKeysAndValuesRaw(a.2))),
        [(a.1, a.2)]), JSONExtractKeysAndValuesRaw(input))))) AS Map(String, String))),
      [reasoning, error_message, CAST(tool_executed AS String), CAST(model AS String)],
      mapValues(metadata_flat)), '\n'))
    COMMENT 'the text q searches, lower-cased: input leaves, reasoning, error_message, tool_executed, model, metadata_flat values, one per line'
    CODEC(ZSTD(3))
    AFTER metadata_flat;

-- Character bigrams of search_text: a LIKE '%term%' of two or more characters reads only the
-- granules holding every bigram of the term (any script: CJK has no spaces between words).
ALTER TABLE events ADD INDEX IF NOT EXISTS idx_search_text search_text TYPE text(tokenizer = ngrams(2));

-- Computed for the parts stored before (mutations; each waits until done, so the service starts
-- with them). Running them again recomputes the same values: harmless.
ALTER TABLE events MATERIALIZE COLUMN metadata_flat SETTINGS mutations_sync = 2;
ALTER TABLE events MATERIALIZE COLUMN search_text SETTINGS mutations_sync = 2;
ALTER TABLE events MATERIALIZE INDEX idx_search_text SETTINGS mutations_sync = 2;
