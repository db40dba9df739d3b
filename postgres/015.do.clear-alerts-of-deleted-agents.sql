-- Deleting an agent now clears its open alerts (and tells the channels). Alerts of agents deleted
-- before that stayed open, an acknowledged one for good (the evaluation reads live agents only): they
-- are cleared here, without notifications. Running this again changes nothing.
UPDATE alerts SET cleared_at = now(), firing = false, updated_at = now()
WHERE cleared_at IS NULL AND agent_id IN (SELECT id FROM agents WHERE deleted_at IS NOT NULL);
