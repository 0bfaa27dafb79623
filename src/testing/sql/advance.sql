-- Moves the harness's clock forward by $1 seconds: every time stored in its ledger moves back by
-- as much, which, for rows compared with now(), is now moved forward. Leases end, retries fall
-- due and finished rows age past the retention horizons exactly as they would have by then.
WITH progress AS (
    UPDATE hookclaim_destination_progress
       SET recorded_at = recorded_at - make_interval(secs => $1)
)
UPDATE hookclaim_deliveries
   SET lease_until = lease_until - make_interval(secs => $1),
       next_attempt_at = next_attempt_at - make_interval(secs => $1),
       completed_at = completed_at - make_interval(secs => $1),
       payload_trimmed_at = payload_trimmed_at - make_interval(secs => $1),
       received_at = received_at - make_interval(secs => $1),
       updated_at = updated_at - make_interval(secs => $1)
