-- The delivery ledger: one row per (source, delivery id), whose unique key decides every claim,
-- the claim itself, and the takeover rule the claim and the retention reclaim share.
-- docs/architecture.md, "The claim", walks through it; src/ledger/ runs it.

-- The state machine's invariants, the table's one CHECK: a known status, attempts counted from
-- 1, deferrals among them (none below zero, never more than the attempts), and each state carrying the time retention acts on and no other: a processing row its
-- lease end (and owner), a failed row its next attempt, a done or dead row its completion.
-- PostgreSQL prepares a table's CHECK expressions again at every statement that writes it; a
-- call of this function is prepared in a fraction of the time the same rules take written out
-- as CHECKs, and only the branch of the row's status runs (BENCHMARKS.md).
CREATE FUNCTION hookclaim_row_is_whole(
    status text, attempt integer, deferrals integer, lease_owner text, lease_until timestamptz,
    next_attempt_at timestamptz, completed_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $whole$
BEGIN
    IF NOT coalesce(deferrals BETWEEN 0 AND attempt, false) THEN
        RETURN false;
    ELSIF status = 'processing' THEN
        RETURN attempt >= 1 AND lease_until IS NOT NULL AND lease_owner IS NOT NULL
               AND next_attempt_at IS NULL AND completed_at IS NULL;
    ELSIF status = 'failed' THEN
        RETURN attempt >= 1 AND next_attempt_at IS NOT NULL
               AND lease_until IS NULL AND completed_at IS NULL;
    ELSIF status IN ('done', 'dead') THEN
        RETURN attempt >= 1 AND completed_at IS NOT NULL
               AND lease_until IS NULL AND next_attempt_at IS NULL;
    END IF;
    RETURN false;
END
$whole$;

CREATE TABLE hookclaim_deliveries (
    source             text        NOT NULL,
    delivery_id        text        NOT NULL,
    -- Where the id came from: a header, the body, or the body's SHA-256 (the sender sent none).
    id_origin          text        NOT NULL DEFAULT 'header',
    status             text        NOT NULL,
    -- 1 at the first claim, one more at each takeover.
    attempt            integer     NOT NULL DEFAULT 1,
    -- Attempts a throttling downstream deferred (ProcessError::defer): they advance the attempt
    -- number, which fences, but not the count toward the attempt cap, attempt - deferrals.
    deferrals          integer     NOT NULL DEFAULT 0,
    -- The invocation that holds the claim, or last held it; finishing is fenced on it and on
    -- the attempt.
    lease_owner        text,
    lease_until        timestamptz,
    next_attempt_at    timestamptz,
    completed_at       timestamptz,
    last_error         text,
    -- What the delivery is re-driven and replayed from: the body exactly as signed (NULL once
    -- trimmed), its SHA-256, the kept headers and the event type.
    payload            bytea,
    payload_sha256     bytea       NOT NULL,
    headers            jsonb       NOT NULL DEFAULT '{}',
    event_type         text,
    payload_trimmed_at timestamptz,
    -- The key is kept to KEY_RETENTION_DAYS, past the payload's RETENTION_DAYS: the source's
    -- signatures do not expire, so only the remembered key refuses a replayed request.
    long_key_retention boolean     NOT NULL DEFAULT false,
    -- The source's replay guard: its signature covers neither the delivery id nor a checked
    -- timestamp, so the body's hash is a key too, for as long as the row is kept.
    replay_guard       boolean     NOT NULL DEFAULT false,
    received_at        timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT hookclaim_deliveries_pkey PRIMARY KEY (source, delivery_id),
    -- Every row is in one state of the state machine, whole (hookclaim_row_is_whole, above).
    CONSTRAINT hookclaim_row_state CHECK (
        hookclaim_row_is_whole(status, attempt, deferrals, lease_owner, lease_until,
                               next_attempt_at, completed_at))
);

-- The takeover rule: a row may be taken from its holder once its due time has passed,
-- `coalesce(lease_until, next_attempt_at) <= now()`. By the row's CHECK a processing row holds
-- only its lease's end, a failed row only its next attempt and a finished row neither, so that
-- one expression is the lease's end of a processing row and the next attempt of a failed one.
-- The claim, hookclaim_take_over and the reclaim all use it, and the reclaim's index is on it.
-- It is written out, not wrapped in a function or stored in a generated column: PostgreSQL
-- would read either again from the catalog for every statement that writes the table, a cost
-- every claim and finish would pay.

-- Every statement that names one delivery reaches it by the primary key whatever the
-- statistics say. The planner may use a partial index only where a statement's conditions imply
-- its predicate, and no such statement has a condition on the due time, the one expression the
-- due index's predicate is on; the other partial indexes hold done or dead rows, which a status
-- of processing or failed rules out. So the primary key (or a sequential scan, which costs more
-- than one key lookup at any size) is the only way in: a backlog the last ANALYZE did not see
-- cannot make a finish walk the waiting rows (docs/architecture.md, "Plans").

-- The replay guard (hookclaim_claim): a guarded source's body is stored once, whatever the
-- delivery id it came under. Only guarded rows are in it, so other sources' claims neither
-- write nor check it. Like the primary key, it leads with the source.
CREATE UNIQUE INDEX hookclaim_deliveries_guarded_body_idx
    ON hookclaim_deliveries (source, payload_sha256)
    WHERE replay_guard;
-- The body hashes are as good as distinct, and the planner is told so. Rows of one body (a
-- sender posting the same bytes under new ids) would otherwise lower ANALYZE's estimate of the
-- distinct hashes, price the claim's one plan for the guard's lookup above a plan for each
-- body, and have PL/pgSQL plan that lookup again at every guarded claim (about 40-80 us each).
ALTER TABLE hookclaim_deliveries ALTER COLUMN payload_sha256 SET (n_distinct = -1);

-- Purge (src/ledger/sql/purge.sql): finished rows of one key retention, oldest first. The done
-- payload trim and the purge and trim counts walk it too.
CREATE INDEX hookclaim_deliveries_finished_idx
    ON hookclaim_deliveries (long_key_retention, completed_at)
    WHERE status IN ('done', 'dead');

-- The reclaim (src/ledger/sql/reclaim.sql): expired leases and due retries in the order they
-- fell due. The key ends with the primary key's columns, so the reclaim resumes after the last
-- row it looked at: each next row costs one descent, whatever the backlog and the statistics.
CREATE INDEX hookclaim_deliveries_due_idx
    ON hookclaim_deliveries (coalesce(lease_until, next_attempt_at), source, delivery_id)
    WHERE coalesce(lease_until, next_attempt_at) IS NOT NULL;

-- The dead payload trim (src/ledger/sql/trim_dead.sql): dead rows that still hold a payload.
CREATE INDEX hookclaim_deliveries_dead_payloads_idx
    ON hookclaim_deliveries (completed_at)
    WHERE status = 'dead' AND payload IS NOT NULL;

-- Per-destination progress of a fanned-out delivery: one row for each destination that has
-- taken it, so a re-drive skips those. The rows go with their delivery (the cascade walks this
-- table's primary key, whose leading columns are the delivery's key).
CREATE TABLE hookclaim_destination_progress (
    source      text        NOT NULL,
    delivery_id text        NOT NULL,
    destination text        NOT NULL,
    -- The attempt that delivered it, and what the destination answered (a message id, an event
    -- id, an execution ARN, an HTTP status), for operators.
    attempt     integer     NOT NULL,
    detail      text,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT hookclaim_destination_progress_pkey PRIMARY KEY (source, delivery_id, destination),
    CONSTRAINT hookclaim_destination_progress_delivery_fkey FOREIGN KEY (source, delivery_id)
        REFERENCES hookclaim_deliveries (source, delivery_id) ON DELETE CASCADE
);

-- Refuses a call with SQLSTATE HC001 (hookclaim's own: an argument no caller should send), so
-- a bad argument is an error, never a row the retention function cannot re-drive.
CREATE FUNCTION hookclaim_refuse(p_function text, p_why text)
RETURNS void
LANGUAGE plpgsql AS $refuse$
BEGIN
    RAISE EXCEPTION '%: %', p_function, p_why USING ERRCODE = 'HC001';
END
$refuse$;

-- Takes the row of (p_source, p_delivery_id) over for p_owner, if it is due and no
-- other transaction holds it: the next attempt under a new lease. A row at the attempt cap
-- (counting its attempts but the deferred ones) is made dead instead: an expired lease because every attempt so far died before it could record
-- anything (a payload that kills the process), a failed row because the cap was lowered since
-- its last attempt. Never waits for a lock. Returns the row as it leaves it, or nothing. The
-- claim and the retention reclaim both take rows with it. The row is locked by its key alone
-- and checked here, so no partial index can be chosen to find it (see above).
CREATE FUNCTION hookclaim_take_over(
    p_source text, p_delivery_id text, p_owner text, p_lease_secs float8,
    p_max_attempts integer)
RETURNS SETOF hookclaim_deliveries
LANGUAGE plpgsql AS $take_over$
DECLARE
    d hookclaim_deliveries;
BEGIN
    -- A lease of 1 second to a day: NaN, which PostgreSQL orders above every number, and
    -- infinity fail the upper bound.
    IF num_nulls(p_owner, p_lease_secs, p_max_attempts) > 0
       OR NOT p_lease_secs BETWEEN 1 AND 86400 OR p_max_attempts < 1 THEN
        PERFORM hookclaim_refuse('hookclaim_take_over',
            'p_owner must be given, p_lease_secs from 1 to 86400 and p_max_attempts at least 1');
    END IF;
    SELECT * INTO d FROM hookclaim_deliveries
     WHERE source = p_source AND delivery_id = p_delivery_id
       FOR UPDATE SKIP LOCKED;
    IF NOT FOUND
       OR NOT coalesce(coalesce(d.lease_until, d.next_attempt_at) <= now(), false) THEN
        RETURN;
    END IF;
    IF d.attempt - d.deferrals >= p_max_attempts THEN
        RETURN QUERY
        UPDATE hookclaim_deliveries
           SET status = 'dead', lease_owner = p_owner, lease_until = NULL, next_attempt_at = NULL,
               completed_at = now(),
               last_error = CASE d.status
                   WHEN 'processing' THEN format('gave up after %s attempts: processing never '
                                                 'finished (the invocation died each time)',
                                                 d.attempt - d.deferrals)
                   ELSE format('gave up after %s attempts: %s', d.attempt - d.deferrals,
                               coalesce(d.last_error, 'no error recorded')) END,
               updated_at = now()
         WHERE source = p_source AND delivery_id = p_delivery_id
        RETURNING *;
    ELSE
        RETURN QUERY
        UPDATE hookclaim_deliveries
           SET status = 'processing', attempt = d.attempt + 1, lease_owner = p_owner,
               lease_until = now() + make_interval(secs => p_lease_secs), next_attempt_at = NULL,
               updated_at = now()
         WHERE source = p_source AND delivery_id = p_delivery_id
        RETURNING *;
    END IF;
END
$take_over$;

-- p_json as jsonb, or NULL where it is not JSON, so that the claim can refuse it as it refuses
-- its other arguments. The handler always sends an object; the block costs a subtransaction,
-- paid only by a claim that stores a row.
CREATE FUNCTION hookclaim_json_or_null(p_json text)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $json$
BEGIN
    RETURN p_json::jsonb;
EXCEPTION WHEN invalid_text_representation THEN
    RETURN NULL;
END
$json$;

-- The claim: one call. It answers whether this invocation now owns the delivery, and at which
-- attempt, or why not:
--   claimed      this invocation owns it at `attempt` (p_store_only stores a new one done); on
--                a takeover, same_payload says whether the stored body, the one to run, is
--                this request's
--   done / dead  a duplicate of a finished delivery; same_payload compares the payload hashes
--   in_progress  another invocation holds it: a committed processing row under a live lease
--   busy         another transaction is taking it over or finishing it right now
--   retry_later  it failed and its next attempt is due at retry_at
--   gave_up      it was due at the attempt cap: made dead, not taken
-- Every answer comes from committed rows. A new key is inserted at once: when a competing claim
-- has inserted the same key (or guarded body) and not yet committed, the INSERT waits for that
-- statement's transaction to end, then inserts (it rolled back) or reads the row it committed.
-- That wait is one claim statement long, bounded by the statement timeout; nothing here waits
-- for a holder's processing, since a claim commits before processing starts.
-- With p_replay_guard (the source's signature covers neither the id nor a checked timestamp),
-- the body is a key too: a body stored under another id is answered from that delivery's row,
-- whose id comes back in body_of, and is never run under this id; and a row is taken over only
-- by its own body. A duplicate of a finished delivery is answered from the reads alone, which
-- lock and write nothing. The headers come as JSON text, parsed only when a row is stored: most
-- calls are duplicates. The arguments are checked first (HC001 refuses them).
CREATE FUNCTION hookclaim_claim(
    p_source text, p_delivery_id text, p_owner text, p_lease_secs float8,
    p_payload bytea, p_payload_sha256 bytea, p_headers text, p_event_type text,
    p_id_origin text, p_store_only boolean, p_long_key_retention boolean,
    p_replay_guard boolean, p_max_attempts integer,
    OUT state text, OUT attempt integer, OUT same_payload boolean, OUT retry_at timestamptz,
    OUT body_of text)
LANGUAGE plpgsql AS $claim$
DECLARE
    d hookclaim_deliveries;
    headers jsonb;
BEGIN
    IF num_nulls(p_source, p_delivery_id, p_owner, p_lease_secs, p_payload, p_payload_sha256,
                 p_id_origin, p_store_only, p_long_key_retention, p_replay_guard,
                 p_max_attempts) > 0
       OR length(p_payload_sha256) <> 32 OR p_id_origin NOT IN ('header', 'body', 'body_sha256')
       OR NOT p_lease_secs BETWEEN 1 AND 86400 OR p_max_attempts < 1 THEN
        PERFORM hookclaim_refuse('hookclaim_claim',
            'every argument but p_event_type must be given, with a 32-byte SHA-256, an id '
            'origin of header, body or body_sha256, a lease of 1 to 86400 seconds and an '
            'attempt cap of at least 1');
    END IF;
    LOOP
        -- 1. Read the key; with the replay guard, if the key is new, the row holding this body.
        SELECT * INTO d FROM hookclaim_deliveries
         WHERE source = p_source AND delivery_id = p_delivery_id;
        IF NOT FOUND AND p_replay_guard THEN
            SELECT * INTO d FROM hookclaim_deliveries
             WHERE source = p_source AND payload_sha256 = p_payload_sha256 AND replay_guard;
        END IF;
        EXIT WHEN FOUND;
        -- 2. New: insert it. Of racing claimants the unique keys let one win; the others wait
        -- for its statement to commit or roll back, then read its row or insert their own.
        headers := hookclaim_json_or_null(p_headers);
        IF jsonb_typeof(headers) IS DISTINCT FROM 'object' THEN
            PERFORM hookclaim_refuse('hookclaim_claim', 'p_headers must be a JSON object');
        END IF;
        INSERT INTO hookclaim_deliveries
            (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until,
             completed_at, payload, payload_sha256, headers, event_type, long_key_retention,
             replay_guard)
        VALUES (p_source, p_delivery_id, p_id_origin,
                CASE WHEN p_store_only THEN 'done' ELSE 'processing' END, 1, p_owner,
                CASE WHEN NOT p_store_only THEN now() + make_interval(secs => p_lease_secs) END,
                CASE WHEN p_store_only THEN now() END, p_payload, p_payload_sha256,
                headers, p_event_type, p_long_key_retention, p_replay_guard)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            state := 'claimed'; attempt := 1; same_payload := true;
            RETURN;
        END IF;
        -- A row committed since the read holds the key or the body: read it again.
    END LOOP;
    attempt := d.attempt;
    same_payload := d.payload_sha256 = p_payload_sha256;
    body_of := nullif(d.delivery_id, p_delivery_id);
    -- 3. This owner's own earlier claim (a retry after its answer was lost) is still its own.
    IF d.lease_owner = p_owner AND d.status IN ('processing', 'done') AND body_of IS NULL THEN
        state := 'claimed';
    -- 4. A finished delivery: a duplicate, answered from the row.
    ELSIF d.status IN ('done', 'dead') THEN
        state := d.status;
    -- 5. An expired lease or a due retry: take it over (guarded: only under its own id, with its
    -- own body), unless another transaction holds the row now.
    ELSIF coalesce(d.lease_until, d.next_attempt_at) <= now()
          AND (NOT p_replay_guard OR same_payload AND body_of IS NULL) THEN
        SELECT CASE t.status WHEN 'dead' THEN 'gave_up' ELSE 'claimed' END, t.attempt
          INTO state, attempt
          FROM hookclaim_take_over(p_source, p_delivery_id, p_owner, p_lease_secs, p_max_attempts) t;
        state := coalesce(state, 'busy');
    -- 6. Otherwise it failed and is not due yet, is held under a live lease, or (guarded) is
    -- due but not this request's to take: an expired lease waits for the reclaim.
    ELSE
        state := CASE WHEN d.status = 'failed' THEN 'retry_later'
                      WHEN d.lease_until > now() THEN 'in_progress'
                      ELSE 'busy' END;
        retry_at := d.next_attempt_at;
    END IF;
END
$claim$;

-- The fenced finish: records attempt p_attempt's outcome only while p_owner still holds the row
-- at that attempt:
--   done      done;
--   dead      dead, with p_error;
--   failed    a counted failure: due again in p_retry_in_secs, or dead once the attempts so far
--             but the deferred ones reach p_max_attempts (not checked when it is not given);
--   deferred  a downstream's throttling: due again in p_retry_in_secs with one more deferral,
--             which the attempt cap does not count, or dead when that time would fall past the
--             delivery's age bound, p_max_age_secs from its first receipt.
-- Otherwise it fails with SQLSTATE HC002 (hookclaim's own: fenced), which inside the processing
-- transaction aborts it, so the COMMIT sent with it rolls the processor's writes back. Done and
-- dead are one UPDATE by the key; a failure reads the row's counts first. It returns the error
-- it recorded when it made a failure or deferral dead instead (the cap or the age bound), and
-- NULL otherwise: a scalar, which costs a call less than a row of OUT parameters.
CREATE FUNCTION hookclaim_finish(
    p_source text, p_delivery_id text, p_attempt integer, p_owner text, p_outcome text,
    p_error text DEFAULT NULL, p_retry_in_secs float8 DEFAULT NULL,
    p_max_attempts integer DEFAULT NULL, p_max_age_secs float8 DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $finish$
DECLARE
    outcome text;
    error text;
    d hookclaim_deliveries;
BEGIN
    -- Each outcome's arguments are checked in its own branch, so done, the common finish,
    -- evaluates the least; a bad call fails with HC001 (hookclaim_refuse).
    IF num_nulls(p_source, p_delivery_id, p_attempt, p_owner, p_outcome) > 0 THEN
        PERFORM hookclaim_refuse('hookclaim_finish',
                                 'the delivery, attempt, owner and outcome must be given');
    END IF;
    IF p_outcome IN ('done', 'dead') THEN
        IF num_nulls(p_retry_in_secs, p_max_attempts, p_max_age_secs) < 3 THEN
            PERFORM hookclaim_refuse('hookclaim_finish',
                'done and dead take no retry time, attempt cap or age bound');
        END IF;
        UPDATE hookclaim_deliveries
           SET status = p_outcome, lease_until = NULL, last_error = p_error,
               completed_at = now(), updated_at = now()
         WHERE source = p_source AND delivery_id = p_delivery_id AND attempt = p_attempt
           AND lease_owner = p_owner AND status = 'processing';
        outcome := p_outcome; error := p_error;
    ELSIF p_outcome IN ('failed', 'deferred') THEN
        -- NaN, which PostgreSQL orders above every number, fails the upper bounds.
        IF NOT coalesce(p_retry_in_secs BETWEEN 0 AND 31622400, false)
           OR (p_outcome = 'failed' AND (p_max_age_secs IS NOT NULL OR p_max_attempts < 1))
           OR (p_outcome = 'deferred'
               AND (p_max_attempts IS NOT NULL
                    OR NOT coalesce(p_max_age_secs BETWEEN 1 AND 31622400, false))) THEN
            PERFORM hookclaim_refuse('hookclaim_finish',
                'failed and deferred take a retry time of 0 to 31622400 seconds, failed an '
                'attempt cap of at least 1 if any, deferred an age bound of 1 to 31622400 '
                'seconds and no cap');
        END IF;
        SELECT * INTO d FROM hookclaim_deliveries
         WHERE source = p_source AND delivery_id = p_delivery_id AND attempt = p_attempt
           AND lease_owner = p_owner AND status = 'processing'
           FOR UPDATE;
        IF FOUND THEN
            IF p_outcome = 'failed' AND d.attempt - d.deferrals >= p_max_attempts THEN
                outcome := 'dead';
                error := format('gave up after %s attempts: %s', d.attempt - d.deferrals,
                                     p_error);
            ELSIF p_outcome = 'deferred'
                  AND now() + make_interval(secs => p_retry_in_secs)
                      > d.received_at + make_interval(secs => p_max_age_secs) THEN
                outcome := 'dead';
                error := format('gave up: deferred past the delivery''s age bound of %s '
                                     'seconds: %s', p_max_age_secs, p_error);
            ELSE
                outcome := 'failed'; error := p_error;
            END IF;
            UPDATE hookclaim_deliveries
               SET status = outcome, lease_until = NULL,
                   last_error = error,
                   deferrals = d.deferrals
                               + CASE WHEN p_outcome = 'deferred'
                                           AND outcome = 'failed' THEN 1
                                      ELSE 0 END,
                   completed_at = CASE WHEN outcome = 'dead' THEN now() END,
                   next_attempt_at = CASE WHEN outcome = 'failed'
                                          THEN now() + make_interval(secs => p_retry_in_secs)
                                     END,
                   updated_at = now()
             WHERE source = p_source AND delivery_id = p_delivery_id;
        END IF;
    ELSE
        PERFORM hookclaim_refuse('hookclaim_finish',
                                 'the outcome must be done, failed, deferred or dead');
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'hookclaim_finish: attempt % of %/% is no longer held by this owner',
                        p_attempt, p_source, p_delivery_id
              USING ERRCODE = 'HC002';
    END IF;
    RETURN CASE WHEN outcome = 'dead' AND p_outcome <> 'dead' THEN error END;
END
$finish$;

-- Where the next trim of done payloads starts (trim_done.sql and its count): the newest
-- completion among done rows of one key retention, older than p_older_than seconds, whose
-- payload is already dropped. Payloads are dropped oldest first, so those before it are gone
-- already (but for a row a concurrent trim held and then rolled back, which keeps its payload
-- until it is purged), and a trim reads about what it drops.
CREATE FUNCTION hookclaim_trimmed_up_to(p_long_key_retention boolean, p_older_than float8)
RETURNS timestamptz
LANGUAGE sql STABLE
RETURN coalesce((SELECT max(completed_at) FROM hookclaim_deliveries
                  WHERE status = 'done' AND long_key_retention = p_long_key_retention
                    AND payload IS NULL
                    AND completed_at < now() - make_interval(secs => p_older_than)),
                '-infinity');

-- The deliveries a bulk replay selects (replay_page.sql and its count): failed or dead ones of
-- one source, optionally of one event type and received in [p_after, p_before).
CREATE FUNCTION hookclaim_replay_selection(
    p_source text, p_event_type text, p_after timestamptz, p_before timestamptz)
RETURNS SETOF hookclaim_deliveries
LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT * FROM hookclaim_deliveries
     WHERE source = p_source AND status IN ('failed', 'dead')
       AND (p_event_type IS NULL OR event_type = p_event_type)
       AND (p_after IS NULL OR received_at >= p_after)
       AND (p_before IS NULL OR received_at < p_before);
END;
