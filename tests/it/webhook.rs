//! The webhook function's handler against a real PostgreSQL: every row of the response table
//! in all three event formats, the committed sample events, and the exactly-once effect.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use crate::support::licences::Licences;
use hookclaim::ledger::{self, Claimant, NewDelivery};
use hookclaim::processor::StoreOnly;
use support::ledger::{licence_count, state};
use support::scripted::Scripted;
use support::{answer, delivery_count, event, github_request, row, Format, TestDb};

const FORMATS: [Format; 3] = [Format::HttpApiV2, Format::RestV1, Format::FunctionUrl];

async fn effects(c: &tokio_postgres::Client) -> i64 {
    c.query_one("SELECT count(*) FROM effects", &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or(0)
}

#[tokio::test]
async fn new_delivery_is_processed_with_200_and_stored_done_in_every_format() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let c = db.client().await;
    for format in FORMATS {
        for base64 in [false, true] {
            let id = format!("new-{format:?}-{base64}");
            let body = format!(r#"{{"zen":"Keep it logically awesome.","id":"{id}"}}"#);
            let resp = hook
                .handle(github_request(format, &id, body.as_bytes(), base64))
                .await;
            let (status, json) = answer(&resp);
            assert_eq!(status, 200, "{format:?} base64={base64}: {json}");
            assert_eq!(json["status"], "processed");
            assert_eq!(json["delivery_id"], id.as_str());
            assert_eq!(row(&c, "github", &id).await.unwrap().0, "done");
            // The stored payload is the exact signed bytes, decoded from base64 where needed.
            let stored: Vec<u8> = c
                .query_one(
                    "SELECT payload FROM hookclaim_deliveries WHERE delivery_id = $1",
                    &[&id],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(stored, body.as_bytes());
        }
    }
}

#[tokio::test]
async fn duplicate_of_a_finished_delivery_answers_200_duplicate_and_stores_nothing_new() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let c = db.client().await;
    for format in FORMATS {
        let id = format!("dup-{format:?}");
        let body = format!(r#"{{"action":"opened","number":"{id}"}}"#);
        let body = body.as_bytes();
        hook.handle(github_request(format, &id, body, false)).await;
        let before = delivery_count(&c).await;

        let (status, json) = answer(&hook.handle(github_request(format, &id, body, true)).await);

        assert_eq!(
            (status, json["status"].as_str()),
            (200, Some("duplicate")),
            "{format:?}"
        );
        assert_eq!(delivery_count(&c).await, before);
        assert_eq!(
            row(&c, "github", &id).await.unwrap().1,
            1,
            "attempt unchanged"
        );
    }
}

#[tokio::test]
async fn duplicate_while_another_invocation_holds_the_claim_answers_202() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], Licences).await;
    let c = db.client().await;
    for format in FORMATS {
        let id = format!("busy-{format:?}");
        let body = format!(r#"{{"order_id":"o-busy-{format:?}"}}"#);
        let body = body.as_bytes();
        let hash = sha2_256(body);
        let headers = Default::default();
        // Another environment claimed it a moment ago and is still processing.
        ledger::claim(
            &c,
            &NewDelivery {
                source: "github",
                delivery_id: &id,
                id_origin: hookclaim::verify::IdOrigin::Header,
                event_type: Some("push"),
                payload: body,
                payload_sha256: &hash,
                headers: &headers,
                long_key_retention: true,
                replay_guard: true,
            },
            &Claimant {
                owner: "someone-else",
                lease: Duration::from_secs(60),
                max_attempts: 5,
            },
            false,
        )
        .await
        .unwrap();

        let (status, json) = answer(&hook.handle(github_request(format, &id, body, false)).await);

        assert_eq!(
            (status, json["status"].as_str()),
            (202, Some("in_progress")),
            "{format:?}"
        );
        assert_eq!(row(&c, "github", &id).await.unwrap().0, "processing");
    }
}

/// A Stripe delivery (no replay guard: its id is in the signed body) of `body`, signed when the
/// sample events were.
fn stripe_request(body: &str) -> lambda_http::Request {
    let t = support::EVENTS_SIGNED_AT + 60;
    let sig = support::stripe_signature(support::STRIPE_SECRET, t, body.as_bytes());
    support::request(
        Format::HttpApiV2,
        "POST",
        "stripe",
        &[
            ("content-type", "application/json"),
            ("stripe-signature", &sig),
        ],
        body.as_bytes(),
        false,
    )
}

#[tokio::test]
async fn a_takeover_by_a_request_with_another_body_runs_the_stored_body() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[("RETRY_BASE_SECS", "0")], Scripted).await;
    let c = db.client().await;
    // The first body fails once and is due again at once; the second, under the same id, would
    // end the delivery dead if it ran.
    let stored = r#"{"id":"evt_two_bodies","type":"t","behaviour":"retry-once"}"#;
    let other = r#"{"id":"evt_two_bodies","type":"t","behaviour":"permanent"}"#;
    let (status, _) = answer(&hook.handle(stripe_request(stored)).await);
    assert_eq!(status, 503);

    let (status, json) = answer(&hook.handle(stripe_request(other)).await);

    // The stored body ran (its second attempt succeeds); the other body was not stored either.
    assert_eq!((status, json["status"].as_str()), (200, Some("processed")));
    assert_eq!(
        row(&c, "stripe", "evt_two_bodies").await.unwrap(),
        ("done".into(), 2, None)
    );
    let payload: Vec<u8> = c
        .query_one(
            "SELECT payload FROM hookclaim_deliveries WHERE delivery_id = 'evt_two_bodies'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(payload, stored.as_bytes());
}

#[tokio::test]
async fn a_row_locked_by_a_finish_in_flight_answers_503_with_a_short_retry_after() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], Scripted).await;
    let c = db.client().await;
    let holder = db.client().await;
    let body = r#"{"id":"evt_finishing","type":"t"}"#;
    support::ledger::claim_as(&c, "stripe", "evt_finishing", body, "someone-else").await;
    support::ledger::expire_lease(&c, "evt_finishing").await;
    // Its holder is finishing: the row is locked by a transaction that has not committed.
    holder.batch_execute("BEGIN").await.unwrap();
    let at = ledger::Attempt {
        source: "stripe",
        delivery_id: "evt_finishing",
        attempt: 1,
        owner: "someone-else",
    };
    ledger::finish_done(&holder, &at).await.unwrap();

    let resp = hook.handle(stripe_request(body)).await;

    assert_eq!(answer(&resp).0, 503, "{:?}", answer(&resp).1);
    assert_eq!(answer(&resp).1["status"], "busy");
    assert_eq!(resp.headers()["retry-after"], "2");
    holder.batch_execute("COMMIT").await.unwrap();
    let (status, json) = answer(&hook.handle(stripe_request(body)).await);
    assert_eq!((status, json["status"].as_str()), (200, Some("duplicate")));
    assert_eq!(row(&c, "stripe", "evt_finishing").await.unwrap().1, 1);
}

#[tokio::test]
async fn retryable_failure_answers_503_and_keeps_error_attempt_and_payload() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[("RETRY_BASE_SECS", "60")], Scripted).await;
    let c = db.client().await;
    for format in FORMATS {
        let id = format!("fail-{format:?}");
        let body = format!(r#"{{"behaviour":"retry","n":"{id}"}}"#);
        let body = body.as_bytes();
        let resp = hook.handle(github_request(format, &id, body, false)).await;
        let (status, json) = answer(&resp);
        assert_eq!(
            (status, json["status"].as_str()),
            (503, Some("failed")),
            "{format:?}"
        );
        let retry_after: u64 = resp.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((30..=60).contains(&retry_after), "{retry_after}");

        let (st, attempt, error) = row(&c, "github", &id).await.unwrap();
        assert_eq!((st.as_str(), attempt), ("failed", 1));
        assert_eq!(error.as_deref(), Some("downstream unavailable"));
        let st = state(&c, "github", &id).await;
        assert!(st.has_payload, "payload kept for re-drive");
    }
    assert_eq!(
        effects(&c).await,
        0,
        "failed attempts' work was rolled back"
    );
}

#[tokio::test]
async fn redelivery_of_a_failed_row_not_yet_due_answers_503_with_retry_after_and_stores_nothing() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[("RETRY_BASE_SECS", "120")], Scripted).await;
    let c = db.client().await;
    let body = br#"{"behaviour":"retry"}"#;
    hook.handle(github_request(Format::HttpApiV2, "not-due", body, false))
        .await;
    for format in FORMATS {
        let resp = hook
            .handle(github_request(format, "not-due", body, false))
            .await;
        let (status, json) = answer(&resp);
        assert_eq!(
            (status, json["status"].as_str()),
            (503, Some("retry_later")),
            "{format:?}"
        );
        assert!(resp.headers().contains_key("retry-after"));
    }
    assert_eq!(
        row(&c, "github", "not-due").await.unwrap().1,
        1,
        "no new attempt"
    );
    assert_eq!(delivery_count(&c).await, 1);
}

#[tokio::test]
async fn a_due_failed_row_is_retried_by_the_next_redelivery_and_can_succeed() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[("RETRY_BASE_SECS", "0")], Scripted).await;
    let c = db.client().await;
    let body = br#"{"behaviour":"retry-once"}"#;
    hook.handle(github_request(Format::HttpApiV2, "flaky", body, false))
        .await;

    // The sender retries with the same signed body, and this time processing succeeds.
    let resp = hook
        .handle(github_request(Format::HttpApiV2, "flaky", body, false))
        .await;
    assert_eq!(
        answer(&resp),
        (
            200,
            serde_json::json!({"status": "processed", "delivery_id": "flaky"})
        )
    );
    assert_eq!(
        row(&c, "github", "flaky").await.unwrap(),
        ("done".into(), 2, None)
    );
    assert_eq!(
        effects(&c).await,
        1,
        "only the successful attempt's work committed"
    );
}

#[tokio::test]
async fn permanent_failure_answers_200_and_stores_dead_with_the_error() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], Scripted).await;
    let c = db.client().await;
    for format in FORMATS {
        let id = format!("dead-{format:?}");
        let body = format!(r#"{{"behaviour":"permanent","n":"{id}"}}"#);
        let body = body.as_bytes();
        let (status, json) = answer(&hook.handle(github_request(format, &id, body, false)).await);
        assert_eq!(
            (status, json["status"].as_str()),
            (200, Some("dead")),
            "{format:?}"
        );
        let (st, _, error) = row(&c, "github", &id).await.unwrap();
        assert_eq!(st, "dead");
        assert_eq!(error.as_deref(), Some("order was cancelled"));
        // A redelivery is a duplicate: the sender stops.
        let (status, json) = answer(&hook.handle(github_request(format, &id, body, false)).await);
        assert_eq!((status, json["status"].as_str()), (200, Some("duplicate")));
    }
}

#[tokio::test]
async fn retryable_failures_become_dead_after_the_maximum_attempts() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(
        &db.url,
        &[("RETRY_BASE_SECS", "0"), ("MAX_ATTEMPTS", "3")],
        Scripted,
    )
    .await;
    let c = db.client().await;
    let body = br#"{"behaviour":"retry"}"#;
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(
            answer(
                &hook
                    .handle(github_request(Format::HttpApiV2, "hopeless", body, false))
                    .await,
            )
            .0,
        );
    }
    assert_eq!(statuses, vec![503, 503, 200, 200]);
    let (st, attempt, error) = row(&c, "github", "hopeless").await.unwrap();
    assert_eq!((st.as_str(), attempt), ("dead", 3));
    assert!(error.unwrap().starts_with("gave up after 3 attempts"));
}

#[tokio::test]
async fn bad_signature_and_stale_timestamp_answer_401_and_store_nothing() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let c = db.client().await;
    for format in FORMATS {
        let req =
            support::github_request_with_secret("wrong-secret", format, "forged", b"{}", false);
        let (status, json) = answer(&hook.handle(req).await);
        assert_eq!(
            (status, json["status"].as_str()),
            (401, Some("unauthorized")),
            "{format:?}"
        );
        assert_eq!(json["error"], "signature verification failed");

        let mut unsigned = github_request(format, "unsigned", b"{}", false);
        unsigned.headers_mut().remove("x-hub-signature-256");
        assert_eq!(answer(&hook.handle(unsigned).await).0, 401);
    }
    for tampered in [
        "stripe-tampered",
        "github-tampered",
        "svix-tampered",
        "polar-tampered",
        "acme-tampered",
    ] {
        assert_eq!(
            answer(&hook.handle(event(tampered)).await).0,
            401,
            "{tampered}"
        );
    }
    // The same, correctly signed Stripe event an hour later: stale.
    let late = support::webhook(&db.url, &[], StoreOnly)
        .await
        .with_clock(|| {
            std::time::UNIX_EPOCH + Duration::from_secs(support::EVENTS_SIGNED_AT + 3600)
        });
    assert_eq!(answer(&late.handle(event("stripe")).await).0, 401);
    assert_eq!(answer(&late.handle(event("svix")).await).0, 401);
    assert_eq!(delivery_count(&c).await, 0);
}

#[tokio::test]
async fn one_unusable_secret_disables_only_its_own_source() {
    // svix's secret is not valid whsec_ base64; every other source's secret is fine.
    let db = TestDb::migrated().await;
    let mut secrets: serde_json::Value =
        serde_json::from_str(&support::local_env()["HOOKCLAIM_SECRETS"]).unwrap();
    secrets["svix"] = serde_json::json!("whsec_not*base64!");
    let secrets = secrets.to_string();
    let hook = support::webhook(&db.url, &[("HOOKCLAIM_SECRETS", &secrets)], StoreOnly).await;

    let stripe = hook.handle(event("stripe")).await;
    let github = hook.handle(event("github")).await;
    let svix = hook.handle(event("svix")).await;

    assert_eq!(answer(&stripe).0, 200);
    assert_eq!(answer(&github).0, 200);
    assert_eq!(
        answer(&svix),
        (
            503,
            serde_json::json!({"status": "unavailable", "error": "temporarily unavailable"})
        )
    );
    assert_eq!(delivery_count(&db.client().await).await, 2);
}

#[tokio::test]
async fn malformed_requests_answer_400_and_store_nothing() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let c = db.client().await;
    for format in FORMATS {
        // Signed, but GitHub's delivery header is missing.
        let mut req = github_request(format, "x", b"{}", false);
        req.headers_mut().remove("x-github-delivery");
        let (status, json) = answer(&hook.handle(req).await);
        assert_eq!(
            (status, json["status"].as_str()),
            (400, Some("bad_request")),
            "{format:?}"
        );
        assert_eq!(json["error"], "missing delivery id");
    }
    // Stripe keeps the id in the body: a signed body that is not JSON is a bad request.
    let body = b"not json";
    let sig = support::stripe_signature(support::STRIPE_SECRET, support::EVENTS_SIGNED_AT, body);
    for format in FORMATS {
        let req = support::request(
            format,
            "POST",
            "stripe",
            &[("stripe-signature", &sig)],
            body,
            false,
        );
        let (status, json) = answer(&hook.handle(req).await);
        assert_eq!(
            (status, json["error"].as_str()),
            (400, Some("body is not valid JSON")),
            "{format:?}"
        );
    }
    assert_eq!(delivery_count(&c).await, 0);
}

#[tokio::test]
async fn unknown_source_wrong_method_and_oversized_body_get_404_405_413() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let c = db.client().await;
    for format in FORMATS {
        let req = support::request(format, "POST", "nope", &[], b"{}", false);
        assert_eq!(
            answer(&hook.handle(req).await),
            (
                404,
                serde_json::json!({"status":"unknown_source","error":"unknown source"})
            )
        );

        let req = support::request(format, "GET", "github", &[], b"", false);
        let resp = hook.handle(req).await;
        assert_eq!(answer(&resp).0, 405, "{format:?}");
        assert_eq!(resp.headers()["allow"], "POST");

        // acme allows 256 KiB.
        let big = vec![b'a'; 262_145];
        let req = support::request(format, "POST", "acme", &[], &big, true);
        assert_eq!(answer(&hook.handle(req).await).0, 413, "{format:?}");
    }
    assert_eq!(answer(&hook.handle(event("unknown-source")).await).0, 404);
    assert_eq!(answer(&hook.handle(event("wrong-method")).await).0, 405);
    assert_eq!(delivery_count(&c).await, 0);
}

#[tokio::test]
async fn every_signed_sample_event_is_processed_then_its_redelivery_is_a_duplicate() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    for source in ["stripe", "github", "svix", "polar", "acme"] {
        let (status, json) = answer(&hook.handle(event(source)).await);
        assert_eq!(
            (status, json["status"].as_str()),
            (200, Some("processed")),
            "{source}: {json}"
        );
        let (status, json) = answer(&hook.handle(event(&format!("{source}-redelivery"))).await);
        assert_eq!(
            (status, json["status"].as_str()),
            (200, Some("duplicate")),
            "{source}: {json}"
        );
    }
    for other in ["stripe-rest-v1", "github-function-url", "github-base64"] {
        let (status, json) = answer(&hook.handle(event(other)).await);
        assert_eq!(
            (status, json["status"].as_str()),
            (200, Some("processed")),
            "{other}: {json}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_hundred_deliveries_for_a_hundred_orders_issue_exactly_a_hundred_licences() {
    let db = TestDb::migrated().await;
    let mut envs = Vec::new();
    for _ in 0..4 {
        envs.push(Arc::new(support::webhook(&db.url, &[], Licences).await));
    }
    let mut sends: Vec<usize> = (0..100).flat_map(|o| std::iter::repeat_n(o, 5)).collect();
    fastrand::shuffle(&mut sends);
    let sends = Arc::new(tokio::sync::Mutex::new(sends));
    let mut workers = Vec::new();
    for w in 0..16 {
        let (env, sends) = (envs[w % 4].clone(), sends.clone());
        workers.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            loop {
                let Some(order) = sends.lock().await.pop() else {
                    break;
                };
                let body = format!(r#"{{"order_id":"order-{order}"}}"#);
                let req = github_request(
                    Format::HttpApiV2,
                    &format!("delivery-{order}"),
                    body.as_bytes(),
                    false,
                );
                statuses.push(answer(&env.handle(req).await).0);
            }
            statuses
        }));
    }
    let mut by_status = std::collections::BTreeMap::new();
    for w in workers {
        for s in w.await.unwrap() {
            *by_status.entry(s).or_insert(0) += 1;
        }
    }
    let c = db.client().await;
    let licences = licence_count(&c).await;
    let done = support::count(
        &c,
        "SELECT count(*) FROM hookclaim_deliveries WHERE status = 'done'",
    )
    .await;
    println!("answers by status: {by_status:?}; licences={licences} done={done}");
    assert_eq!(licences, 100);
    assert_eq!(done, 100);
    assert!(
        by_status.keys().all(|s| [200, 202].contains(s)),
        "{by_status:?}"
    );
    assert_eq!(by_status.values().sum::<i32>(), 500);
}

fn sha2_256(body: &[u8]) -> Vec<u8> {
    use sha2::Digest as _;
    sha2::Sha256::digest(body).to_vec()
}

#[tokio::test]
async fn a_write_that_fails_at_commit_rolls_everything_back_and_the_attempt_is_retried() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[("RETRY_BASE_SECS", "60")], Scripted).await;
    let c = db.client().await;

    let resp = hook
        .handle(github_request(
            Format::HttpApiV2,
            "bad-write",
            br#"{"behaviour":"bad-write"}"#,
            false,
        ))
        .await;

    assert_eq!(answer(&resp).0, 503, "{:?}", answer(&resp));
    let (status, attempt, error) = row(&c, "github", "bad-write").await.unwrap();
    assert_eq!((status.as_str(), attempt), ("failed", 1));
    assert!(
        error
            .as_deref()
            .unwrap_or_default()
            .contains("division by zero"),
        "{error:?}"
    );
    assert_eq!(
        effects(&c).await,
        0,
        "the write before the failing one was rolled back"
    );
}

#[tokio::test]
async fn a_commit_that_hangs_answers_503_before_the_invocation_deadline_and_records_the_failure() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], Licences).await;
    // Another session holds the licence table, so the delivery's commit waits on its lock for
    // longer than the invocation has (the server's statement timeout is 5 s).
    let mut blocker = db.client().await;
    let lock = blocker.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE hookclaim_example_licences IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let req = support::with_deadline(
        github_request(
            Format::HttpApiV2,
            "hang-1",
            br#"{"order_id":"o-hang"}"#,
            false,
        ),
        Duration::from_millis(2500),
    );

    let started = std::time::Instant::now();
    let resp = hook.handle(req).await;
    let took = started.elapsed();

    assert_eq!(answer(&resp).0, 503);
    assert!(
        took < Duration::from_millis(2500),
        "answered after the deadline: {took:?}"
    );
    lock.rollback().await.unwrap();
    let admin = db.client().await;
    let (status, attempt, error) = row(&admin, "github", "hang-1").await.expect("row");
    assert_eq!((status.as_str(), attempt), ("failed", 1));
    assert!(error.unwrap_or_default().contains("invocation's time"));
    assert_eq!(licence_count(&admin).await, 0);
    // The abandoned connection was let go; the next delivery works on a new one.
    let next = hook
        .handle(github_request(
            Format::HttpApiV2,
            "hang-2",
            br#"{"order_id":"o-next"}"#,
            false,
        ))
        .await;
    assert_eq!(answer(&next).0, 200);
}

#[tokio::test]
async fn an_invocation_that_dies_inside_its_transaction_leaves_the_connection_clean() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], Scripted).await;
    let c = db.client().await;

    // The invocation ends (killed, timed out) after the transaction was opened by the read,
    // with a write in it: its future is dropped mid-processing.
    let died = tokio::time::timeout(
        Duration::from_millis(500),
        hook.handle(github_request(
            Format::HttpApiV2,
            "crash",
            br#"{"behaviour":"hang"}"#,
            false,
        )),
    )
    .await;
    assert!(died.is_err(), "the invocation never answered");

    // The next delivery on the same connection commits its own work only.
    let resp = hook
        .handle(github_request(
            Format::HttpApiV2,
            "after-crash",
            br#"{"behaviour":"ok"}"#,
            false,
        ))
        .await;
    assert_eq!(answer(&resp).0, 200, "{:?}", answer(&resp));
    let ids: Vec<String> = c
        .query("SELECT id FROM effects ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, ["after-crash"]);
    assert_eq!(row(&c, "github", "crash").await.unwrap().0, "processing");
    assert_eq!(
        hook.database().connect_count(),
        1,
        "the connection was kept"
    );
}

#[tokio::test]
async fn a_processor_that_panics_is_a_failed_attempt_answered_503_and_the_connection_kept() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], Scripted).await;
    let c = db.client().await;

    let resp = hook
        .handle(github_request(
            Format::HttpApiV2,
            "buggy",
            br#"{"behaviour":"panic"}"#,
            false,
        ))
        .await;

    assert_eq!(answer(&resp).0, 503);
    let (status, attempt, error) = row(&c, "github", "buggy").await.unwrap();
    assert_eq!((status.as_str(), attempt), ("failed", 1));
    assert_eq!(
        error.as_deref(),
        Some("processor panicked: simulated bug inside the transaction")
    );
    assert_eq!(effects(&c).await, 0, "its write was rolled back");
    let next = hook
        .handle(github_request(
            Format::HttpApiV2,
            "fine",
            br#"{"behaviour":"ok"}"#,
            false,
        ))
        .await;
    assert_eq!(answer(&next).0, 200);
    assert_eq!(hook.database().connect_count(), 1);
}

#[tokio::test]
async fn prepared_statements_that_vanish_from_the_connection_are_run_again_and_prepared_afresh() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[("RETRY_BASE_SECS", "60")], Scripted).await;
    let c = db.client().await;
    let ok = |id: &str| github_request(Format::HttpApiV2, id, br#"{"behaviour":"ok"}"#, false);
    assert_eq!(answer(&hook.handle(ok("before")).await).0, 200);

    // Its failure is recorded with a prepared statement that is gone: refused, run again.
    let resp = hook
        .handle(github_request(
            Format::HttpApiV2,
            "vanish",
            br#"{"behaviour":"deallocate"}"#,
            false,
        ))
        .await;
    assert_eq!(answer(&resp).0, 503, "{:?}", answer(&resp));
    let (status, attempt, error) = row(&c, "github", "vanish").await.unwrap();
    assert_eq!((status.as_str(), attempt), ("failed", 1));
    assert_eq!(error.as_deref(), Some("statements deallocated"));

    // Later deliveries on the same connection prepare again and are processed.
    for id in ["after-1", "after-2"] {
        let resp = hook.handle(ok(id)).await;
        assert_eq!(answer(&resp).0, 200, "{id}: {:?}", answer(&resp));
    }
    assert_eq!(hook.database().connect_count(), 1);
}

#[tokio::test]
async fn every_preset_sample_is_processed_once_and_handshakes_are_never_stored() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let presets = [
        "slack",
        "shopify",
        "zoom",
        "paddle",
        "linear",
        "twitch",
        "discord",
        "gitlab",
        "bitbucket",
        "meta",
        "twilio",
        "square",
        "hubspot",
        "intercom",
        "clerk",
        "resend",
    ];
    for source in presets {
        let (status, json) = answer(&hook.handle(event(source)).await);
        assert_eq!(
            (status, json["status"].as_str()),
            (200, Some("processed")),
            "{source}: {json}"
        );
        // The same request again (a provider's retry): a duplicate.
        let (status, json) = answer(&hook.handle(event(source)).await);
        assert_eq!(
            (status, json["status"].as_str()),
            (200, Some("duplicate")),
            "{source}: {json}"
        );
    }
    let c = db.client().await;
    let stored = delivery_count(&c).await;
    assert_eq!(stored, presets.len() as i64);

    for handshake in [
        "slack-url-verification",
        "slack-ssl-check",
        "zoom-url-validation",
        "twitch-verification",
        "twitch-revocation",
        "meta-subscribe",
        "meta-subscribe-wrong-token",
        "discord-ping",
    ] {
        let status = hook.handle(event(handshake)).await.status().as_u16();
        assert!([200, 204, 403].contains(&status), "{handshake}: {status}");
    }
    assert_eq!(
        delivery_count(&c).await,
        stored,
        "handshakes are not stored"
    );

    let (status, json) = answer(&hook.handle(event("gitlab-non-ascii-id")).await);
    assert_eq!(status, 400, "{json}");
    assert_eq!(
        json["error"],
        "delivery id header idempotency-key is not visible ASCII"
    );
}

#[tokio::test]
async fn a_twitch_notification_resent_as_a_revocation_is_a_duplicate_not_a_revocation() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let (status, json) = answer(&hook.handle(event("twitch")).await);
    assert_eq!((status, json["status"].as_str()), (200, Some("processed")));

    // The message-type header is not signed: rewritten on a captured notification, it must not
    // make a revocation (a false "subscription revoked" warning and metric).
    let mut forged = event("twitch");
    forged.headers_mut().insert(
        "twitch-eventsub-message-type",
        http::HeaderValue::from_static("revocation"),
    );
    let (status, json) = answer(&hook.handle(forged).await);
    assert_eq!(
        (status, json["status"].as_str()),
        (200, Some("duplicate")),
        "{json}"
    );

    // A genuine revocation is still answered as one.
    let resp = hook.handle(event("twitch-revocation")).await;
    assert_eq!(resp.status().as_u16(), 204);
    assert_eq!(delivery_count(&db.client().await).await, 1);
}

#[tokio::test]
async fn metas_verify_token_is_read_from_the_secrets_document() {
    let db = TestDb::migrated().await;
    let body = |resp: &lambda_http::Response<lambda_http::Body>| {
        String::from_utf8_lossy(resp.body().as_ref()).into_owned()
    };
    // env.local.json: {"meta": …, "meta.verify_token": "hookclaim-meta-verify-token"}.
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let resp = hook.handle(event("meta-subscribe")).await;
    assert_eq!(
        (resp.status().as_u16(), body(&resp)),
        (200, "1158201444".into())
    );
    let resp = hook.handle(event("meta-subscribe-wrong-token")).await;
    assert_eq!(resp.status().as_u16(), 403);

    // Without a verify token in the document, every subscription request is refused; the app
    // secret is not one.
    let secrets = r#"{"meta": "hookclaim-meta-test-secret"}"#;
    let hook = support::webhook(&db.url, &[("HOOKCLAIM_SECRETS", secrets)], StoreOnly).await;
    let resp = hook.handle(event("meta-subscribe")).await;
    assert_eq!(resp.status().as_u16(), 403, "{}", body(&resp));
    assert_eq!(delivery_count(&db.client().await).await, 0);
}
