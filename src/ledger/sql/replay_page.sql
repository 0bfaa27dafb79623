-- The next up to $7 replayable deliveries of bulk replay filter $1-$4 (hookclaim_replay_selection)
-- after cursor ($5, $6), in (received_at, delivery_id) order. Nothing is locked: each one is
-- then taken on its own (take_for_replay.sql), which checks its state again.
SELECT received_at, delivery_id
  FROM hookclaim_replay_selection($1, $2, $3, $4)
 WHERE payload IS NOT NULL
   AND (received_at, delivery_id) > (coalesce($5, '-infinity'::timestamptz), $6)
 ORDER BY received_at, delivery_id
 LIMIT $7
