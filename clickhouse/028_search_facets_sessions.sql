-- The hourly facet counts also leave out the conversation id of a span whose instrumentation names it
-- otherwise than `gen_ai.conversation.id` or `session.id`: Langfuse's `langfuse.session.id`, the
-- Vercel AI SDK's `ai.telemetry.metadata.sessionId` and OpenLLMetry's
-- `traceloop.association.properties.session_id`. Each is the span's sessionId (kept in a field of its
-- own) and put a row per conversation into an hour's counts, as 025 found of the others. So do the
-- token counts of OpenInference (`llm.token_count.*`) and Langfuse
-- (`langfuse.observation.usage_details`), which 025 left out under their GenAI names only, and
-- Langfuse's cost and time to first token of a span (`langfuse.observation.cost_details`,
-- `.completion_start_time`), as 025 left out the Vercel AI SDK's timings. The pattern
-- is FACET_HIDDEN_OTEL of src/storage/search-repository.ts, as it is now.
--
-- Otherwise the view is that of 025. Running this again changes nothing.
ALTER TABLE search_facets_hourly_mv MODIFY QUERY
SELECT user_id, hour, f.1 AS facet, f.2 AS key, f.3 AS value, sum(n) AS events, max(last) AS last_received
FROM
(
    SELECT user_id, toStartOfHour(ts) AS hour, type, outcome, model, tool_executed, agent_id, cost_status,
           arrayDistinct(arrayFilter(kv -> substringIndex(kv.1, '.', 1) NOT IN
             ('traceId', 'sessionId', 'spanId', 'parentSpanId', 'dedupKey', 'privacyLevel', 'tokensBreakdown')
             AND NOT match(kv.1, '^otel\\.attributes\\.(gen_ai\\.response\\.id|gen_ai\\.tool\\.call\\.id|gen_ai\\.conversation\\.id|gen_ai\\.usage|llm\\.usage|session\\.id|langfuse\\.session\\.id|ai\\.telemetry\\.metadata\\.sessionId|traceloop\\.association\\.properties\\.session_id|llm\\.token_count|langfuse\\.observation\\.usage_details|langfuse\\.observation\\.cost_details|langfuse\\.observation\\.completion_start_time|ai\\.response\\.id|ai\\.response\\.timestamp|ai\\.response\\.msToFirstChunk|ai\\.response\\.msToFinish|ai\\.response\\.avgCompletionTokensPerSecond|ai\\.response\\.avgOutputTokensPerSecond|ai\\.toolCall\\.id|ai\\.usage|gen_ai\\.input\\.messages|gen_ai\\.output\\.messages|gen_ai\\.system_instructions|gen_ai\\.tool\\.call\\.arguments|gen_ai\\.tool\\.call\\.result|gen_ai\\.prompt|gen_ai\\.completion|llm\\.prompts|llm\\.completions|traceloop\\.entity\\.input|traceloop\\.entity\\.output|ai\\.prompt|ai\\.response\\.text|ai\\.response\\.object|ai\\.response\\.toolCalls|ai\\.response\\.reasoning|ai\\.toolCall\\.args|ai\\.toolCall\\.result)(\\.|$)'),
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

-- The rows the view counted before at the paths added (the reads leave them out too).
ALTER TABLE search_facets_hourly DELETE WHERE facet IN ('meta', 'metadup') AND match(key, '^otel\\.attributes\\.(gen_ai\\.response\\.id|gen_ai\\.tool\\.call\\.id|gen_ai\\.conversation\\.id|gen_ai\\.usage|llm\\.usage|session\\.id|langfuse\\.session\\.id|ai\\.telemetry\\.metadata\\.sessionId|traceloop\\.association\\.properties\\.session_id|llm\\.token_count|langfuse\\.observation\\.usage_details|langfuse\\.observation\\.cost_details|langfuse\\.observation\\.completion_start_time|ai\\.response\\.id|ai\\.response\\.timestamp|ai\\.response\\.msToFirstChunk|ai\\.response\\.msToFinish|ai\\.response\\.avgCompletionTokensPerSecond|ai\\.response\\.avgOutputTokensPerSecond|ai\\.toolCall\\.id|ai\\.usage|gen_ai\\.input\\.messages|gen_ai\\.output\\.messages|gen_ai\\.system_instructions|gen_ai\\.tool\\.call\\.arguments|gen_ai\\.tool\\.call\\.result|gen_ai\\.prompt|gen_ai\\.completion|llm\\.prompts|llm\\.completions|traceloop\\.entity\\.input|traceloop\\.entity\\.output|ai\\.prompt|ai\\.response\\.text|ai\\.response\\.object|ai\\.response\\.toolCalls|ai\\.response\\.reasoning|ai\\.toolCall\\.args|ai\\.toolCall\\.result)(\\.|$)') SETTINGS mutations_sync = 2;
