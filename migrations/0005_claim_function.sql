-- The claim as a function: one statement and one round trip, as before, but a duplicate of a
-- finished delivery and a new delivery no longer pay for the general statement. Measured with
-- pgbench against the bare dedupe insert (BENCHMARKS.md): the general statement's executor
-- start-up (it opens every index of the table and builds the ON CONFLICT projection whether or
-- not a row reaches it) was most of what a duplicate cost.
--
-- Three paths, each taken only when its answer is certain:
-- 1. No row: a plain INSERT … ON CONFLICT DO NOTHING. If it inserted, this caller is the only
--    winner: claimed at attempt 1. If a concurrent claimant inserted first, path 3 decides.
-- 2. A done or dead row: answered from the read, which locks and writes nothing (a same-owner
--    retry of a store-only claim is recognised as its own, as path 3 would).
-- 3. Anything else (a lease, a retry, a takeover, a lost race): the general claim statement,
--    which decides by the unique key exactly as before and enforces the attempt cap.
--
-- Each statement in a PL/pgSQL function takes its own snapshot, so path 3 sees a row that a
-- concurrent claimant committed after path 1's read. The takeover condition and the attempt
-- cap are the same as in src/store.rs (RECLAIM_NEXT); the claim tests run every path.
CREATE FUNCTION hookclaim_claim(
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
             event_type, payload, payload_sha256, headers, completed_at, key_outlives_payload)
        VALUES (p_source, p_delivery_id, p_id_origin,
                CASE WHEN p_finish_now THEN 'done' ELSE 'processing' END, 1, p_owner,
                CASE WHEN p_finish_now THEN NULL
                     ELSE now() + make_interval(secs => p_lease_secs) END,
                p_event_type, p_payload, p_payload_sha256, p_headers,
                CASE WHEN p_finish_now THEN now() END, p_long_key)
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
                 event_type, payload, payload_sha256, headers, completed_at, key_outlives_payload)
            SELECT p_source, p_delivery_id, p_id_origin,
                   CASE WHEN p_finish_now THEN 'done' ELSE 'processing' END, 1, p_owner,
                   CASE WHEN p_finish_now THEN NULL ELSE now() + make_interval(secs => p_lease_secs) END,
                   p_event_type, p_payload, p_payload_sha256, p_headers,
                   CASE WHEN p_finish_now THEN now() END, p_long_key
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
