-- The stored delivery $1/$2 as attempt $3 of owner $4 holds it: what a takeover runs.
SELECT source, delivery_id, attempt, event_type, payload, headers, last_error, status
  FROM hookclaim_deliveries
 WHERE source = $1 AND delivery_id = $2 AND attempt = $3 AND lease_owner = $4
   AND status = 'processing'
