-- A redelivery that takes over a due retry: client :client_id takes the due rows from the
-- newest down, every :clients-th one, so no two clients name the same row; it claims attempt 2
-- and finishes it done (benches/recovery.py appends the claim and the finish). A row that was
-- not taken over fails the finish (HC002), and with it the run.
\set k :client_id + :clients * :n
\set n :n + 1
\set id :due_base + :due_top - :k
\set attempt 2
