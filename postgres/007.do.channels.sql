-- Notification channels: where a user's alerts and error clusters are delivered (a webhook, Slack, or
-- PagerDuty), and the log of every delivery to them.
CREATE TABLE notification_channels (
  id               text PRIMARY KEY,
  user_id          text NOT NULL REFERENCES users (id),
  kind             text NOT NULL CHECK (kind IN ('webhook', 'slack', 'pagerduty')),
  label            text NOT NULL DEFAULT '',
  url              text,
  routing_key      text,
  signing_secret   text,
  events           text[] NOT NULL,
  enabled          boolean NOT NULL DEFAULT true,
  disabled_reason  text,
  disabled_at      timestamptz,
  last_success_at  timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'pagerduty') = (routing_key IS NOT NULL AND url IS NULL))
);
COMMENT ON COLUMN notification_channels.url IS 'destination of webhook and slack channels; pagerduty channels post to PAGERDUTY_EVENTS_URL';
COMMENT ON COLUMN notification_channels.routing_key IS 'PagerDuty Events API v2 integration key (pagerduty channels only)';
COMMENT ON COLUMN notification_channels.signing_secret IS 'whsec_… key of the Standard Webhooks signature (webhook channels only); kept in clear, as signing needs it';
COMMENT ON COLUMN notification_channels.events IS 'event types delivered: alert.triggered, alert.resolved, error_cluster.created, error_cluster.reopened';
COMMENT ON COLUMN notification_channels.disabled_reason IS 'why the service turned the channel off (a run of failed deliveries); cleared when it is enabled again';
CREATE INDEX notification_channels_user ON notification_channels (user_id, created_at DESC);

-- One row per event and channel: the unique key is what makes a state change delivered at most once.
CREATE TABLE notification_deliveries (
  id                text PRIMARY KEY,
  channel_id        text NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
  event             text NOT NULL,
  event_key         text NOT NULL,
  payload           jsonb NOT NULL,
  status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'retrying', 'delivered', 'failed', 'skipped')),
  attempts          integer NOT NULL DEFAULT 0,
  max_attempts      integer NOT NULL,
  last_status_code  integer,
  last_error        text,
  last_response     text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  first_attempt_at  timestamptz,
  last_attempt_at   timestamptz,
  next_attempt_at   timestamptz,
  finished_at       timestamptz,
  UNIQUE (channel_id, event_key)
);
COMMENT ON COLUMN notification_deliveries.id IS 'msg_<ULID>: the webhook-id header, the same on every attempt';
COMMENT ON COLUMN notification_deliveries.event_key IS 'the state change delivered, e.g. alert.triggered:<alert id>';
COMMENT ON COLUMN notification_deliveries.payload IS 'the event as sent to webhooks ({ type, timestamp, data }); Slack and PagerDuty bodies are rendered from it';
COMMENT ON COLUMN notification_deliveries.last_response IS 'the first 1 KB of the last answer''s body';
CREATE INDEX notification_deliveries_channel_recent ON notification_deliveries (channel_id, created_at DESC, id DESC);
CREATE INDEX notification_deliveries_unfinished ON notification_deliveries (created_at) WHERE status IN ('pending', 'retrying');

-- Clusters live in ClickHouse; a row here now also records that a new cluster was announced.
ALTER TABLE error_clusters ADD COLUMN announced_at timestamptz;
COMMENT ON COLUMN error_clusters.announced_at IS 'when error_cluster.created was published for the cluster; null for rows made by resolving';
