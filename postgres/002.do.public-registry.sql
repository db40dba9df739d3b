-- Trigram search over the public registry: name, sns name and description, case-insensitively.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE OR REPLACE FUNCTION agent_search_text(display_name text, sns_name text, enriched jsonb)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT lower(coalesce(display_name, '') || ' ' || coalesce(sns_name, '') || ' ' ||
               coalesce(enriched ->> 'name', '') || ' ' || coalesce(enriched ->> 'description', '')) $$;

CREATE INDEX agents_public_search ON agents USING gin (agent_search_text(display_name, sns_name, enriched) gin_trgm_ops)
  WHERE is_public AND deleted_at IS NULL;
CREATE INDEX agents_public_rank ON agents (reputation_score DESC NULLS LAST, id)
  WHERE is_public AND deleted_at IS NULL;

-- Waitlist sign-ups: one row per address, however often it is sent.
CREATE TABLE waitlist (
  id          bigserial PRIMARY KEY,
  email       text NOT NULL,
  source      text,
  metadata    jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX waitlist_email ON waitlist (lower(email));
