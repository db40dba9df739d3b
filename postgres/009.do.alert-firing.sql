-- Whether an open alert's condition held at the last evaluation, and when it last did. A trigger is
-- a change into firing: `trigger_count` and `last_triggered_at` move only when an evaluation finds
-- the condition true after one found it false (or when the alert opens); `last_seen_firing_at`
-- moves at every evaluation that finds it true.
ALTER TABLE alerts ADD COLUMN firing boolean NOT NULL DEFAULT true;
ALTER TABLE alerts ADD COLUMN last_seen_firing_at timestamptz;
-- Rows written before this counted every evaluation as a trigger: `last_triggered_at` was in fact the
-- last evaluation that saw the condition, and how many times it changed into firing is not known.
-- Keep the last sighting, and count the opening as the one known trigger.
UPDATE alerts SET last_seen_firing_at = last_triggered_at, last_triggered_at = created_at, trigger_count = 1;
ALTER TABLE alerts ALTER COLUMN last_seen_firing_at SET NOT NULL, ALTER COLUMN last_seen_firing_at SET DEFAULT now();
COMMENT ON COLUMN alerts.trigger_count IS 'changes into firing: the opening, then each time the condition holds again after an evaluation found it quiet';
COMMENT ON COLUMN alerts.last_triggered_at IS 'the last change into firing';
COMMENT ON COLUMN alerts.last_seen_firing_at IS 'the last evaluation that found the condition true';
COMMENT ON COLUMN alerts.firing IS 'whether the last evaluation of this open alert found the condition true';
