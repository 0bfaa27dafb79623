-- How many deliveries bulk replay filter $1-$4 selects: with their payload (replayable), and
-- without (trimmed).
SELECT count(*) FILTER (WHERE payload IS NOT NULL), count(*) FILTER (WHERE payload IS NULL)
  FROM hookclaim_replay_selection($1, $2, $3, $4)
