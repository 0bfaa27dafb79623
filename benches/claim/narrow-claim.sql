\set store_only 0
-- Claims one delivery in one call: hookclaim_claim in migrations/0001_ledger.sql.
SELECT state, attempt, same_payload, retry_at
  FROM hookclaim_n_claim(
           :source,   -- source
           :id,   -- delivery id
           :owner,   -- owner: this invocation's token
           :lease_secs,   -- lease, in seconds from now()
           :payload,   -- payload
           :sha,   -- payload SHA-256
           :headers,   -- kept headers
           :event_type,   -- event type
           :id_origin,   -- id origin
           :store_only,  -- store only: stored as done at once
           :long_key_retention,  -- long key retention
           :max_attempts)  -- attempt cap
;
