-- Cheaper reads for the searches whose matches are spread over the store (a rare term, a selective
-- metadata value; bench/README.md, "Search"): each of their matches costs a granule read, and the
-- time went on decompressing those granules and on reading metadata_flat to test each event.
--
-- 1. The text columns are stored with LZ4 instead of ZSTD(3): LZ4 decompresses about 1.6 × faster
-- (a rare term's page read 190 → 151 ms at 10 M events), and costs inserts and merges no more CPU.
-- The price is disk: these columns take about 1.7 × the bytes (at 10 M events of the search
-- benchmark, search_text 276 → 461 MiB, metadata 187 → 320 MiB, input 50 → 113 MiB). Only the codec
-- changes: parts already stored keep ZSTD(3) until a merge rewrites them.
ALTER TABLE events
    MODIFY COLUMN input CODEC(LZ4),
    MODIFY COLUMN reasoning CODEC(LZ4),
    MODIFY COLUMN error_message CODEC(LZ4),
    MODIFY COLUMN cwd CODEC(LZ4),
    MODIFY COLUMN git CODEC(LZ4),
    MODIFY COLUMN metadata CODEC(LZ4),
    MODIFY COLUMN search_text CODEC(LZ4);

-- 2. The metadata filters (meta.<path>=<value>) are answered by a text index of the event's (path,
-- value) pairs, each written as the path's length in bytes, ':', the path, then the value: one
-- token per pair that no other pair can spell. `hasAny` of this expression with the wanted pairs
-- is the filter itself, exactly, and the engine reads its answer from the index without reading
-- metadata_flat (the bloom filter of 020 only skipped granules, and each granule it kept was read
-- and tested). A part without the index (a mutation under way) computes the same expression from
-- the column: the answer never depends on the index. The expression must stay as written: the
-- reads (src/storage/search-repository.ts, META_PAIRS) name it character for character.
ALTER TABLE events ADD INDEX IF NOT EXISTS idx_metadata_pairs
    arrayMap((k, v) -> concat(toString(length(k)), ':', k, v), mapKeys(metadata_flat), mapValues(metadata_flat))
    TYPE text(tokenizer = array);
ALTER TABLE events MATERIALIZE INDEX idx_metadata_pairs SETTINGS mutations_sync = 2;
ALTER TABLE events DROP INDEX IF EXISTS idx_metadata_values;
