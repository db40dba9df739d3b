-- The errors list reads the first, partial day of its window from error_clusters_hourly: a few hours
-- of one user. The table is sorted by fingerprint before hour, so those hours came from every granule
-- of the user's rows in the month (52,000 rows read at 10 million events, 16,000 at 1 million). The
-- projection `errors_by_hour` holds the same rows sorted by (user_id, hour): the engine picks it for
-- a read by hours by itself, and a read of one cluster (by fingerprint) keeps the table's own order.
-- It is written, deduplicated and expired with each part of the table.
--
-- The engine refuses a projection on an aggregating table unless told what to do with it when parts
-- merge (rows of a merged part are aggregated): 'rebuild' builds it again from the merged part. The
-- setting needs ClickHouse 24.8 or later (docs/cluster.md). Both ALTERs wait for every replica.
ALTER TABLE error_clusters_hourly MODIFY SETTING deduplicate_merge_projection_mode = 'rebuild' SETTINGS alter_sync = 2;

ALTER TABLE error_clusters_hourly ADD PROJECTION IF NOT EXISTS errors_by_hour
(
    SELECT * ORDER BY user_id, hour
) SETTINGS alter_sync = 2;

-- Built for the parts stored before (a mutation; waits until done). Running it again rebuilds it.
ALTER TABLE error_clusters_hourly MATERIALIZE PROJECTION errors_by_hour SETTINGS mutations_sync = 2;
