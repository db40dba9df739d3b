-- group_totals is read by ids: a page's 50 sessions or traces, spread over the table, each in a
-- granule of its own. With the default compressed blocks (64 KiB to 1 MiB) every such granule read
-- decompressed a whole block of each column for its 256 rows: at 10 million events a page's totals
-- took 19-21 ms to read, 13 ms with blocks of 4-16 KiB (and 36 % more disk: 86 → 117 MiB). Parts
-- written from now on, by inserts and merges, get the smaller blocks; parts written before keep
-- theirs until a merge rewrites them (`OPTIMIZE TABLE group_totals FINAL` rewrites them at once).
ALTER TABLE group_totals MODIFY SETTING min_compress_block_size = 4096, max_compress_block_size = 16384;
