-- Names for analysts, so events can be read by agent and user name without Postgres. The service
-- copies them from Postgres (a job every NAMES_SYNC_EVERY_MS); a row is replaced by a newer version
-- of the same agent or user, so read with FINAL (or argMax by changed_at).
CREATE TABLE IF NOT EXISTS agent_names
(
    agent_id      String                  COMMENT 'agent cuid (events.agent_id)',
    user_id       String                  COMMENT 'owner (events.user_id); empty for registry agents without an owner',
    display_name  String                  COMMENT 'the agent''s display name',
    sns_name      String                  COMMENT 'name-service domain, empty when none',
    deleted       Bool                    COMMENT 'true once the agent is soft-deleted',
    changed_at    DateTime64(6, 'UTC')    COMMENT 'when these names were set in Postgres (the row''s version)'
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY agent_id
COMMENT 'Agent names copied from Postgres; read with FINAL: SELECT * FROM agent_names FINAL';

CREATE TABLE IF NOT EXISTS user_handles
(
    user_id     String                  COMMENT 'user id (events.user_id)',
    handle      String                  COMMENT 'the user''s handle, empty when not set',
    changed_at  DateTime64(6, 'UTC')    COMMENT 'when the handle was set in Postgres (the row''s version)'
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY user_id
COMMENT 'User handles copied from Postgres; read with FINAL: SELECT * FROM user_handles FINAL';
