-- How many rows a reclaim could take over now.
SELECT count(*) FROM hookclaim_deliveries WHERE due_at <= now()
