INSERT INTO bench_bare (source, delivery_id, payload) VALUES (:source, :id, :payload)
    ON CONFLICT DO NOTHING;
