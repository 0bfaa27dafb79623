-- How long, in seconds, the oldest expired lease and the oldest due retry have waited (0 when
-- there is none). Each walks the due index from its oldest row to the first of its status:
-- once per retention run.
SELECT coalesce(extract(epoch FROM now() - (
           SELECT coalesce(lease_until, next_attempt_at)
             FROM hookclaim_deliveries
            WHERE coalesce(lease_until, next_attempt_at) <= now()
              AND status = 'processing'
            ORDER BY 1 LIMIT 1)), 0)::float8,
       coalesce(extract(epoch FROM now() - (
           SELECT coalesce(lease_until, next_attempt_at)
             FROM hookclaim_deliveries
            WHERE coalesce(lease_until, next_attempt_at) <= now()
              AND status = 'failed'
            ORDER BY 1 LIMIT 1)), 0)::float8
