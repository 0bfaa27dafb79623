-- Marks attempt :attempt of delivery :source/:id done, if owner :owner still holds it. When the fence matches no
-- row the statement fails (division by zero, SQLSTATE 22012): inside the processing transaction
-- that aborts it, so the COMMIT sent in the same batch rolls everything back.
WITH finished AS (
    UPDATE hookclaim_n_deliveries
       SET status = 'done', lease_until = NULL, completed_at = now(), last_error = NULL,
           updated_at = now()
     WHERE source = :source AND delivery_id = :id AND attempt = :attempt AND lease_owner = :owner
       AND status = 'processing'
    RETURNING 1
)
SELECT 1 / count(*) FROM finished;
