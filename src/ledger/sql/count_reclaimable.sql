-- How many rows a reclaim could take over now.
SELECT count(*) FROM hookclaim_deliveries
 WHERE coalesce(lease_until, next_attempt_at) <= now()
