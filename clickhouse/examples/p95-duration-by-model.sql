-- 95th percentile of durationMs per model and agent name over the last 7 days by event time (`ts`;
-- events with a duration). Deleted agents are left out, as the dashboard hides them and their events.
SELECT
    e.model,
    n.display_name AS agent,
    quantile(0.95)(e.duration_ms) AS p95_ms,
    count() AS events
FROM events AS e
LEFT JOIN (SELECT agent_id, display_name FROM agent_names FINAL) AS n ON n.agent_id = e.agent_id
WHERE e.duration_ms IS NOT NULL AND e.ts >= now() - INTERVAL 7 DAY
  AND e.agent_id NOT IN (SELECT agent_id FROM agent_names FINAL WHERE deleted)
GROUP BY e.model, agent
ORDER BY p95_ms DESC, e.model, agent
