-- The in-progress row whose lease ends first (NULLs when none), and when the oldest row was
-- received and how many seconds ago. Times are UTC, ISO 8601, to the millisecond.
SELECT l.source, l.delivery_id, l.attempt,
       to_char(l.lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       l.lease_until <= now(),
       to_char(l.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       to_char(o.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       extract(epoch FROM now() - o.received_at)::float8
  FROM (SELECT min(received_at) AS received_at FROM hookclaim_deliveries) AS o
  LEFT JOIN LATERAL (
       SELECT source, delivery_id, attempt, lease_until, updated_at FROM hookclaim_deliveries
        WHERE status = 'processing' ORDER BY lease_until LIMIT 1) AS l ON true
