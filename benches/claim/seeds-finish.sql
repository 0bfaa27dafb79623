UPDATE {table} SET status = 'done', processed_at = now()
 WHERE source = :source AND delivery_id = :id;
