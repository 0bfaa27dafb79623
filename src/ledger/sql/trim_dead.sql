-- Drops the payloads of up to $3 dead rows, oldest first: those with long key retention once
-- they completed more than $2 seconds ago, the others after $1 seconds (NULL: never; they stay
-- for a manual replay until purged). Dead rows are few and have an index of their own.
WITH trimmed AS (
    UPDATE hookclaim_deliveries
       SET payload = NULL, payload_trimmed_at = now(), updated_at = now()
     WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM hookclaim_deliveries
            WHERE status = 'dead' AND payload IS NOT NULL
              AND completed_at < now() - make_interval(secs => CASE WHEN long_key_retention
                                                                    THEN $2 ELSE $1 END)
            ORDER BY completed_at
            LIMIT $3
              FOR UPDATE SKIP LOCKED))
    RETURNING 1
)
SELECT count(*) FROM trimmed
