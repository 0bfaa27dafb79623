-- What a new delivery pays for beyond its unique key, cut to what earns its cost (measured in
-- BENCHMARKS.md, "The claim statement against the bare dedupe insert").

-- Trim no longer needs an index of its own: it walks the purge index (finished_idx) from the
-- newest payload it already dropped (store.rs, TRIM_BATCH), so a run reads about what it trims.
-- Every new done row saved an index entry (about 60 bytes of WAL and the CPU to insert it).
DROP INDEX IF EXISTS hookclaim_deliveries_trimmable_idx;

-- PostgreSQL reads and plans a table's CHECK constraints again at every statement that writes a
-- row. The checks that keep a delivery from getting stuck stay (status, a lease for every
-- processing row, a due time for every failed row); these two only described values that
-- hookclaim's own statements always write correctly, and no code depends on them.
ALTER TABLE hookclaim_deliveries
    DROP CONSTRAINT IF EXISTS hookclaim_deliveries_id_origin_check,
    DROP CONSTRAINT IF EXISTS hookclaim_deliveries_attempt_check;
