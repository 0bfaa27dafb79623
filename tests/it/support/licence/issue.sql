-- Issues licence $2 for order $1, from delivery $3/$4; an order already issued keeps its own.
INSERT INTO hookclaim_example_licences (order_id, licence_key, source, delivery_id)
VALUES ($1, $2, $3, $4)
    ON CONFLICT (order_id) DO NOTHING
