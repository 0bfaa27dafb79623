-- Whether attempt $3 of owner $4 still holds delivery $1/$2.
SELECT EXISTS (
    SELECT 1
      FROM hookclaim_deliveries
     WHERE source = $1 AND delivery_id = $2 AND attempt = $3 AND lease_owner = $4
       AND status = 'processing')
