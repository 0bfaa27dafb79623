//! Reading and arranging rows of the delivery ledger and of the licence example's table, as a
//! test needs them before and after the code under test runs.

use tokio_postgres::Client;

use super::count;

/// Claims a Stripe-like delivery (its id in the body, no replay guard) of `source` as webhook
/// invocation `owner` would: processing under a 60 s lease, with its payload.
pub async fn claim_as(
    c: &Client,
    source: &str,
    id: &str,
    body: &str,
    owner: &str,
) -> hookclaim::ledger::Claim {
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(body.as_bytes());
    let headers = std::collections::BTreeMap::from([(
        "stripe-signature".to_string(),
        "t=1,v1=ab".to_string(),
    )]);
    let new = hookclaim::ledger::NewDelivery {
        source,
        delivery_id: id,
        id_origin: hookclaim::verify::IdOrigin::Body,
        event_type: Some("checkout.session.completed"),
        payload: body.as_bytes(),
        payload_sha256: &hash,
        headers: &headers,
        long_key_retention: false,
        replay_guard: false,
    };
    let claimant = hookclaim::ledger::Claimant {
        owner,
        lease: std::time::Duration::from_secs(60),
        max_attempts: 5,
    };
    hookclaim::ledger::claim(c, &new, &claimant, false)
        .await
        .expect("claim")
}

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
pub async fn state(c: &Client, source: &str, id: &str) -> hookclaim::ledger::DeliveryState {
    hookclaim::ledger::state(c, source, id)
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
    hookclaim::ledger::state(c, source, id)
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

/// Asserts that every ledger row holds what the claim writes and the schema does not check: a
/// known id origin, a 32-byte payload hash, and a payload unless a trim recorded dropping it.
/// (The CHECK constraints keep the status, the attempt and each state's times.)
pub async fn assert_rows_well_formed(c: &Client) {
    let bad = c
        .query(
            "SELECT source || '/' || delivery_id || ': ' || status || ', origin ' || id_origin
                    || ', hash bytes ' || octet_length(payload_sha256)
                    || ', payload ' || (payload IS NOT NULL)
                    || ', trimmed ' || coalesce(payload_trimmed_at::text, 'no')
               FROM hookclaim_deliveries
              WHERE id_origin NOT IN ('header', 'body', 'body_sha256')
                 OR octet_length(payload_sha256) <> 32
                 OR (payload IS NULL) <> (payload_trimmed_at IS NOT NULL)
              LIMIT 20",
            &[],
        )
        .await
        .expect("check ledger rows");
    let bad: Vec<String> = bad.iter().map(|r| r.get(0)).collect();
    assert!(bad.is_empty(), "malformed ledger rows: {bad:#?}");
}
