-- Takes delivery $1/$2 for an operator's replay by owner $3, leased for $4 seconds: a failed,
-- dead or expired row, or a done one when $5 (force) is set. Never a row under a live lease or
-- without its payload.
UPDATE hookclaim_deliveries AS d
   SET status = 'processing', attempt = d.attempt + 1, lease_owner = $3,
       lease_until = now() + make_interval(secs => $4), next_attempt_at = NULL,
       completed_at = NULL, updated_at = now()
 WHERE d.source = $1 AND d.delivery_id = $2
   AND d.payload IS NOT NULL
   AND (d.status IN ('failed', 'dead')
        OR (d.status = 'processing' AND d.lease_until <= now())
        OR (d.status = 'done' AND $5))
RETURNING d.source, d.delivery_id, d.attempt, d.event_type, d.payload, d.headers, d.last_error,
          d.status
