-- One delivery's state, for operators and tests.
SELECT status, attempt, last_error, payload IS NOT NULL AS has_payload
  FROM hookclaim_deliveries
 WHERE source = $1 AND delivery_id = $2
