-- How many rows purge.sql with the same $1 and $2 would delete in all.
SELECT count(*) FROM hookclaim_deliveries
 WHERE status IN ('done', 'dead') AND long_key_retention = $1
   AND completed_at < now() - make_interval(secs => $2)
