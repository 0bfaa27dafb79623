UPDATE hookclaim_deliveries
    SET status = 'done', lease_until = NULL, next_attempt_at = NULL, last_error = NULL,
        completed_at = now(), answer = payload_sha256, updated_at = now()
  WHERE source = :source AND delivery_id = :id AND attempt = 1 AND lease_owner = :owner
   AND status = 'processing';
