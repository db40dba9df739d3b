-- A skip index for the metadata filters (meta.<path>=<value>, docs/api.md#search): a bloom filter of
-- the values of metadata_flat (clickhouse/018), per granule. A filter also asks that the value be
-- among the event's metadata values (hasAny(mapValues(metadata_flat), …)), which this index answers,
-- so a read skips the granules that hold none of the values asked for; the exact condition on the
-- path still decides each event. A value most events hold (env=prod) skips nothing and costs the
-- read one bloom filter check per granule.
ALTER TABLE events ADD INDEX IF NOT EXISTS idx_metadata_values mapValues(metadata_flat) TYPE bloom_filter(0.01) GRANULARITY 1;

-- Built for the parts stored before (a mutation that waits until done; running it again is harmless).
ALTER TABLE events MATERIALIZE INDEX idx_metadata_values SETTINGS mutations_sync = 2;
