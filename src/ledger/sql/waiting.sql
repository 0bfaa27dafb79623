-- How long, in seconds, the oldest expired lease and the oldest due retry have waited (0 when
-- there is none). Each walks the due index from its oldest row to the first of its status:
-- once per retention run.
SELECT coalesce(extract(epoch FROM now() - (
           SELECT due_at FROM hookclaim_deliveries
            WHERE due_at <= now() AND status = 'processing'
            ORDER BY due_at LIMIT 1)), 0)::float8,
       coalesce(extract(epoch FROM now() - (
           SELECT due_at FROM hookclaim_deliveries
            WHERE due_at <= now() AND status = 'failed'
            ORDER BY due_at LIMIT 1)), 0)::float8
