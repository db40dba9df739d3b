-- Publishable keys: an API key a web page may hold in the open (end users' feedback from the
-- browser). It can only send scores with source 'human', from the origins listed, rate-limited per
-- key and client address; never events, never reads (docs/api.md#publishable-keys).
ALTER TABLE api_keys
  ADD COLUMN kind text NOT NULL DEFAULT 'secret' CHECK (kind IN ('secret', 'publishable')),
  ADD COLUMN allowed_origins text[],
  ADD CONSTRAINT api_keys_publishable_origins CHECK ((kind = 'publishable') = (allowed_origins IS NOT NULL));
COMMENT ON COLUMN api_keys.kind IS 'secret (sends anything) | publishable (only human scores, from allowed_origins)';
COMMENT ON COLUMN api_keys.allowed_origins IS 'publishable keys: the browser origins (scheme://host[:port]) allowed to use the key';
