-- Error clusters (events grouped by fingerprint) per tool over the last 7 days, with the agents'
-- names, the latest message and the owner's handle; most frequent first.
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
WHERE e.error_fingerprint != '' AND e.received_at >= now() - INTERVAL 7 DAY
GROUP BY tool, fingerprint
ORDER BY errors DESC, tool
LIMIT 100
