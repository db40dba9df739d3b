-- Error clusters (events grouped by fingerprint) per tool over the last 7 days by event time (`ts`,
-- as the dashboard's error clusters count; `received_at` is when the service got the event), with
-- the agents' names, the latest message and the owner's handle; most frequent first. Deleted agents
-- are left out, as the dashboard hides them and their events.
SELECT
    e.tool_executed AS tool,
    e.error_fingerprint AS fingerprint,
    count() AS errors,
    groupUniqArray(n.display_name) AS agents,
    argMax(e.error_message, e.ts) AS latest_message,
    max(e.ts) AS last_seen,
    any(h.handle) AS owner
FROM events AS e
LEFT JOIN (SELECT agent_id, display_name FROM agent_names FINAL) AS n ON n.agent_id = e.agent_id
LEFT JOIN (SELECT user_id, handle FROM user_handles FINAL) AS h ON h.user_id = e.user_id
WHERE e.error_fingerprint != '' AND e.ts >= now() - INTERVAL 7 DAY
  AND e.agent_id NOT IN (SELECT agent_id FROM agent_names FINAL WHERE deleted)
GROUP BY tool, fingerprint
ORDER BY errors DESC, tool
LIMIT 100
