-- What an outage leaves (or a normal day's share of it): :expired processing rows whose lease
-- ended (the invocation died), :due failed rows whose next attempt is due, and :waiting failed
-- rows due tomorrow. Each kind's ids are its base + :from + 1, 2, …, so the benchmark can name
-- them and add more; due rows fell due in id order, oldest first, as leases expired. psql
-- variables: those, and what finished.sql takes.
INSERT INTO hookclaim_deliveries
    (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until, payload,
     payload_sha256, headers, event_type, received_at, updated_at)
SELECT :'source', (:expired_base::int8 + :from + g)::text, :'id_origin', 'processing', 1,
       :'first_owner', t + interval '100 s', :'payload'::bytea, :'sha'::bytea,
       :'headers'::jsonb, :'event_type', t, t
  FROM generate_series(1, :expired) AS g,
       LATERAL (SELECT now() - interval '2 hours' + interval '1 hour' * g / :expired AS t) AS at;

INSERT INTO hookclaim_deliveries
    (source, delivery_id, id_origin, status, attempt, lease_owner, next_attempt_at, last_error,
     payload, payload_sha256, headers, event_type, received_at, updated_at)
SELECT :'source', (:due_base::int8 + :from + g)::text, :'id_origin', 'failed', 1,
       :'first_owner', t + interval '1 minute', 'processing failed: downstream unavailable',
       :'payload'::bytea, :'sha'::bytea, :'headers'::jsonb, :'event_type', t, t
  FROM generate_series(1, :due) AS g,
       LATERAL (SELECT now() - interval '2 hours' + interval '1 hour' * g / :due AS t) AS at;

INSERT INTO hookclaim_deliveries
    (source, delivery_id, id_origin, status, attempt, lease_owner, next_attempt_at, last_error,
     payload, payload_sha256, headers, event_type, received_at, updated_at)
SELECT :'source', (:waiting_base::int8 + :from + g)::text, :'id_origin', 'failed', 1,
       :'first_owner', now() + interval '1 day', 'processing failed: downstream unavailable',
       :'payload'::bytea, :'sha'::bytea, :'headers'::jsonb, :'event_type', now(), now()
  FROM generate_series(1, :waiting) AS g;
