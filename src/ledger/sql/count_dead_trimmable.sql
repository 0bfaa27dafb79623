-- How many payloads trim_dead.sql with the same $1 and $2 would drop in all.
SELECT count(*) FROM hookclaim_deliveries
 WHERE status = 'dead' AND payload IS NOT NULL
   AND completed_at < now() - make_interval(secs => CASE WHEN long_key_retention
                                                         THEN $2 ELSE $1 END)
