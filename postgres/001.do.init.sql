-- Users of the dashboard, created on first sight of an identity-provider subject.
CREATE TABLE users (
  id                text PRIMARY KEY,
  privy_id          text NOT NULL UNIQUE,
  email             text,
  wallet            text,
  handle            text,
  tier              text NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pro', 'enterprise')),
  burst_per_minute  integer CHECK (burst_per_minute > 0),
  created_at        timestamptz NOT NULL DEFAULT now()
);
COMMENT ON COLUMN users.privy_id IS 'the identity provider''s subject (JWT sub)';
COMMENT ON COLUMN users.burst_per_minute IS 'overrides the tier''s ingestion burst limit when set';
CREATE UNIQUE INDEX users_handle_unique ON users (lower(handle)) WHERE handle IS NOT NULL;

-- Agents: created by ingestion (owned by the key's user) or imported from the public registry.
CREATE TABLE agents (
  id                text PRIMARY KEY,
  owner_id          text REFERENCES users (id),
  sns_name          text,
  display_name      text NOT NULL,
  registry_id       text,
  reputation_score  double precision,
  source            text NOT NULL DEFAULT 'ingest',
  metadata          jsonb NOT NULL DEFAULT '{}',
  enriched          jsonb NOT NULL DEFAULT '{}',
  is_public         boolean NOT NULL DEFAULT false,
  owner_wallet      text,
  framework         text,
  last_seen_at      timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  deleted_at        timestamptz
);
-- A name resolves to one agent per owner, deleted ones included, so a deleted name keeps answering 410.
CREATE UNIQUE INDEX agents_owner_display_name ON agents (owner_id, display_name);
CREATE UNIQUE INDEX agents_sns_name ON agents (sns_name) WHERE sns_name IS NOT NULL;
CREATE UNIQUE INDEX agents_registry_id ON agents (registry_id) WHERE registry_id IS NOT NULL;

-- API keys: only the SHA-256 of the secret is kept.
CREATE TABLE api_keys (
  id            text PRIMARY KEY,
  user_id       text NOT NULL REFERENCES users (id),
  agent_id      text REFERENCES agents (id),
  label         text NOT NULL,
  key_prefix    text NOT NULL,
  secret_sha256 text NOT NULL UNIQUE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);
CREATE INDEX api_keys_user ON api_keys (user_id, created_at DESC);
