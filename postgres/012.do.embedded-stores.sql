-- The embedded ClickHouse stores that use this database: one per instance without CLICKHOUSE_URL.
-- Two live at once split the events between them (each instance ships to its own DATA_DIR), so an
-- instance that starts beside another says so (docs/scaling.md).
CREATE TABLE embedded_stores (
  store_id  text PRIMARY KEY,
  host      text NOT NULL,
  data_dir  text NOT NULL,
  pid       integer NOT NULL,
  last_seen timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE embedded_stores IS 'embedded ClickHouse stores (DATA_DIR) of running instances, with a heartbeat';
COMMENT ON COLUMN embedded_stores.store_id IS 'the id kept in DATA_DIR/store-id';
COMMENT ON COLUMN embedded_stores.last_seen IS 'the instance''s last heartbeat (every 20 s while it runs)';
