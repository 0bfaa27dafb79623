-- Records attempt $3 of delivery $1/$2 as $5 (done, failed or dead), with error $6 and, when
-- failed, due again in $7 seconds, if owner $4 still holds it; otherwise fails with SQLSTATE
-- HC002 (fenced): hookclaim_finish in migrations/0001_ledger.sql.
SELECT hookclaim_finish(
           p_source => $1, p_delivery_id => $2, p_attempt => $3, p_owner => $4,
           p_outcome => $5, p_error => $6, p_retry_in_secs => $7)
