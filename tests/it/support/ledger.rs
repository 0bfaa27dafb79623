//! Reading and arranging rows of the delivery ledger and of the licence example's table, as a
//! test needs them before and after the code under test runs.

use tokio_postgres::Client;

use super::count;

/// Ends `id`'s lease a second ago, as if its invocation had died.
pub async fn expire_lease(c: &Client, id: &str) {
    c.execute(
        "UPDATE hookclaim_deliveries SET lease_until = now() - interval '1 second'
          WHERE delivery_id = $1",
        &[&id],
    )
    .await
    .expect("expire lease");
}

/// Makes the failed delivery `id` due for its next attempt now, whatever its backoff was.
pub async fn make_due(c: &Client, id: &str) {
    c.execute(
        "UPDATE hookclaim_deliveries SET next_attempt_at = now() WHERE delivery_id = $1",
        &[&id],
    )
    .await
    .expect("make due");
}

/// The stored state of delivery `source`/`id`, which must exist.
pub async fn state(c: &Client, source: &str, id: &str) -> hookclaim::store::DeliveryState {
    hookclaim::store::state(c, source, id)
        .await
        .expect("read state")
        .unwrap_or_else(|| panic!("no delivery {source}/{id}"))
}

/// (status, attempt) of delivery `source`/`id`, which must exist.
pub async fn status(c: &Client, source: &str, id: &str) -> (String, i32) {
    let st = state(c, source, id).await;
    (st.status, st.attempt)
}

/// Whether delivery `source`/`id` has a row.
pub async fn exists(c: &Client, source: &str, id: &str) -> bool {
    hookclaim::store::state(c, source, id)
        .await
        .expect("read state")
        .is_some()
}

/// Number of licences the licence example issued, over all orders.
pub async fn licence_count(c: &Client) -> i64 {
    count(c, "SELECT count(*) FROM hookclaim_example_licences").await
}

/// Number of licences the licence example issued for `order`.
pub async fn licences(c: &Client, order: &str) -> i64 {
    c.query_one(
        "SELECT count(*) FROM hookclaim_example_licences WHERE order_id = $1",
        &[&order],
    )
    .await
    .expect("count licences")
    .get(0)
}

/// Asserts that every ledger row is one hookclaim's statements may write: a known status and id
/// origin, an attempt of at least 1, a lease on every processing row, a due time on every
/// failed row, and a stored answer only on a finished row, where it is the payload hash (and a
/// zero byte if dead) and the row has its `completed_at`. The schema does not check these on each write (a CHECK constraint is planned
/// again at every statement); the statements keep them, and this checks that they did.
pub async fn assert_rows_well_formed(c: &Client) {
    let bad = c
        .query(
            "SELECT source || '/' || delivery_id || ': ' || status || ', attempt ' || attempt
                    || ', origin ' || id_origin || ', lease ' || coalesce(lease_until::text, 'none')
                    || ', due ' || coalesce(next_attempt_at::text, 'none')
                    || ', answer ' || coalesce(encode(answer, 'hex'), 'none')
               FROM hookclaim_deliveries
              WHERE status NOT IN ('processing', 'done', 'failed', 'dead')
                 OR id_origin NOT IN ('header', 'body', 'body_sha256')
                 OR attempt < 1
                 OR (status = 'processing' AND lease_until IS NULL)
                 OR (status = 'failed' AND next_attempt_at IS NULL)
                 OR (answer IS NOT NULL AND NOT (
                        completed_at IS NOT NULL
                        AND ((status = 'done' AND answer = payload_sha256)
                             OR (status = 'dead' AND answer = payload_sha256 || '\\x00'::bytea))))
              LIMIT 20",
            &[],
        )
        .await
        .expect("check ledger rows");
    let bad: Vec<String> = bad.iter().map(|r| r.get(0)).collect();
    assert!(bad.is_empty(), "malformed ledger rows: {bad:#?}");
}
