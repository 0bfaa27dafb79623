-- The normal day's takeover pool, once measured: the due retries the takeovers left are
-- finished (as a run would have), so the day's next drain finds its own 2,000 only.
-- psql variables: source, due_base, from, pool.
UPDATE hookclaim_deliveries
   SET status = 'done', next_attempt_at = NULL, completed_at = now(), updated_at = now()
 WHERE source = :'source' AND status = 'failed'
   AND delivery_id IN (SELECT (:due_base::int8 + :from + g)::text
                         FROM generate_series(1, :pool) AS g);
