-- Serialises migrations across processes until the transaction ends: $1 names hookclaim's lock
-- among the database's advisory locks.
SELECT pg_advisory_xact_lock($1)
