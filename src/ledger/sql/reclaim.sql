-- Takes over one expired lease or due retry for retention run $1 (lease $2 seconds, attempt
-- cap $3): the takeover of hookclaim_take_over, on a row no other transaction holds and that
-- this run has not taken already.
SELECT t.source, t.delivery_id, t.attempt, t.event_type, t.payload, t.headers, t.last_error,
       t.status
  FROM (SELECT source, delivery_id FROM hookclaim_deliveries
         WHERE hookclaim_takeover_due(status, lease_until, next_attempt_at)
           AND lease_owner IS DISTINCT FROM $1
         LIMIT 1
           FOR UPDATE SKIP LOCKED) AS next,
       hookclaim_take_over(next.source, next.delivery_id, $1, $2, $3) AS t
