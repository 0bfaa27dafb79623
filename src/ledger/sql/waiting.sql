-- How long, in seconds, the oldest expired lease and the oldest due retry have waited (0 when
-- there is none): cheap enough for every retention run, since the waiting index holds both.
SELECT coalesce(extract(epoch FROM now() - (
           SELECT min(lease_until) FROM hookclaim_deliveries
            WHERE status = 'processing'
              AND hookclaim_takeover_due(status, lease_until, next_attempt_at))), 0)::float8,
       coalesce(extract(epoch FROM now() - (
           SELECT min(next_attempt_at) FROM hookclaim_deliveries
            WHERE status = 'failed'
              AND hookclaim_takeover_due(status, lease_until, next_attempt_at))), 0)::float8
