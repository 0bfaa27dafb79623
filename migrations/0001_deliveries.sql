-- The delivery ledger: one row per (source, delivery id), the unique key that decides every claim.
CREATE TABLE hookclaim_deliveries (
    source          text        NOT NULL,
    delivery_id     text        NOT NULL,
    id_origin       text        NOT NULL DEFAULT 'header'
                    CHECK (id_origin IN ('header', 'body', 'body_sha256')),
    status          text        NOT NULL
                    CHECK (status IN ('processing', 'done', 'failed', 'dead')),
    attempt         integer     NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    -- The invocation that holds (or last held) the claim; finishing is fenced on it and attempt.
    lease_owner     text,
    lease_until     timestamptz,
    next_attempt_at timestamptz,
    event_type      text,
    payload         bytea,
    payload_sha256  bytea       NOT NULL,
    headers         jsonb       NOT NULL DEFAULT '{}',
    received_at     timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    payload_trimmed_at timestamptz,
    last_error      text,
    CONSTRAINT hookclaim_deliveries_pkey PRIMARY KEY (source, delivery_id),
    CONSTRAINT hookclaim_processing_has_lease
        CHECK (status <> 'processing' OR lease_until IS NOT NULL),
    CONSTRAINT hookclaim_failed_has_next_attempt
        CHECK (status <> 'failed' OR next_attempt_at IS NOT NULL)
);

-- Purge and trim walk finished rows by age.
CREATE INDEX hookclaim_deliveries_finished_idx
    ON hookclaim_deliveries (completed_at)
    WHERE status IN ('done', 'dead');

-- Reclaim finds expired leases and due retries; partial indexes stay as small as the backlog.
CREATE INDEX hookclaim_deliveries_leases_idx
    ON hookclaim_deliveries (lease_until)
    WHERE status = 'processing';

CREATE INDEX hookclaim_deliveries_retries_idx
    ON hookclaim_deliveries (next_attempt_at)
    WHERE status = 'failed';

-- Trim walks done rows that still hold a payload, oldest first; trimmed rows drop out of it.
CREATE INDEX hookclaim_deliveries_trimmable_idx
    ON hookclaim_deliveries (completed_at)
    WHERE status = 'done' AND payload IS NOT NULL;
