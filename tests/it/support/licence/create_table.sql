-- The example processor's own table: one licence per order, and the delivery that issued it.
CREATE TABLE IF NOT EXISTS hookclaim_example_licences (
    order_id     text PRIMARY KEY,
    licence_key  text NOT NULL UNIQUE,
    source       text NOT NULL,
    delivery_id  text NOT NULL,
    issued_at    timestamptz NOT NULL DEFAULT now()
)
