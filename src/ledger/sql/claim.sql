-- Claims one delivery in one call: hookclaim_claim in migrations/0001_ledger.sql.
SELECT state, attempt, same_payload, retry_at, body_of
  FROM hookclaim_claim(
           $1,   -- source
           $2,   -- delivery id
           $3,   -- owner: this invocation's token
           $4,   -- lease, in seconds from now()
           $5,   -- payload
           $6,   -- payload SHA-256
           $7,   -- kept headers, as JSON text
           $8,   -- event type
           $9,   -- id origin
           $10,  -- store only: stored as done at once
           $11,  -- long key retention
           $12,  -- replay guard: the body is a key too
           $13)  -- attempt cap
