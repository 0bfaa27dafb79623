-- Deletes up to $3 done or dead rows with long key retention $1 that completed more than $2
-- seconds ago, oldest first. Rows are picked by ctid: the inner SELECT walks the finished index
-- once and locks what it picks, so the DELETE reaches each row directly instead of through the
-- primary key again, and the lock keeps the picked rows from moving before the DELETE. A row a
-- concurrent claim holds (a redelivery of an old key) is skipped, never waited for; a row
-- updated since this statement's snapshot keeps its new ctid out of sight and is left for a
-- later batch.
DELETE FROM hookclaim_deliveries
 WHERE ctid = ANY(ARRAY(
       SELECT ctid FROM hookclaim_deliveries
        WHERE status IN ('done', 'dead') AND long_key_retention = $1
          AND completed_at < now() - make_interval(secs => $2)
        ORDER BY completed_at
        LIMIT $3
          FOR UPDATE SKIP LOCKED))
