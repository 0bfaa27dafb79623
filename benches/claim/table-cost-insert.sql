-- The store-only claim's INSERT as one statement, into the path's table (table-cost.sql).
INSERT INTO {table}
    (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until, completed_at,
     payload, payload_sha256, headers, event_type, long_key_retention, replay_guard)
VALUES (:source, :id, :id_origin, 'done', 1, :owner, NULL, now(), :payload, :sha,
        :headers::jsonb, :event_type, :long_key_retention, :replay_guard)
ON CONFLICT DO NOTHING;
