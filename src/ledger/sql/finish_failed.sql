-- Marks attempt $3 of delivery $1/$2 failed with error $5, due again in $6 seconds, if owner
-- $4 still holds it.
UPDATE hookclaim_deliveries
   SET status = 'failed', lease_until = NULL, last_error = $5,
       next_attempt_at = now() + make_interval(secs => $6), updated_at = now()
 WHERE source = $1 AND delivery_id = $2 AND attempt = $3 AND lease_owner = $4
   AND status = 'processing'
