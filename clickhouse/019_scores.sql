-- Scores: what a judge, a person, an evaluator or code said of a trace, a span, a session or an event
-- (docs/api.md#scores). One row per write; a score sent again with the same score id is a new write
-- with a higher version, and the highest version is the score: ReplacingMergeTree keeps it when parts
-- merge, and reads use FINAL so that a score is never counted twice before they do. Not partitioned
-- by time: the writes of one score must meet in one partition for FINAL and merges to replace them.
CREATE TABLE IF NOT EXISTS scores
(
    row_id       String                  COMMENT 'scr_ + ULID: this write of the score',
    user_id      String                  COMMENT 'owner (Postgres users.id)',
    score_id     String                  COMMENT 'the score''s id: the scoreId sent, else row_id',
    version      UInt64                  COMMENT 'receive time in unix ms x 1000 + a sequence: the highest write of a score_id wins',
    agent_id     String                  COMMENT 'the agent scored (Postgres agents.id), empty when the score named none',
    trace_id     String                  COMMENT 'the trace scored, empty when not a trace',
    span_id      String                  COMMENT 'the span of trace_id scored, empty for the whole trace',
    session_id   String                  COMMENT 'the session scored, empty when not a session',
    event_id     String                  COMMENT 'the event scored, empty when not an event',
    name         LowCardinality(String)  COMMENT 'what is scored (helpfulness, thumbs, ...)',
    data_type    LowCardinality(String)  COMMENT 'numeric | categorical | boolean',
    value        Nullable(Float64)       COMMENT 'numeric: the value; boolean: 1 or 0; categorical: null',
    label        String                  COMMENT 'categorical: the label; boolean: true or false; numeric: empty',
    comment      String COMMENT 'why, as sent' CODEC(ZSTD(3)),
    source       LowCardinality(String)  COMMENT 'api | human | llm | code',
    author_id    String                  COMMENT 'the user who scored from the dashboard, empty otherwise',
    metadata     String COMMENT 'metadata object as JSON text, empty when not sent' CODEC(ZSTD(3)),
    received_at  DateTime64(3, 'UTC')    COMMENT 'when the service accepted this write',
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (user_id, score_id)
SETTINGS non_replicated_deduplication_window = 1000
COMMENT 'Scores, one row per write; read with FINAL (or argMax by version) for one row per score_id';
