-- The claim binds six parameters instead of twelve, and answers in one text column.
--
-- PostgreSQL's work per execution grows with every parameter it binds (a catalog lookup and an
-- input function each, whether or not the statement uses the value) and with every expression
-- node it sets up. A duplicate of a finished delivery is answered from one index lookup, so for
-- it these were most of the cost (BENCHMARKS.md, instruction counts per statement). Most of the
-- values belong to a new row only: its id origin, whether it is stored as done at once, the
-- lease, the event type, the kept headers, the attempt cap and the key retention. They now
-- arrive as one text, a literal of the composite type below, which only the claim function
-- reads. The statement itself (src/store.rs, CLAIM) binds the key, the payload, its hash, the
-- owner and that text.
--
-- Functions of earlier migrations stay: hookclaim_claim (migration 5) is the general claim this
-- function hands keys to, and hookclaim_claim_unfinished (migration 6) is what binaries of the
-- previous release call until they are replaced.
CREATE TYPE hookclaim_new_row AS (
    id_origin    text,
    finish_now   boolean,
    lease_secs   float8,
    event_type   text,
    headers      jsonb,
    max_attempts integer,
    long_key     boolean
);

-- Claims a key that the statement did not answer from a finished row of another owner:
-- 1. It inserts first. If it inserted, this caller is the only winner: claimed at attempt 1.
-- 2. Otherwise (a lease, a retry, a takeover, this owner's own earlier try, or a row committed
--    since the statement's read) it calls hookclaim_claim,
--    which reads the row afresh and, unless it is finished, runs the general claim statement:
--    the unique key decides, and the attempt cap is enforced there.
--
-- The answer is one word, with an argument where one is needed (src/store.rs, Claim::parse):
--   claimed <attempt> | gave_up | in_progress | retry_at <epoch seconds> |
--   done | dead | done payload_differs | dead payload_differs
CREATE FUNCTION hookclaim_claim_key(
    p_source text, p_delivery_id text, p_payload bytea, p_payload_sha256 bytea, p_owner text,
    p_row text)
RETURNS text
LANGUAGE plpgsql
AS $claim$
DECLARE
    n hookclaim_new_row := p_row::hookclaim_new_row;
    c record;
BEGIN
    INSERT INTO hookclaim_deliveries
        (source, delivery_id, id_origin, status, attempt, lease_owner, lease_until,
         event_type, payload, payload_sha256, headers, completed_at, key_outlives_payload)
    VALUES (p_source, p_delivery_id, n.id_origin,
            CASE WHEN n.finish_now THEN 'done' ELSE 'processing' END, 1, p_owner,
            CASE WHEN n.finish_now THEN NULL
                 ELSE now() + make_interval(secs => n.lease_secs) END,
            n.event_type, p_payload, p_payload_sha256, n.headers,
            CASE WHEN n.finish_now THEN now() END, n.long_key)
    ON CONFLICT (source, delivery_id) DO NOTHING;
    IF FOUND THEN
        RETURN 'claimed 1';
    END IF;
    SELECT k.state, k.attempt, k.payload_sha256, k.next_attempt_at INTO c
      FROM hookclaim_claim(p_source, p_delivery_id, n.id_origin, n.finish_now, p_owner,
                           n.lease_secs, n.event_type, p_payload, p_payload_sha256,
                           n.headers, n.max_attempts, n.long_key) AS k;
    -- No answer: a claimant committed after the general statement's snapshot. A failed row
    -- always has its due time; one without (written by hand) is answered as busy.
    RETURN CASE
        WHEN c.state = 'claimed' THEN 'claimed ' || c.attempt
        WHEN c.state = 'failed' AND c.next_attempt_at IS NOT NULL
            THEN 'retry_at ' || extract(epoch FROM c.next_attempt_at)
        WHEN c.state IN ('done', 'dead') AND c.payload_sha256 = p_payload_sha256 THEN c.state
        WHEN c.state IN ('done', 'dead') THEN c.state || ' payload_differs'
        WHEN c.state = 'gave_up' THEN 'gave_up'
        ELSE 'in_progress'
    END;
END
$claim$;
