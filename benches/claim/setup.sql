-- The benchmark's two narrow tables beside the ledger, and the redelivered set in all three.
-- psql variables: source, guarded_source, payload, sha, headers, event_type, id_origin,
-- first_owner, lease_secs, long_key_retention, replay_guard, max_attempts, dup_base, dup_count
-- (benches/claim.py sets them).

-- The floor of deduplication: the unique key and the payload, nothing else.
CREATE TABLE bench_bare (
    source      text  NOT NULL,
    delivery_id text  NOT NULL,
    payload     bytea NOT NULL,
    PRIMARY KEY (source, delivery_id)
);

-- A two-statement Strategy B handler's own table: the key, a status, the payload and two
-- timestamps.
CREATE TABLE bench_seeds (
    source       text        NOT NULL,
    delivery_id  text        NOT NULL,
    status       text        NOT NULL,
    payload      bytea       NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    processed_at timestamptz,
    PRIMARY KEY (source, delivery_id)
);

-- The same handler, fair to the ledger: its table also indexes the rows still processing, so
-- that a reclaim could find them, which makes its UPDATE to done non-HOT, as the ledger's
-- finish is.
CREATE TABLE bench_fair (LIKE bench_seeds INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE INDEX bench_fair_processing_idx ON bench_fair (received_at) WHERE status = 'processing';

INSERT INTO bench_bare (source, delivery_id, payload)
SELECT :'source', (:dup_base::int8 + g)::text, :'payload'::bytea
  FROM generate_series(1, :dup_count) AS g;

INSERT INTO bench_seeds (source, delivery_id, status, payload, processed_at)
SELECT :'source', (:dup_base::int8 + g)::text, 'done', :'payload'::bytea, now()
  FROM generate_series(1, :dup_count) AS g;

INSERT INTO bench_fair SELECT * FROM bench_seeds;

-- The ledger's redelivered rows, as the store-only claim of the invocation that first received
-- them left them: a redelivery comes to another invocation, whose owner token differs.
SELECT count(*)
  FROM generate_series(1, :dup_count) AS g,
       hookclaim_claim(:'source', (:dup_base::int8 + g)::text, :'first_owner', :lease_secs,
                       :'payload', :'sha', :'headers', :'event_type', :'id_origin', true,
                       :long_key_retention, :replay_guard, :max_attempts);

-- The same for a source with the replay guard, as its store-only claim leaves them (inserted
-- directly, as the table's definition allows): each row a body of its own, whose hash is the SHA-256 of its id's eight bytes, as the guarded paths bind it. The
-- re-sent body path posts these bodies under new ids.
INSERT INTO hookclaim_deliveries
    (source, delivery_id, id_origin, status, attempt, lease_owner, completed_at, payload,
     payload_sha256, headers, event_type, long_key_retention, replay_guard)
SELECT :'guarded_source', (:dup_base::int8 + g)::text, :'id_origin', 'done', 1, :'first_owner',
       now(),
       :'payload', sha256(int8send(:dup_base::int8 + g)), :'headers'::jsonb, :'event_type',
       :long_key_retention, true
  FROM generate_series(1, :dup_count) AS g;
