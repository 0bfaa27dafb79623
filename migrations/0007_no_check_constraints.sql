-- PostgreSQL reads and plans a table's CHECK constraints again at every execution of a statement
-- that writes a row: the planned statement does not keep them. Measured with the claim of a new
-- delivery (server CPU per statement, BENCHMARKS.md), these three cost about 10 µs of its 60, a
-- sixth of the claim, and every finish, reclaim and re-drive that writes a row pays the same
-- set-up.
--
-- What they guarded is kept by the statements instead. Every write to this table is a statement
-- in src/store.rs or a claim function in these migrations, and each sets the status from a
-- literal and, in the same statement, the lease of a processing row or the due time of a failed
-- one. The tests check those invariants over every row after the claim races, the chaos run and
-- the retention runs (tests/support/ledger.rs, assert_rows_well_formed), and the retention run
-- counts the rows that break them and that no run can take (`unreclaimable_deliveries`, with an
-- alarm), so that a hand-written UPDATE that would leave a delivery stuck is seen.
ALTER TABLE hookclaim_deliveries
    DROP CONSTRAINT IF EXISTS hookclaim_deliveries_status_check,
    DROP CONSTRAINT IF EXISTS hookclaim_processing_has_lease,
    DROP CONSTRAINT IF EXISTS hookclaim_failed_has_next_attempt;
