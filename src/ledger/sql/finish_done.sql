-- Marks attempt $3 of delivery $1/$2 done, if owner $4 still holds it. When the fence matches no
-- row the statement fails (division by zero, SQLSTATE 22012): inside the processing transaction
-- that aborts it, so the COMMIT sent in the same batch rolls everything back.
WITH finished AS (
    UPDATE hookclaim_deliveries
       SET status = 'done', lease_until = NULL, completed_at = now(), last_error = NULL,
           updated_at = now()
     WHERE source = $1 AND delivery_id = $2 AND attempt = $3 AND lease_owner = $4
       AND status = 'processing'
    RETURNING 1
)
SELECT 1 / count(*) FROM finished
