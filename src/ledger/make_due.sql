-- Makes delivery $1/$2 failed and due now, whatever its state, as a delivery whose attempt
-- failed after its work was done: what the harness's re-drive then takes over.
UPDATE hookclaim_deliveries
   SET status = 'failed',
       next_attempt_at = now() - interval '1 second',
       lease_until = NULL,
       completed_at = NULL,
       updated_at = now()
 WHERE source = $1 AND delivery_id = $2
