-- What the ledger table's CHECK constraints and the replay guard's unique index cost a new
-- delivery's insert (BENCHMARKS.md): copies of hookclaim_deliveries with its columns, defaults,
-- primary key and retention indexes, one without either, one with the CHECKs alone, one with
-- the guard index alone. Run with
--   python3 benches/claim.py --no-gate --clients 1,4 --setup table-cost.sql \
--     --path plain=bench_plain:table-cost-insert.sql \
--     --path checks=bench_checks:table-cost-insert.sql \
--     --path guard=bench_guard:table-cost-insert.sql \
--     --path ledger=hookclaim_deliveries:table-cost-insert.sql
-- Each path runs the store-only claim's INSERT into its table as one statement.

CREATE TABLE bench_plain (LIKE hookclaim_deliveries INCLUDING DEFAULTS INCLUDING INDEXES);
DROP INDEX bench_plain_source_payload_sha256_idx;

CREATE TABLE bench_checks (LIKE hookclaim_deliveries
    INCLUDING DEFAULTS INCLUDING INDEXES INCLUDING CONSTRAINTS);
DROP INDEX bench_checks_source_payload_sha256_idx;

CREATE TABLE bench_guard (LIKE hookclaim_deliveries INCLUDING DEFAULTS INCLUDING INDEXES);

-- The redelivered rows, so that a duplicate meets its key in each.
INSERT INTO bench_plain SELECT * FROM hookclaim_deliveries WHERE source = :'source';
INSERT INTO bench_checks SELECT * FROM bench_plain;
INSERT INTO bench_guard SELECT * FROM bench_plain;
