-- A normal day's ledger: :finished done deliveries of one source, completed over the last day
-- (inside RETENTION_DAYS, so the retention run's purge leaves them), as the store-only claim
-- leaves them. psql variables: source, id_origin, first_owner, payload, sha, headers,
-- event_type, finished, finished_base (benches/recovery.py sets them).
INSERT INTO hookclaim_deliveries
    (source, delivery_id, id_origin, status, attempt, lease_owner, completed_at, payload,
     payload_sha256, headers, event_type, received_at, updated_at)
SELECT :'source', (:finished_base::int8 + g)::text, :'id_origin', 'done', 1, :'first_owner',
       t, :'payload'::bytea, :'sha'::bytea, :'headers'::jsonb, :'event_type', t, t
  FROM generate_series(1, :finished) AS g,
       LATERAL (SELECT now() - interval '1 day' * (:finished - g) / :finished AS t) AS at;
