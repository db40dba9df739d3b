-- A webhook channel's signing secret can be rotated: the one it replaces keeps signing beside it (two
-- signatures in `webhook-signature`, as Standard Webhooks allows) until `previous_secret_until`, so
-- receivers can move to the new secret without a gap.
ALTER TABLE notification_channels ADD COLUMN IF NOT EXISTS previous_signing_secret text;
ALTER TABLE notification_channels ADD COLUMN IF NOT EXISTS previous_secret_until timestamptz;
COMMENT ON COLUMN notification_channels.previous_signing_secret IS 'the whsec_… key a rotation replaced, still signing beside the new one until previous_secret_until; sealed at rest (enc:v1:…, SECRETS_KEY)';
COMMENT ON COLUMN notification_channels.previous_secret_until IS 'when the replaced signing secret stops signing; null: no rotation under way';
