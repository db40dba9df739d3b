-- The channels' credentials have been sealed at rest (AES-256-GCM under SECRETS_KEY, src/domain/secret-box.ts)
-- since the service began sealing them at start; the comments of 007 still said "in clear".
COMMENT ON COLUMN notification_channels.url IS 'destination of webhook and slack channels, sealed at rest (enc:v1:…, SECRETS_KEY); pagerduty channels post to PAGERDUTY_EVENTS_URL';
COMMENT ON COLUMN notification_channels.routing_key IS 'PagerDuty Events API v2 integration key (pagerduty channels only), sealed at rest (enc:v1:…, SECRETS_KEY)';
COMMENT ON COLUMN notification_channels.signing_secret IS 'whsec_… key of the Standard Webhooks signature (webhook channels only), sealed at rest (enc:v1:…, SECRETS_KEY): signing needs it back, so it is encrypted, not hashed';
