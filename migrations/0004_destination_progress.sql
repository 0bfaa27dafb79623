-- Per-destination progress of a fanned-out delivery: one row for each destination that has
-- taken the delivery. A re-drive skips the destinations recorded here, so a crash after
-- destination 1 of 3 never sends to destination 1 again.
--
-- The rows belong to their delivery: purging the delivery deletes them in the same statement
-- (the foreign key's cascade walks this table's primary key, whose leading columns are the
-- delivery's key).
CREATE TABLE hookclaim_destination_progress (
    source      text        NOT NULL,
    delivery_id text        NOT NULL,
    destination text        NOT NULL,
    -- The attempt that delivered it, and what the destination answered (a message id, an
    -- event id, an execution ARN, an HTTP status), for operators.
    attempt     integer     NOT NULL,
    detail      text,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT hookclaim_destination_progress_pkey PRIMARY KEY (source, delivery_id, destination),
    CONSTRAINT hookclaim_destination_progress_delivery_fkey FOREIGN KEY (source, delivery_id)
        REFERENCES hookclaim_deliveries (source, delivery_id) ON DELETE CASCADE
);
