-- Drops the payloads of up to $4 done rows with long key retention $1 that completed more than
-- $2 seconds ago, oldest first, keeping the key and the hash (a redelivery is still a
-- duplicate). It walks the finished index from cursor $3, the previous batch's newest row, or
-- for a run's first batch from where the earlier runs stopped, so a run reads about what it
-- trims. Picked by ctid and skipping locked rows, as purge.sql does.
WITH trimmed AS (
    UPDATE hookclaim_deliveries
       SET payload = NULL, payload_trimmed_at = now(), updated_at = now()
     WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM hookclaim_deliveries
            WHERE status = 'done' AND long_key_retention = $1 AND payload IS NOT NULL
              AND completed_at < now() - make_interval(secs => $2)
              AND completed_at >= coalesce($3, hookclaim_trimmed_up_to($1, $2))
            ORDER BY completed_at
            LIMIT $4
              FOR UPDATE SKIP LOCKED))
    RETURNING completed_at
)
SELECT count(*), max(completed_at) FROM trimmed
