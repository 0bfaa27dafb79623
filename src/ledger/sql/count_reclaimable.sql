-- How many rows a reclaim could take over now.
SELECT count(*) FROM hookclaim_deliveries
 WHERE hookclaim_takeover_due(status, lease_until, next_attempt_at)
