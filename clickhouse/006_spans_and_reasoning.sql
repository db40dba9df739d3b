-- OpenTelemetry spans are stored as events (POST /v1/traces); these columns keep what makes a trace a
-- tree and what the price catalogue needs. Events from POST /v1/events fill them from metadata
-- (metadata.spanId, metadata.parentSpanId, metadata.provider, tokensBreakdown.reasoning) or leave them empty.
ALTER TABLE events ADD COLUMN IF NOT EXISTS span_id String DEFAULT '' COMMENT 'OTLP span id (16 hex chars) or metadata.spanId; empty when not sent' AFTER trace_id;
ALTER TABLE events ADD COLUMN IF NOT EXISTS parent_span_id String DEFAULT '' COMMENT 'span id of the parent span in the same trace (OTLP parentSpanId or metadata.parentSpanId); empty for a root or a flat event' AFTER span_id;
ALTER TABLE events ADD COLUMN IF NOT EXISTS provider LowCardinality(String) DEFAULT '' COMMENT 'model provider as sent (gen_ai.provider.name, else gen_ai.system, or metadata.provider); empty when not sent' AFTER model;
ALTER TABLE events ADD COLUMN IF NOT EXISTS tokens_reasoning UInt64 DEFAULT 0 COMMENT 'reasoning tokens, a part of tokens_output (gen_ai.usage.reasoning.output_tokens or tokensBreakdown.reasoning)' AFTER tokens_output;
ALTER TABLE events ADD COLUMN IF NOT EXISTS source LowCardinality(String) DEFAULT 'events' COMMENT 'how the event arrived: events (POST /v1/events and /batch, the test event) or otlp (POST /v1/traces)' AFTER content_hash;
ALTER TABLE events COMMENT COLUMN cost_usd 'USD cost from the @pydantic/genai-prices catalogue bundled with the running release, fixed at ingestion, rounded once to nano-dollars';
ALTER TABLE events COMMENT COLUMN cost_status 'priced | unknown_model (the catalogue does not know the model: cost 0) | no_model (cost 0)';
