-- Records attempt $3 of delivery $1/$2 as $5 (done, failed, deferred or dead), with error $6;
-- failed or deferred, due again in $7 seconds, a failure dead at attempt cap $8, a deferral dead
-- past age bound $9 seconds, if owner $4 still holds it; answers the error it recorded when it
-- made the delivery dead instead, NULL otherwise; fails with SQLSTATE HC002 (fenced) when the
-- owner no longer holds it: hookclaim_finish in migrations/0001_ledger.sql.
SELECT hookclaim_finish(
           p_source => $1, p_delivery_id => $2, p_attempt => $3, p_owner => $4,
           p_outcome => $5, p_error => $6, p_retry_in_secs => $7, p_max_attempts => $8,
           p_max_age_secs => $9)
