-- q finds what arrays in `input` hold: an array at any of input's first three levels is part of
-- search_text as its JSON text (keys and punctuation included, as an output's JSON text in
-- `reasoning` is), where before arrays were left out. An OpenTelemetry span's prompt is such an
-- array (gen_ai.input.messages, gen_ai.system_instructions: `input.messages`, `input.system`), so no
-- span's prompt could be found. Metadata is unchanged: its arrays are still neither searched nor
-- filterable (metadata_flat).
--
-- Otherwise the expression is that of 023. It applies to the events inserted from now on; those
-- stored before keep their search_text (recomputing it for them is a rewrite of every part: an
-- operator may run `ALTER TABLE events MATERIALIZE COLUMN search_text`, docs/operations.md).
-- Running this again changes nothing.
ALTER TABLE events MODIFY COLUMN search_text String MATERIALIZED
    lowerUTF8(arrayStringConcat(arrayConcat(
      mapValues(CAST(arrayMap(x -> (x.1, if(startsWith(x.2, '"'), if(position(x.2, '\\') = 0, substring(x.2, 2, length(x.2) - 2), JSONExtractString(x.2)), x.2)),
      arrayFilter(x -> NOT (startsWith(x.2, '{') OR startsWith(x.2, 'n')),
      arrayFlatten(arrayMap(a -> if(startsWith(a.2, '{'),
        arrayFlatten(arrayMap(b -> if(startsWith(b.2, '{'),
            arrayMap(c -> (concat(a.1, '.', b.1, '.', c.1), c.2), JSONExtractKeysAndValuesRaw(b.2)),
            [(concat(a.1, '.', b.1), b.2)]), JSONExtractKeysAndValuesRaw(a.2))),
        [(a.1, a.2)]), JSONExtractKeysAndValuesRaw(input))))) AS Map(String, String))),
      [reasoning, error_message, CAST(tool_executed AS String), CAST(model AS String)],
      mapValues(metadata_flat)), '\n'));

ALTER TABLE events COMMENT COLUMN search_text 'the text q searches, lower-cased: input leaves (arrays as their JSON text, since clickhouse/026), reasoning, error_message, tool_executed, model, metadata_flat values, one per line';
