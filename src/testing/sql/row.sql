-- Delivery $1/$2's row as a test reads it: its state and the times retention acts on.
SELECT status, attempt, last_error, next_attempt_at, lease_until, completed_at, received_at,
       payload IS NOT NULL AS payload_kept, event_type
  FROM hookclaim_deliveries
 WHERE source = $1 AND delivery_id = $2
