-- How scores of a name must look, per user (/v1/me/score-configs/:name): scores ingested after a
-- config is set that do not fit it are refused. Scores already stored are kept as they are.
CREATE TABLE score_configs (
  user_id      text NOT NULL REFERENCES users (id),
  name         text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
  data_type    text NOT NULL CHECK (data_type IN ('numeric', 'categorical', 'boolean')),
  min_value    double precision,
  max_value    double precision,
  labels       text[],
  description  text,
  alert        jsonb,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, name),
  CHECK (data_type = 'numeric' OR (min_value IS NULL AND max_value IS NULL)),
  CHECK ((data_type = 'categorical') = (labels IS NOT NULL)),
  CHECK (alert IS NULL OR data_type <> 'categorical')
);
COMMENT ON COLUMN score_configs.min_value IS 'numeric: the lowest value allowed (inclusive); null: no bound';
COMMENT ON COLUMN score_configs.max_value IS 'numeric: the highest value allowed (inclusive); null: no bound';
COMMENT ON COLUMN score_configs.labels IS 'categorical: the labels allowed';
COMMENT ON COLUMN score_configs.alert IS 'the score.dropped rule of the name: { windowMinutes, baselineDays, minScores, below?, dropShare? }; null: no alert';
