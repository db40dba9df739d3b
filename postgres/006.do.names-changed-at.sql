-- When an agent's or user's names last changed, so the service can copy names to ClickHouse for
-- analysts (agent_names, user_handles there) by reading only what changed since its last copy.
-- Kept by triggers, so no write path has to remember it.
ALTER TABLE agents ADD COLUMN names_changed_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE users ADD COLUMN names_changed_at timestamptz NOT NULL DEFAULT now();
COMMENT ON COLUMN agents.names_changed_at IS 'last change of display_name, sns_name, owner_id or deleted_at (copied to ClickHouse agent_names)';
COMMENT ON COLUMN users.names_changed_at IS 'last change of handle (copied to ClickHouse user_handles)';
CREATE INDEX agents_names_changed_at ON agents (names_changed_at);
CREATE INDEX users_names_changed_at ON users (names_changed_at);

CREATE FUNCTION touch_names_changed_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.names_changed_at := clock_timestamp();
  RETURN NEW;
END $$;

CREATE TRIGGER agents_names_changed BEFORE UPDATE OF display_name, sns_name, owner_id, deleted_at ON agents
  FOR EACH ROW WHEN (OLD.display_name IS DISTINCT FROM NEW.display_name OR OLD.sns_name IS DISTINCT FROM NEW.sns_name
    OR OLD.owner_id IS DISTINCT FROM NEW.owner_id OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at)
  EXECUTE FUNCTION touch_names_changed_at();
CREATE TRIGGER users_names_changed BEFORE UPDATE OF handle ON users
  FOR EACH ROW WHEN (OLD.handle IS DISTINCT FROM NEW.handle)
  EXECUTE FUNCTION touch_names_changed_at();
