-- Spend per agent name and day (UTC) over today and the {days} - 1 days before it, as the dashboard's
-- `days` counts, for the user whose handle is {handle} (handles are unique whatever their case).
-- Deleted agents are left out, as the dashboard hides them and their events.
SELECT
    s.day,
    n.display_name AS agent,
    sum(s.cost_usd) AS usd,
    sum(s.events) AS events,
    sum(s.tokens_input_base + s.tokens_cache_creation + s.tokens_cache_read + s.tokens_output) AS tokens
FROM spend_daily AS s
INNER JOIN (SELECT user_id FROM user_handles FINAL WHERE lower(handle) = lower({handle:String})) AS u ON u.user_id = s.user_id
LEFT JOIN (SELECT agent_id, display_name FROM agent_names FINAL) AS n ON n.agent_id = s.agent_id
WHERE s.day > today() - {days:UInt16}
  AND s.agent_id NOT IN (SELECT agent_id FROM agent_names FINAL WHERE deleted)
GROUP BY s.day, agent
ORDER BY s.day, usd DESC, agent
