-- The claim's read moves out of the function into the statement that calls it (src/store.rs,
-- CLAIM), so a duplicate of a finished delivery is answered by one index lookup in plain SQL and
-- never enters PL/pgSQL: the function call, its own executor and the returned composite were
-- most of what a duplicate still cost above the bare dedupe insert (BENCHMARKS.md).
--
-- This function runs only when that read found no finished row:
-- 1. It inserts first. If it inserted, this caller is the only winner: claimed at attempt 1.
--    (Inserting first also skips a second lookup of a key the statement already found missing.)
-- 2. Otherwise (a lease, a retry, a takeover, or a row committed since the caller's read) it
--    calls hookclaim_claim (migration 5), which reads the row afresh and, unless it is finished,
--    runs the general claim statement: the unique key decides, and the attempt cap is enforced
--    there. One definition of that statement serves both functions.
-- Its answer always has a state: 'in_progress' when hookclaim_claim answers nothing (a claimant
-- committed after its general statement's snapshot).
--
-- It returns a named composite type rather than OUT parameters: PostgreSQL builds the row type
-- of OUT parameters again at every call, and finds a named type in its cache.
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
    SELECT c.state, c.attempt, c.payload_sha256, c.next_attempt_at
      INTO answer.state, answer.attempt, answer.payload_sha256, answer.next_attempt_at
      FROM hookclaim_claim(p_source, p_delivery_id, p_id_origin, p_finish_now, p_owner,
                           p_lease_secs, p_event_type, p_payload, p_payload_sha256, p_headers,
                           p_max_attempts, p_long_key) AS c;
    answer.state := coalesce(answer.state, 'in_progress');
    RETURN answer;
END
$claim$;
