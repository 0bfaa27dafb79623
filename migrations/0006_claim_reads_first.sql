-- The claim's read moves out of the function into the statement that calls it (src/store.rs,
-- CLAIM), so a duplicate of a finished delivery is answered by one index lookup in plain SQL and
-- never enters PL/pgSQL: the function call, its own executor and the returned composite were
-- most of what a duplicate still cost above the bare dedupe insert (BENCHMARKS.md).
--
-- This function runs only when that read found no finished row:
-- 1. It inserts first. If it inserted, this caller is the only winner: claimed at attempt 1.
--    (Inserting first also skips a second lookup of a key the statement already found missing.)
-- 2. Otherwise (a lease, a retry, a takeover, or a row committed since the caller's read) the
--    general claim statement decides by the unique key exactly as in migration 5, and enforces
--    the attempt cap. It takes a new snapshot, so it sees a concurrent claimant's commit.
-- Its answer always has a state: 'in_progress' when the general statement finds the row held by
-- a claimant that committed after its snapshot.
--
-- It returns a named composite type rather than OUT parameters: PostgreSQL builds the row type
-- of OUT parameters again at every call, and finds a named type in its cache.
--
-- hookclaim_claim (migration 5) stays for environments of the previous release that are still
-- warm when this migration runs; nothing in this release calls it.
CREATE TYPE hookclaim_claim_answer AS (
    state           text,
    attempt         integer,
    payload_sha256  bytea,
    next_attempt_at timestamptz
);

CREATE FUNCTION hookclaim_claim_unfinished(
    p_source text, p_delivery_id text, p_id_origin text, p_finish_now boolean, p_owner text,
    p_lease_secs float8, p_event_type text, p_payload bytea, p_payload_sha256 bytea,
    p_headers jsonb, p_max_attempts integer, p_long_key boolean)
RETURNS hookclaim_claim_answer
LANGUAGE plpgsql
AS $claim$
#variable_conflict use_column
DECLARE
    answer hookclaim_claim_answer;
BEGIN
    INSERT INTO hookclaim_deliveries
        (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until,
         event_type, payload, payload_sha256, headers, completed_at, key_outlives_payload)
    VALUES (p_source, p_delivery_id, p_id_origin,
            CASE WHEN p_finish_now THEN 'done' ELSE 'processing' END, 1, p_owner,
            CASE WHEN p_finish_now THEN NULL
                 ELSE now() + make_interval(secs => p_lease_secs) END,
            p_event_type, p_payload, p_payload_sha256, p_headers,
            CASE WHEN p_finish_now THEN now() END, p_long_key)
    ON CONFLICT (source, delivery_id) DO NOTHING;
    IF FOUND THEN
        answer.state := 'claimed';
        answer.attempt := 1;
        answer.payload_sha256 := p_payload_sha256;
        RETURN answer;
    END IF;
    WITH found AS (
        SELECT status, attempt, lease_owner, lease_until, next_attempt_at, payload_sha256
          FROM hookclaim_deliveries
         WHERE source = p_source AND delivery_id = p_delivery_id
    ),
    claimed AS (
        INSERT INTO hookclaim_deliveries AS d
            (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until,
             event_type, payload, payload_sha256, headers, completed_at, key_outlives_payload)
        SELECT p_source, p_delivery_id, p_id_origin,
               CASE WHEN p_finish_now THEN 'done' ELSE 'processing' END, 1, p_owner,
               CASE WHEN p_finish_now THEN NULL ELSE now() + make_interval(secs => p_lease_secs) END,
               p_event_type, p_payload, p_payload_sha256, p_headers,
               CASE WHEN p_finish_now THEN now() END, p_long_key
         WHERE NOT EXISTS (SELECT 1 FROM found)
            OR EXISTS (SELECT 1 FROM found AS f
                        WHERE (f.status = 'processing' AND f.lease_until <= now())
                           OR (f.status = 'failed' AND f.next_attempt_at <= now()))
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
                updated_at = now()
            WHERE (d.status = 'processing' AND d.lease_until <= now())
               OR (d.status = 'failed' AND d.next_attempt_at <= now())
        RETURNING d.attempt, d.payload_sha256, d.status
    ),
    decided AS (
        SELECT CASE WHEN status = 'dead' THEN 'gave_up' ELSE 'claimed' END AS state, attempt,
               payload_sha256, NULL::timestamptz AS next_attempt_at
          FROM claimed
        UNION ALL
        SELECT CASE WHEN (f.status = 'processing' AND f.lease_until <= now())
                          OR (f.status = 'failed' AND f.next_attempt_at <= now()) THEN 'in_progress'
                    WHEN f.lease_owner = p_owner AND f.status IN ('processing', 'done') THEN 'claimed'
                    ELSE f.status END,
               f.attempt, f.payload_sha256, f.next_attempt_at
          FROM found AS f
         WHERE NOT EXISTS (SELECT 1 FROM claimed)
    )
    SELECT decided.state, decided.attempt, decided.payload_sha256, decided.next_attempt_at
      INTO answer.state, answer.attempt, answer.payload_sha256, answer.next_attempt_at
      FROM decided;
    answer.state := coalesce(answer.state, 'in_progress');
    RETURN answer;
END
$claim$;
