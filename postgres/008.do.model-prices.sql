-- Prices users set for models, in USD per million tokens: they price that user's events ingested
-- after they are set, in place of the price catalogue. Events already stored keep their cost.
CREATE TABLE model_prices (
  user_id               text NOT NULL REFERENCES users (id),
  model                 text NOT NULL CHECK (char_length(model) BETWEEN 1 AND 200),
  input_per_mtok        numeric(11, 6) NOT NULL CHECK (input_per_mtok >= 0),
  output_per_mtok       numeric(11, 6) NOT NULL CHECK (output_per_mtok >= 0),
  cache_read_per_mtok   numeric(11, 6) CHECK (cache_read_per_mtok >= 0),
  cache_write_per_mtok  numeric(11, 6) CHECK (cache_write_per_mtok >= 0),
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, model)
);
COMMENT ON COLUMN model_prices.model IS 'the model name exactly as events send it (case and provider prefix included)';
COMMENT ON COLUMN model_prices.input_per_mtok IS 'USD per million uncached input tokens';
COMMENT ON COLUMN model_prices.output_per_mtok IS 'USD per million output tokens, reasoning included';
COMMENT ON COLUMN model_prices.cache_read_per_mtok IS 'USD per million cache-read tokens; null: billed as input';
COMMENT ON COLUMN model_prices.cache_write_per_mtok IS 'USD per million cache-write tokens; null: billed as input';
