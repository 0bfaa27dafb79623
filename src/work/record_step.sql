-- Records that step $5 of delivery $1/$2 is done, with detail $6, but only while attempt $3 of
-- owner $4 still holds it: a zombie whose lease was taken over records nothing. FOR SHARE makes
-- a concurrent takeover either wait for this insert or be seen by it, so the fence cannot be
-- passed on a row version that a takeover has already replaced.
INSERT INTO hookclaim_destination_progress
    (source, delivery_id, destination, attempt, detail)
SELECT d.source, d.delivery_id, $5, d.attempt, $6
  FROM hookclaim_deliveries d
 WHERE d.source = $1 AND d.delivery_id = $2 AND d.attempt = $3 AND d.lease_owner = $4
   AND d.status = 'processing'
   FOR SHARE
ON CONFLICT (source, delivery_id, destination) DO NOTHING
