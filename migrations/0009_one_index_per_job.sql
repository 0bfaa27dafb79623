-- One index per retention job instead of two: every partial index costs each new delivery
-- whether or not the row enters it, because PostgreSQL opens the index and prepares its
-- predicate again at every statement that inserts a row. Counted in instructions per claim of a
-- new store-only delivery (BENCHMARKS.md, "What a new delivery pays for"): about 7,000 to 10,000
-- for each index the row does not enter, 15,000 to 17,000 for one it enters. These two merges
-- save a new delivery about 17,000 of 317,000 (store-only) or 12,000 (in-transaction), and
-- every plan that used the old indexes uses the new ones with the same or fewer buffers.
--
-- Purge and trim of finished rows: finished_idx and kept_keys_idx become one index whose first
-- column is the kind of row, so each kind's purge and trim still walks only its own rows in
-- completion order (`key_outlives_payload = false / true` is an index condition).
CREATE INDEX hookclaim_deliveries_finished_kinds_idx
    ON hookclaim_deliveries (key_outlives_payload, completed_at)
    WHERE status IN ('done', 'dead');

-- Reclaim and its backlog: leases_idx (processing rows by lease end) and retries_idx (failed
-- rows by due time) become one index of both, led by the status.
CREATE INDEX hookclaim_deliveries_waiting_idx
    ON hookclaim_deliveries (status, lease_until, next_attempt_at)
    WHERE status IN ('processing', 'failed');

-- Dropped last: the builds above block writes to the table but not reads (duplicates are still
-- answered), and the drops take their exclusive lock only for the end of this transaction.
DROP INDEX IF EXISTS hookclaim_deliveries_finished_idx;
DROP INDEX IF EXISTS hookclaim_deliveries_kept_keys_idx;
DROP INDEX IF EXISTS hookclaim_deliveries_leases_idx;
DROP INDEX IF EXISTS hookclaim_deliveries_retries_idx;
ALTER INDEX hookclaim_deliveries_finished_kinds_idx RENAME TO hookclaim_deliveries_finished_idx;
