-- Alerts raised by anomaly evaluation. One open (not cleared) alert per agent and rule: a continuing
-- anomaly updates it instead of adding rows.
CREATE TABLE alerts (
  id                 text PRIMARY KEY,
  user_id            text NOT NULL REFERENCES users (id),
  agent_id           text NOT NULL REFERENCES agents (id),
  rule               text NOT NULL,
  severity           text NOT NULL CHECK (severity IN ('warning', 'critical')),
  message            text NOT NULL,
  figures            jsonb NOT NULL DEFAULT '{}',
  status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'acknowledged', 'snoozed')),
  snoozed_until      timestamptz,
  trigger_count      integer NOT NULL DEFAULT 1,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  last_triggered_at  timestamptz NOT NULL DEFAULT now(),
  acknowledged_at    timestamptz,
  cleared_at         timestamptz
);
COMMENT ON COLUMN alerts.rule IS 'error_rate | spend_spike | latency_spike | silence | regression:<fingerprint>';
COMMENT ON COLUMN alerts.cleared_at IS 'set when an acknowledged alert''s anomaly is over; a new anomaly then opens a new alert';
CREATE UNIQUE INDEX alerts_one_open_per_agent_rule ON alerts (agent_id, rule) WHERE cleared_at IS NULL;
CREATE INDEX alerts_user_recent ON alerts (user_id, created_at DESC);

-- Per-user overrides of the anomaly thresholds (rule -> { field: value }); defaults live in code.
CREATE TABLE alert_settings (
  user_id     text PRIMARY KEY REFERENCES users (id),
  thresholds  jsonb NOT NULL DEFAULT '{}',
  updated_at  timestamptz NOT NULL DEFAULT now()
);
