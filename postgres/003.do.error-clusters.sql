-- Resolution state of error clusters; the clusters themselves are aggregates over ClickHouse events.
CREATE TABLE error_clusters (
  user_id      text NOT NULL REFERENCES users (id),
  fingerprint  text NOT NULL,
  resolved_at  timestamptz,
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, fingerprint)
);
COMMENT ON COLUMN error_clusters.resolved_at IS 'set by resolve, cleared by re-open; an event later than it re-opens the cluster when read';
