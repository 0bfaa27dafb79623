INSERT INTO {table} (source, delivery_id, status, payload)
VALUES (:source, :id, 'processing', :payload)
    ON CONFLICT DO NOTHING RETURNING status;
