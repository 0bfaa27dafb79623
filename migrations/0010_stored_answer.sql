-- A finished row stores its answer to a duplicate, so the claim answers one by reading a column.
--
-- Every condition or expression in a statement costs PostgreSQL a function lookup and a
-- permission check at each execution, whether or not it runs, and every bound parameter costs
-- a lookup and an input function. On a duplicate of a finished delivery, the claim's read was
-- all of that and one index lookup: its status test, its hash comparison and the answer it built
-- from them were a fifth of its instructions (BENCHMARKS.md, "The stored answer"). Now:
--
-- * `answer` is the payload's SHA-256 on a done row, the same followed by one zero byte on a
--   dead row, and NULL on any other. The statements that finish a row set it; those that reopen
--   one clear it (src/store.rs: FINISH_DONE, FINISH_DEAD, FINISH_FAILED, TAKE_ONE,
--   RECLAIM_NEXT; hookclaim_claim below). The claim returns it as it is and the client compares
--   the hash (src/store.rs, Claim::parse).
-- * The read trusts `answer` only on a row that has `completed_at`, which every release's
--   finishing statements set and every release's reopening statements clear. So a row reopened
--   by an older binary during a rolling deploy (an operator's forced replay) is read as
--   unfinished, whatever its stale answer says, until it is finished again.
-- * A NULL answer (a row finished by an older binary, or before this migration) is not an
--   answer: the claim calls the function below, which reads the row's status as before. Such
--   rows cost a duplicate more until they are purged, and are never answered wrongly.
--
-- Adding a column without a default only changes the catalog: no rewrite, a brief lock.
ALTER TABLE hookclaim_deliveries ADD COLUMN answer bytea;

-- What the function needs besides the key and the payload, as one literal (src/store.rs,
-- new_row_literal): the owner and the payload hash, which the read no longer binds on a first
-- try, and the values only a new row needs, as in migration 8's hookclaim_new_row.
CREATE TYPE hookclaim_new_claim AS (
    owner          text,
    payload_sha256 bytea,
    id_origin      text,
    finish_now     boolean,
    lease_secs     float8,
    event_type     text,
    headers        jsonb,
    max_attempts   integer,
    long_key       boolean
);

-- Claims a key whose row the statement could not answer from its stored answer, exactly as
-- hookclaim_claim_key (migration 8) does, answering in the claim's bytes:
-- 1. It inserts first. If it inserted, this caller is the only winner: claimed at attempt 1.
--    A store-only claim inserts the row done, with its answer.
-- 2. Otherwise it calls hookclaim_claim, which reads the row afresh and, unless it is finished,
--    runs the general claim statement: the unique key decides, and the attempt cap is enforced
--    there.
--
-- The answer (src/store.rs, Claim::parse) is a finished row's answer, as stored, or one ASCII
-- word, with an argument where one is needed, always shorter than a hash:
--   claimed <attempt> | gave_up | in_progress | retry_at <epoch seconds>
CREATE FUNCTION hookclaim_claim_unanswered(
    p_source text, p_delivery_id text, p_payload bytea, p_claim text)
RETURNS bytea
LANGUAGE plpgsql
AS $claim$
DECLARE
    n hookclaim_new_claim := p_claim::hookclaim_new_claim;
    c record;
BEGIN
    INSERT INTO hookclaim_deliveries
        (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until,
         event_type, payload, payload_sha256, headers, completed_at, key_outlives_payload,
         answer)
    VALUES (p_source, p_delivery_id, n.id_origin,
            CASE WHEN n.finish_now THEN 'done' ELSE 'processing' END, 1, n.owner,
            CASE WHEN n.finish_now THEN NULL
                 ELSE now() + make_interval(secs => n.lease_secs) END,
            n.event_type, p_payload, n.payload_sha256, n.headers,
            CASE WHEN n.finish_now THEN now() END, n.long_key,
            CASE WHEN n.finish_now THEN n.payload_sha256 END)
    ON CONFLICT (source, delivery_id) DO NOTHING;
    IF FOUND THEN
        RETURN convert_to('claimed 1', 'UTF8');
    END IF;
    SELECT k.state, k.attempt, k.payload_sha256, k.next_attempt_at INTO c
      FROM hookclaim_claim(p_source, p_delivery_id, n.id_origin, n.finish_now, n.owner,
                           n.lease_secs, n.event_type, p_payload, n.payload_sha256,
                           n.headers, n.max_attempts, n.long_key) AS k;
    -- No answer: a claimant committed after the general statement's snapshot. A failed row
    -- always has its due time; one without (written by hand) is answered as busy.
    RETURN CASE
        WHEN c.state = 'claimed' THEN convert_to('claimed ' || c.attempt, 'UTF8')
        WHEN c.state = 'failed' AND c.next_attempt_at IS NOT NULL
            THEN convert_to('retry_at ' || extract(epoch FROM c.next_attempt_at), 'UTF8')
        WHEN c.state = 'done' THEN c.payload_sha256
        WHEN c.state = 'dead' THEN c.payload_sha256 || E'\\x00'::bytea
        WHEN c.state = 'gave_up' THEN convert_to('gave_up', 'UTF8')
        ELSE convert_to('in_progress', 'UTF8')
    END;
END
$claim$;

-- The general claim of migration 5, unchanged but for the answer: a row it inserts done (a
-- store-only claim) gets its answer, a row it makes dead at the attempt cap gets its answer, and
-- a row it takes over has none. Older binaries call it too, so their claims keep the answer in
-- step as well.
CREATE OR REPLACE FUNCTION hookclaim_claim(
    p_source text, p_delivery_id text, p_id_origin text, p_finish_now boolean, p_owner text,
    p_lease_secs float8, p_event_type text, p_payload bytea, p_payload_sha256 bytea,
    p_headers jsonb, p_max_attempts integer, p_long_key boolean)
RETURNS TABLE (state text, attempt integer, payload_sha256 bytea, next_attempt_at timestamptz)
LANGUAGE plpgsql
AS $claim$
#variable_conflict use_column
DECLARE
    existing record;
BEGIN
    SELECT d.status, d.attempt, d.lease_owner, d.payload_sha256, d.next_attempt_at INTO existing
      FROM hookclaim_deliveries AS d
     WHERE d.source = p_source AND d.delivery_id = p_delivery_id;
    IF NOT FOUND THEN
        INSERT INTO hookclaim_deliveries
            (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until,
             event_type, payload, payload_sha256, headers, completed_at, key_outlives_payload,
             answer)
        VALUES (p_source, p_delivery_id, p_id_origin,
                CASE WHEN p_finish_now THEN 'done' ELSE 'processing' END, 1, p_owner,
                CASE WHEN p_finish_now THEN NULL
                     ELSE now() + make_interval(secs => p_lease_secs) END,
                p_event_type, p_payload, p_payload_sha256, p_headers,
                CASE WHEN p_finish_now THEN now() END, p_long_key,
                CASE WHEN p_finish_now THEN p_payload_sha256 END)
        ON CONFLICT (source, delivery_id) DO NOTHING;
        IF FOUND THEN
            RETURN QUERY SELECT 'claimed'::text, 1, p_payload_sha256, NULL::timestamptz;
            RETURN;
        END IF;
    ELSIF existing.status IN ('done', 'dead') THEN
        RETURN QUERY SELECT CASE WHEN existing.lease_owner = p_owner AND existing.status = 'done'
                                 THEN 'claimed' ELSE existing.status END,
                            existing.attempt, existing.payload_sha256, existing.next_attempt_at;
        RETURN;
    END IF;
    RETURN QUERY
        WITH found AS (
            SELECT status, attempt, lease_owner, lease_until, next_attempt_at, payload_sha256
              FROM hookclaim_deliveries
             WHERE source = p_source AND delivery_id = p_delivery_id
        ),
        claimed AS (
            INSERT INTO hookclaim_deliveries AS d
                (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until,
                 event_type, payload, payload_sha256, headers, completed_at, key_outlives_payload,
                 answer)
            SELECT p_source, p_delivery_id, p_id_origin,
                   CASE WHEN p_finish_now THEN 'done' ELSE 'processing' END, 1, p_owner,
                   CASE WHEN p_finish_now THEN NULL ELSE now() + make_interval(secs => p_lease_secs) END,
                   p_event_type, p_payload, p_payload_sha256, p_headers,
                   CASE WHEN p_finish_now THEN now() END, p_long_key,
                   CASE WHEN p_finish_now THEN p_payload_sha256 END
             WHERE NOT EXISTS (SELECT 1 FROM found)
                OR EXISTS (SELECT 1 FROM found AS f WHERE ((f.status = 'processing' AND f.lease_until <= now())
                                                   OR (f.status = 'failed' AND f.next_attempt_at <= now())))
            ON CONFLICT (source, delivery_id) DO UPDATE
                SET status = CASE WHEN (d.status = 'processing' AND d.attempt >= p_max_attempts)
                                   THEN 'dead' ELSE EXCLUDED.status END,
                    attempt = CASE WHEN (d.status = 'processing' AND d.attempt >= p_max_attempts)
                                   THEN d.attempt ELSE d.attempt + 1 END,
                    lease_owner = EXCLUDED.lease_owner,
                    lease_until = CASE WHEN (d.status = 'processing' AND d.attempt >= p_max_attempts)
                                   THEN NULL ELSE EXCLUDED.lease_until END,
                    next_attempt_at = NULL,
                    last_error = CASE WHEN (d.status = 'processing' AND d.attempt >= p_max_attempts)
                                   THEN 'gave up after ' || d.attempt
                                        || ' attempts: processing never finished (the invocation died each time)'
                                   ELSE d.last_error END,
                    completed_at = CASE WHEN (d.status = 'processing' AND d.attempt >= p_max_attempts)
                                   THEN now() ELSE EXCLUDED.completed_at END,
                    answer = CASE WHEN (d.status = 'processing' AND d.attempt >= p_max_attempts)
                                   THEN d.payload_sha256 || E'\\x00'::bytea
                                   WHEN p_finish_now THEN d.payload_sha256 END,
                    updated_at = now()
                WHERE ((d.status = 'processing' AND d.lease_until <= now())
                       OR (d.status = 'failed' AND d.next_attempt_at <= now()))
            RETURNING d.attempt, d.payload_sha256, d.status
        )
        SELECT CASE WHEN status = 'dead' THEN 'gave_up' ELSE 'claimed' END AS state, attempt,
               payload_sha256, NULL::timestamptz AS next_attempt_at
          FROM claimed
        UNION ALL
        SELECT CASE WHEN ((f.status = 'processing' AND f.lease_until <= now())
                                                   OR (f.status = 'failed' AND f.next_attempt_at <= now())) THEN 'in_progress'
                    WHEN f.lease_owner = p_owner AND f.status IN ('processing', 'done') THEN 'claimed'
                    ELSE f.status END,
               f.attempt, f.payload_sha256, f.next_attempt_at
          FROM found AS f
         WHERE NOT EXISTS (SELECT 1 FROM claimed);
END
$claim$;
