-- Takes over the next row after cursor ($5, $6, $7) in due order that was due at $4, the run's
-- start (NULL at its first call: now), for retention run $1 (lease $2 seconds, attempt cap $3).
-- It returns the row it looked at and that start, with the takeover of hookclaim_take_over,
-- whose columns are NULL when another transaction holds that row or took it meanwhile; the
-- next call resumes after it. The due index (migrations/0001_ledger.sql) answers the inner
-- SELECT with one descent to the cursor, so rows passed over are never read again; and a row
-- this run re-drove falls due again after the run's start, so the run attempts it only once.
SELECT next.run_started, next.due_at, next.source, next.delivery_id,
       t.attempt, t.event_type, t.payload, t.headers, t.last_error, t.status
  FROM (SELECT coalesce($4, now()) AS run_started, due_at, source, delivery_id
          FROM (SELECT coalesce(lease_until, next_attempt_at) AS due_at,
                       source, delivery_id
                  FROM hookclaim_deliveries) AS waiting
         WHERE due_at <= coalesce($4, now())
           AND (due_at, source, delivery_id)
               > (coalesce($5, '-infinity'::timestamptz), coalesce($6, ''), coalesce($7, ''))
         ORDER BY due_at, source, delivery_id
         LIMIT 1) AS next
  LEFT JOIN LATERAL hookclaim_take_over(
           p_source => next.source, p_delivery_id => next.delivery_id, p_owner => $1,
           p_lease_secs => $2, p_max_attempts => $3) AS t ON true
