-- The steps recorded as done for delivery $1/$2.
SELECT destination
  FROM hookclaim_destination_progress
 WHERE source = $1 AND delivery_id = $2
