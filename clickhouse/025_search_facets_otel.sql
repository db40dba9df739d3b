-- The hourly facet counts leave out the paths of an OTLP span's metadata that are unique to a span
-- or measure it (gen_ai.response.id, token counts, timings, its conversation id) and its content
-- attributes (prompts, completions, tool arguments). Each put a row per span into an hour's counts:
-- 2,000 spans of an agent instrumented with the GenAI conventions made 4,947 rows in an hour, where
-- the same number of events sent with their own metadata make a few dozen; and each span was a group
-- of its own in the view's first GROUP BY. The pattern is FACET_HIDDEN_OTEL of
-- src/storage/search-repository.ts, which also leaves these paths out of the counts read from
-- `events` and out of the rows this view counted before (docs/api.md, "Facets").
--
-- Otherwise the view is that of 023. Running this again changes nothing.
ALTER TABLE search_facets_hourly_mv MODIFY QUERY
SELECT user_id, hour, f.1 AS facet, f.2 AS key, f.3 AS value, sum(n) AS events, max(last) AS last_received
FROM
(
    SELECT user_id, toStartOfHour(ts) AS hour, type, outcome, model, tool_executed, agent_id, cost_status,
           arrayDistinct(arrayFilter(kv -> substringIndex(kv.1, '.', 1) NOT IN
             ('traceId', 'sessionId', 'spanId', 'parentSpanId', 'dedupKey', 'privacyLevel', 'tokensBreakdown')
             AND NOT match(kv.1, '^otel\\.attributes\\.(gen_ai\\.response\\.id|gen_ai\\.tool\\.call\\.id|gen_ai\\.conversation\\.id|gen_ai\\.usage|llm\\.usage|session\\.id|ai\\.response\\.id|ai\\.response\\.timestamp|ai\\.response\\.msToFirstChunk|ai\\.response\\.msToFinish|ai\\.response\\.avgCompletionTokensPerSecond|ai\\.response\\.avgOutputTokensPerSecond|ai\\.toolCall\\.id|ai\\.usage|gen_ai\\.input\\.messages|gen_ai\\.output\\.messages|gen_ai\\.system_instructions|gen_ai\\.tool\\.call\\.arguments|gen_ai\\.tool\\.call\\.result|gen_ai\\.prompt|gen_ai\\.completion|llm\\.prompts|llm\\.completions|traceloop\\.entity\\.input|traceloop\\.entity\\.output|ai\\.prompt|ai\\.response\\.text|ai\\.response\\.object|ai\\.response\\.toolCalls|ai\\.response\\.reasoning|ai\\.toolCall\\.args|ai\\.toolCall\\.result)(\\.|$)'),
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

-- The rows the view counted before at these paths (the reads leave them out too).
ALTER TABLE search_facets_hourly DELETE WHERE facet IN ('meta', 'metadup') AND match(key, '^otel\\.attributes\\.(gen_ai\\.response\\.id|gen_ai\\.tool\\.call\\.id|gen_ai\\.conversation\\.id|gen_ai\\.usage|llm\\.usage|session\\.id|ai\\.response\\.id|ai\\.response\\.timestamp|ai\\.response\\.msToFirstChunk|ai\\.response\\.msToFinish|ai\\.response\\.avgCompletionTokensPerSecond|ai\\.response\\.avgOutputTokensPerSecond|ai\\.toolCall\\.id|ai\\.usage|gen_ai\\.input\\.messages|gen_ai\\.output\\.messages|gen_ai\\.system_instructions|gen_ai\\.tool\\.call\\.arguments|gen_ai\\.tool\\.call\\.result|gen_ai\\.prompt|gen_ai\\.completion|llm\\.prompts|llm\\.completions|traceloop\\.entity\\.input|traceloop\\.entity\\.output|ai\\.prompt|ai\\.response\\.text|ai\\.response\\.object|ai\\.response\\.toolCalls|ai\\.response\\.reasoning|ai\\.toolCall\\.args|ai\\.toolCall\\.result)(\\.|$)') SETTINGS mutations_sync = 2;
