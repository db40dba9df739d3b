-- The comment of scores.score_id said the id sent is stored as sent; a publishable key's ids are
-- stored under `pk:<key id>:`, and a bound key's under `ag:<agent id>:`. A comment only: no data
-- changes, and running this again changes nothing.
ALTER TABLE scores COMMENT COLUMN score_id 'the score''s id: the scoreId sent (from a publishable key pk:<key id>:<scoreId>, from a key bound to an agent ag:<agent id>:<scoreId>), else row_id';
