-- A layout measured and not adopted (BENCHMARKS.md, "The payload in a table of its own"): the
-- ledger of migrations/0001_ledger.sql with the payload, headers and event type in a table of
-- their own, so the status row a finish rewrites is narrow. Only the claim's insert differs.
-- Loaded beside the real ledger by `benches/claim.py --setup narrow-layout.sql`.
CREATE TABLE hookclaim_n_deliveries (
    source             text        NOT NULL,
    delivery_id        text        NOT NULL,
    -- Where the id came from: a header, the body, or the body's SHA-256 (the sender sent none).
    id_origin          text        NOT NULL DEFAULT 'header',
    status             text        NOT NULL,
    -- 1 at the first claim, one more at each takeover.
    attempt            integer     NOT NULL DEFAULT 1,
    -- The invocation that holds the claim, or last held it; finishing is fenced on it and on
    -- the attempt.
    lease_owner        text,
    lease_until        timestamptz,
    next_attempt_at    timestamptz,
    completed_at       timestamptz,
    last_error         text,
    -- What the delivery is re-driven and replayed from: the body exactly as signed (NULL once
    -- trimmed), its SHA-256, the kept headers and the event type.
    payload_sha256     bytea       NOT NULL,
    payload_trimmed_at timestamptz,
    -- The key is kept to KEY_RETENTION_DAYS, past the payload's RETENTION_DAYS: the source's
    -- signatures do not expire, so only the remembered key refuses a replayed request.
    long_key_retention boolean     NOT NULL DEFAULT false,
    received_at        timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT hookclaim_n_n_deliveries_pkey PRIMARY KEY (source, delivery_id),
    -- PostgreSQL prepares a table's CHECKs again at every statement that writes a row (about
    -- 1.5 us each for a new delivery): these five keep the state machine whole. The id origin,
    -- the hash and the payload are written by the claim alone, from typed values.
    CONSTRAINT hookclaim_n_status_known
        CHECK (status IN ('processing', 'done', 'failed', 'dead')),
    CONSTRAINT hookclaim_n_attempt_from_one CHECK (attempt >= 1),
    -- Each state carries the time retention acts on, and only that one: a processing row its
    -- lease end, a failed row its next attempt, a done or dead row its completion.
    CONSTRAINT hookclaim_n_processing_has_lease
        CHECK ((status = 'processing') = (lease_until IS NOT NULL)
               AND (status <> 'processing' OR lease_owner IS NOT NULL)),
    CONSTRAINT hookclaim_n_failed_has_next_attempt
        CHECK ((status = 'failed') = (next_attempt_at IS NOT NULL)),
    CONSTRAINT hookclaim_n_finished_has_completed_at
        CHECK ((status IN ('done', 'dead')) = (completed_at IS NOT NULL))
);
CREATE INDEX hookclaim_n_finished_idx ON hookclaim_n_deliveries (long_key_retention, completed_at)
    WHERE status IN ('done', 'dead');
CREATE INDEX hookclaim_n_waiting_idx ON hookclaim_n_deliveries (status, lease_until, next_attempt_at)
    WHERE status IN ('processing', 'failed');
CREATE INDEX hookclaim_n_dead_payloads_idx ON hookclaim_n_deliveries (completed_at)
    WHERE status = 'dead' AND payload_trimmed_at IS NULL;
CREATE TABLE hookclaim_n_payloads (
    source      text  NOT NULL,
    delivery_id text  NOT NULL,
    payload     bytea NOT NULL,
    headers     jsonb NOT NULL,
    event_type  text,
    PRIMARY KEY (source, delivery_id)
);

CREATE FUNCTION hookclaim_n_take_over(
    p_source text, p_delivery_id text, p_owner text, p_lease_secs float8,
    p_max_attempts integer)
RETURNS SETOF hookclaim_n_deliveries
LANGUAGE plpgsql
AS $take_over$
DECLARE
    d hookclaim_n_deliveries;
BEGIN
    SELECT * INTO d FROM hookclaim_n_deliveries
     WHERE source = p_source AND delivery_id = p_delivery_id
       AND ((status = 'processing' AND lease_until <= now())
            OR (status = 'failed' AND next_attempt_at <= now()))
       FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF d.status = 'processing' AND d.attempt >= p_max_attempts THEN
        RETURN QUERY
        UPDATE hookclaim_n_deliveries
           SET status = 'dead', lease_owner = p_owner, lease_until = NULL, completed_at = now(),
               last_error = format('gave up after %s attempts: processing never finished '
                                   '(the invocation died each time)', d.attempt),
               updated_at = now()
         WHERE source = p_source AND delivery_id = p_delivery_id
        RETURNING *;
    ELSE
        RETURN QUERY
        UPDATE hookclaim_n_deliveries
           SET status = 'processing', attempt = d.attempt + 1, lease_owner = p_owner,
               lease_until = now() + make_interval(secs => p_lease_secs), next_attempt_at = NULL,
               updated_at = now()
         WHERE source = p_source AND delivery_id = p_delivery_id
        RETURNING *;
    END IF;
END
$take_over$;

CREATE FUNCTION hookclaim_n_claim(
    p_source text, p_delivery_id text, p_owner text, p_lease_secs float8,
    p_payload bytea, p_payload_sha256 bytea, p_headers text, p_event_type text,
    p_id_origin text, p_store_only boolean, p_long_key_retention boolean, p_max_attempts integer,
    OUT state text, OUT attempt integer, OUT same_payload boolean, OUT retry_at timestamptz)
LANGUAGE plpgsql
AS $claim$
DECLARE
    d hookclaim_n_deliveries;
BEGIN
    -- 1. Read the key.
    SELECT * INTO d FROM hookclaim_n_deliveries
     WHERE source = p_source AND delivery_id = p_delivery_id;
    IF NOT FOUND THEN
        -- 2. A new key: insert it; of racing claimants, the unique key lets one win. One whose
        -- insert has not committed holds this lock: the others answer at once, never wait.
        IF NOT pg_try_advisory_xact_lock(hashtextextended(p_source || '/' || p_delivery_id, 0)) THEN
            state := 'in_progress';
            RETURN;
        END IF;
        INSERT INTO hookclaim_n_deliveries
            (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until,
             completed_at, payload_sha256, long_key_retention)
        VALUES (p_source, p_delivery_id, p_id_origin,
                CASE WHEN p_store_only THEN 'done' ELSE 'processing' END, 1, p_owner,
                CASE WHEN NOT p_store_only THEN now() + make_interval(secs => p_lease_secs) END,
                CASE WHEN p_store_only THEN now() END,
                p_payload_sha256, p_long_key_retention)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            INSERT INTO hookclaim_n_payloads (source, delivery_id, payload, headers, event_type)
            VALUES (p_source, p_delivery_id, p_payload, p_headers::jsonb, p_event_type);
            state := 'claimed';
            attempt := 1;
            same_payload := true;
            RETURN;
        END IF;
        SELECT * INTO d FROM hookclaim_n_deliveries
         WHERE source = p_source AND delivery_id = p_delivery_id;
    END IF;
    attempt := d.attempt;
    same_payload := d.payload_sha256 = p_payload_sha256;
    -- 3. This owner's own earlier claim (a retry after its answer was lost) is still its own.
    IF d.lease_owner = p_owner AND d.status IN ('processing', 'done') THEN
        state := 'claimed';
    -- 4. A finished delivery: a duplicate, answered from the row.
    ELSIF d.status IN ('done', 'dead') THEN
        state := d.status;
    -- 5. An expired lease or a due retry: take it over, unless another claimant holds it now.
    ELSIF (d.status = 'processing' AND d.lease_until <= now())
          OR (d.status = 'failed' AND d.next_attempt_at <= now()) THEN
        SELECT CASE t.status WHEN 'dead' THEN 'gave_up' ELSE 'claimed' END, t.attempt
          INTO state, attempt
          FROM hookclaim_n_take_over(p_source, p_delivery_id, p_owner, p_lease_secs, p_max_attempts) t;
        state := coalesce(state, 'in_progress');
    -- 6. Otherwise it is held under a live lease, or failed and not due yet.
    ELSE
        state := CASE WHEN d.status = 'failed' THEN 'retry_later' ELSE 'in_progress' END;
        retry_at := d.next_attempt_at;
    END IF;
END
$claim$;

SELECT count(*)
  FROM generate_series(1, :dup_count) AS g,
       hookclaim_n_claim(:'source', (:dup_base::int8 + g)::text, :'owner', :lease_secs,
                         :'payload', :'sha', :'headers', :'event_type', :'id_origin', true,
                         :long_key_retention, :max_attempts);
