-- How many payloads trim_done.sql with the same $1 and $2 would drop in all, once the rows past
-- the purge horizon ($3 seconds) are purged.
SELECT count(*) FROM hookclaim_deliveries
 WHERE status = 'done' AND long_key_retention = $1 AND payload IS NOT NULL
   AND completed_at < now() - make_interval(secs => $2)
   AND completed_at >= now() - make_interval(secs => $3)
   AND completed_at >= hookclaim_trimmed_up_to($1, $2)
