-- 95th percentile of durationMs per model and agent over the last 7 days by event time (`ts`; events
-- with a duration), for the user whose handle is {handle}. Agents are grouped by id, not by name:
-- a name is unique only among one user's agents. Deleted agents are left out, as the dashboard hides
-- them and their events.
SELECT
    e.model,
    any(n.display_name) AS agent,
    e.agent_id AS agent_id,
    quantile(0.95)(e.duration_ms) AS p95_ms,
    count() AS events
FROM events AS e
INNER JOIN (SELECT user_id FROM user_handles FINAL WHERE lower(handle) = lower({handle:String})) AS u ON u.user_id = e.user_id
LEFT JOIN (SELECT agent_id, display_name FROM agent_names FINAL) AS n ON n.agent_id = e.agent_id
WHERE e.duration_ms IS NOT NULL AND e.ts >= now() - INTERVAL 7 DAY
  AND e.agent_id NOT IN (SELECT agent_id FROM agent_names FINAL WHERE deleted)
GROUP BY e.model, e.agent_id
ORDER BY p95_ms DESC, e.model, agent
