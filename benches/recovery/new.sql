-- A new delivery: a random 63-bit id, claimed and finished done (benches/recovery.py appends
-- the ledger's claim and finish, src/ledger/sql/claim.sql and finish.sql).
\set id random(1, 9223372036854775806)
\set attempt 1
