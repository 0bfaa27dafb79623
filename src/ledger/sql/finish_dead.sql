-- Marks attempt $3 of delivery $1/$2 dead with error $5 (the payload stays for a replay), if
-- owner $4 still holds it.
UPDATE hookclaim_deliveries
   SET status = 'dead', lease_until = NULL, completed_at = now(), last_error = $5,
       updated_at = now()
 WHERE source = $1 AND delivery_id = $2 AND attempt = $3 AND lease_owner = $4
   AND status = 'processing'
