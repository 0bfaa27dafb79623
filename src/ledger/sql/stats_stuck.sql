-- Up to $1 deliveries that are not done and not being worked on now (failed, dead, or holding
-- an expired lease), oldest first, with their last error cut to $2 characters. Times are UTC,
-- ISO 8601, to the millisecond.
SELECT source, delivery_id, status, attempt,
       to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       extract(epoch FROM now() - received_at)::float8,
       to_char(next_attempt_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       left(last_error, $2)
  FROM hookclaim_deliveries
 WHERE status IN ('failed', 'dead') OR (status = 'processing' AND lease_until <= now())
 ORDER BY received_at, source, delivery_id
 LIMIT $1
