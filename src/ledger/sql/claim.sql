-- Claims one delivery in one call: hookclaim_claim in migrations/0001_ledger.sql.
SELECT state, attempt, same_payload, retry_at, body_of
  FROM hookclaim_claim(
           p_source => $1, p_delivery_id => $2,
           p_owner => $3,               -- this invocation's token
           p_lease_secs => $4,          -- from now()
           p_payload => $5, p_payload_sha256 => $6,
           p_headers => $7,             -- the kept headers, as JSON text
           p_event_type => $8, p_id_origin => $9,
           p_store_only => $10,         -- stored as done at once
           p_long_key_retention => $11,
           p_replay_guard => $12,       -- the body is a key too
           p_max_attempts => $13)
