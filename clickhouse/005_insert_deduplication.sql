-- Inserts come from each instance's ingest log with an insert_deduplication_token made of the log's
-- id and the block's range of positions. After a crash the same block is re-sent with the same
-- token; ClickHouse drops it if it had landed. Single-node MergeTree tables only remember block
-- tokens when this window is set, and every table an insert reaches needs it (the views' targets
-- too), or a replay would be dropped from events but counted again in the rollups.
-- Replicated tables deduplicate by themselves (replicated_deduplication_window).
ALTER TABLE events MODIFY SETTING non_replicated_deduplication_window = 1000;
ALTER TABLE spend_daily MODIFY SETTING non_replicated_deduplication_window = 1000;
ALTER TABLE error_clusters_hourly MODIFY SETTING non_replicated_deduplication_window = 1000;
