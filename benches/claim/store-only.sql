SELECT coalesce(
         (SELECT f.answer FROM hookclaim_deliveries AS f
           WHERE f.source = :source AND f.delivery_id = :id AND f.completed_at IS NOT NULL),
         hookclaim_claim_unanswered(:source, :id, :payload, :row_store));
