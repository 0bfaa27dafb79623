//! The replay guard through the webhook function, on a real PostgreSQL: sources whose signature
//! covers neither the delivery id nor a checked timestamp (GitHub, Shopify, an `hmac` source with
//! its id in a header) remember the signed body as well as the id. A body re-sent under a new id
//! is a duplicate and runs once; another signed body cannot take over a failed delivery's id;
//! a source with `"replay_guard": false` behaves as a source without the guard always has.

use crate::support;

use std::time::{Duration, SystemTime};

use hookclaim::processor::{Delivery, ProcessError, Processor};
use hookclaim::work::Work;
use hookclaim_verify::{HmacScheme, IdLocation, Outgoing, Scheme, SignatureEncoding, SigningKey};
use serde_json::json;
use support::ledger::{exists, make_due, state};
use support::{answer, Format, TestDb};

/// Records every delivery it runs (id, attempt, body) in the delivery's transaction, so a
/// count of its rows is a count of effects. A body with `"fail_first": true` fails its first
/// attempt, retryably.
struct Recorder;

impl Processor for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    async fn setup(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
    ) -> Result<(), tokio_postgres::Error> {
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS recorded (delivery_id text, attempt int, body text)",
        )
        .await
    }

    async fn process(&self, delivery: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        let body: serde_json::Value = delivery.json().unwrap_or_default();
        if body["fail_first"] == json!(true) && delivery.attempt == 1 {
            return Err(ProcessError::new("the first attempt fails"));
        }
        let payload = String::from_utf8_lossy(&delivery.payload);
        work.queue(
            "INSERT INTO recorded VALUES ($1, $2, $3)",
            &[&delivery.delivery_id, &delivery.attempt, &payload],
        );
        Ok(())
    }
}

/// What [`Recorder`] ran: (delivery id, attempt, body), in the order run.
async fn recorded(c: &tokio_postgres::Client) -> Vec<(String, i32, String)> {
    c.query(
        "SELECT delivery_id, attempt, body FROM recorded ORDER BY ctid",
        &[],
    )
    .await
    .expect("read recorded")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

/// A source of the local configuration (env.local.json) and how to sign one of its requests.
#[derive(Debug, Clone, Copy)]
enum Sender {
    /// `github`: `X-Hub-Signature-256` over the body; the id is `X-GitHub-Delivery`.
    Github,
    /// `shopify` (preset): base64 `X-Shopify-Hmac-Sha256` over the body; the id is
    /// `X-Shopify-Webhook-Id`.
    Shopify,
    /// `acme` (`hmac`): hex `X-Acme-Signature` over the body; the id is the `X-Acme-Delivery`
    /// header (`id_header`), which the signature does not cover.
    Acme,
}

impl Sender {
    fn source(self) -> &'static str {
        match self {
            Sender::Github => "github",
            Sender::Shopify => "shopify",
            Sender::Acme => "acme",
        }
    }

    /// A request signed with the source's test secret, with delivery id `id`.
    fn request(self, id: &str, body: &[u8]) -> lambda_http::Request {
        let sent = Outgoing::new(body, support::EVENTS_SIGNED_AT as i64)
            .header("content-type", "application/json")
            .id(id);
        let signed = match self {
            Sender::Github => support::github_signed(support::GITHUB_SECRET, id, body),
            Sender::Shopify => support::sign_as(
                "shopify",
                "hookclaim-shopify-test-secret",
                &sent.event_type("orders/create"),
            ),
            Sender::Acme => {
                // The sender's format, as the source's settings in env.local.json describe it.
                let scheme = Scheme::Hmac(HmacScheme {
                    signature_header: "X-Acme-Signature".into(),
                    prefix: "sha256=".into(),
                    encoding: SignatureEncoding::Hex,
                    id: IdLocation::Header("X-Acme-Delivery".into()),
                    event_type_pointer: Some("/event".into()),
                });
                let key = SigningKey::hmac("hookclaim-acme-test-secret");
                hookclaim_verify::sign(&scheme, &[key], &sent).expect("sign as acme")
            }
        };
        support::request(
            Format::HttpApiV2,
            "POST",
            self.source(),
            &support::header_pairs(&signed),
            body,
            false,
        )
    }
}

const SENDERS: [Sender; 3] = [Sender::Github, Sender::Shopify, Sender::Acme];

/// The status and the `status` field of a response, and its `Retry-After` header if any.
fn seen(resp: &lambda_http::Response<lambda_http::Body>) -> (u16, String, Option<String>) {
    let (status, json) = answer(resp);
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (
        status,
        json["status"].as_str().unwrap_or_default().to_owned(),
        retry_after,
    )
}

#[tokio::test]
async fn a_signed_body_resent_under_a_new_id_is_a_duplicate_and_runs_once() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], Recorder).await;
    let c = db.client().await;

    let mut got = Vec::new();
    for sender in SENDERS {
        let body = format!(r#"{{"event":"order.paid","order":"o-{sender:?}"}}"#);
        let mut answers = vec![seen(
            &hook.handle(sender.request("id-1", body.as_bytes())).await,
        )];
        // The captured request again, its id changed to any other value.
        for id in ["id-2", "id-3"] {
            answers.push(seen(
                &hook.handle(sender.request(id, body.as_bytes())).await,
            ));
        }
        let mut stored = Vec::new();
        for id in ["id-1", "id-2", "id-3"] {
            stored.push(exists(&c, sender.source(), id).await);
        }
        got.push((sender.source(), answers, stored));
    }

    let processed = (200, "processed".to_string(), None);
    let duplicate = (200, "duplicate".to_string(), None);
    for (source, answers, stored) in &got {
        assert_eq!(
            (answers, stored),
            (
                &vec![processed.clone(), duplicate.clone(), duplicate.clone()],
                &vec![true, false, false]
            ),
            "{source}: the answers to ids 1, 2, 3 and which are stored; all: {got:?}"
        );
    }
    let ran = recorded(&c).await;
    assert_eq!(ran.len(), SENDERS.len(), "each body ran once: {ran:?}");
    assert!(ran
        .iter()
        .all(|(id, attempt, _)| id == "id-1" && *attempt == 1));
    println!("[guard] ran: {ran:?}");
}

#[tokio::test]
async fn a_failed_delivery_is_not_taken_over_by_another_signed_body_and_runs_its_own() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[("RETRY_BASE_SECS", "60")], Recorder).await;
    let c = db.client().await;

    let mut got = Vec::new();
    for sender in SENDERS {
        let source = sender.source();
        let own = format!(r#"{{"order":"o-own-{sender:?}","fail_first":true}}"#);
        // Another genuine delivery of the same source, captured from the table or a log.
        let other = format!(r#"{{"order":"o-other-{sender:?}"}}"#);
        let id = format!("x-{source}");
        let failed = hook.handle(sender.request(&id, own.as_bytes())).await;
        assert_eq!(seen(&failed).1, "failed", "{sender:?}");
        make_due(&c, &id).await;

        let (status, outcome, retry_after) =
            seen(&hook.handle(sender.request(&id, other.as_bytes())).await);

        let st = state(&c, source, &id).await;
        let payload: Vec<u8> = c
            .query_one(
                "SELECT payload FROM hookclaim_deliveries WHERE source = $1 AND delivery_id = $2",
                &[&source, &id],
            )
            .await
            .unwrap()
            .get(0);
        got.push((
            source,
            (status, outcome, retry_after.is_some()),
            (st.status, st.attempt, payload == own.as_bytes()),
        ));
    }
    // Answered as a redelivery of a failed delivery that is not taken: 503, retry later; the
    // row keeps its attempt and its own body.
    for (source, answer, row) in &got {
        assert_eq!(
            (answer, row),
            (
                &(503, "retry_later".to_string(), true),
                &("failed".to_string(), 1, true)
            ),
            "{source}: (status, outcome, Retry-After), (row status, attempt, own body kept); \
             all: {got:?}"
        );
    }
    assert_eq!(recorded(&c).await, vec![], "nothing ran");

    // The retention run re-drives each delivery from the body stored with it.
    let retention = support::retention(&db.url, &[], Recorder).await;
    let report = retention
        .handle(json!({}), SystemTime::now() + Duration::from_secs(60))
        .await
        .expect("retention run");
    assert_eq!(report.reclaimed, SENDERS.len() as u64, "{report:?}");
    let ran = recorded(&c).await;
    assert_eq!(ran.len(), SENDERS.len(), "{ran:?}");
    for sender in SENDERS {
        let id = format!("x-{}", sender.source());
        let own = format!(r#"{{"order":"o-own-{sender:?}","fail_first":true}}"#);
        assert!(ran.contains(&(id, 2, own)), "{sender:?}: {ran:?}");
    }
    // From then on, either body under that id is a duplicate.
    for sender in SENDERS {
        let other = format!(r#"{{"order":"o-other-{sender:?}"}}"#);
        let id = format!("x-{}", sender.source());
        let late = hook.handle(sender.request(&id, other.as_bytes())).await;
        assert_eq!(seen(&late), (200, "duplicate".into(), None), "{sender:?}");
    }
    assert_eq!(recorded(&c).await.len(), SENDERS.len());
    println!("[guard] ran: {ran:?}");
}

#[tokio::test]
async fn a_source_with_the_guard_off_processes_a_resent_body_again_as_before() {
    // A sender that legitimately sends identical bodies under distinct ids turns the guard off;
    // the key alone then decides, for new ids and for takeovers.
    let db = TestDb::migrated().await;
    let sources = r#"{"github":{"kind":"github","replay_guard":false},
                      "acme":{"kind":"hmac","signature_header":"X-Acme-Signature",
                              "prefix":"sha256=","encoding":"hex","id_header":"X-Acme-Delivery",
                              "replay_guard":false}}"#;
    let hook = support::webhook(&db.url, &[("HOOKCLAIM_SOURCES", sources)], Recorder).await;
    let c = db.client().await;

    for sender in [Sender::Github, Sender::Acme] {
        let body = format!(r#"{{"heartbeat":"{sender:?}"}}"#);
        for id in ["hb-1", "hb-2"] {
            let resp = hook.handle(sender.request(id, body.as_bytes())).await;
            assert_eq!(
                seen(&resp),
                (200, "processed".into(), None),
                "{sender:?} {id}"
            );
        }
        let own = format!(r#"{{"order":"o-{sender:?}","fail_first":true}}"#);
        let other = format!(r#"{{"order":"o-other-{sender:?}"}}"#);
        let id = format!("x-{sender:?}");
        hook.handle(sender.request(&id, own.as_bytes())).await;
        make_due(&c, &id).await;
        let taken = hook.handle(sender.request(&id, other.as_bytes())).await;
        assert_eq!(seen(&taken), (200, "processed".into(), None), "{sender:?}");
    }
    let ran = recorded(&c).await;
    let ids: Vec<(&str, i32)> = ran.iter().map(|(id, a, _)| (id.as_str(), *a)).collect();
    assert_eq!(
        ids,
        [
            ("hb-1", 1),
            ("hb-2", 1),
            ("x-Github", 2),
            ("hb-1", 1),
            ("hb-2", 1),
            ("x-Acme", 2)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_body_posted_at_once_under_many_ids_has_exactly_one_effect() {
    let db = TestDb::migrated().await;
    let mut hooks = Vec::new();
    for _ in 0..16 {
        hooks.push(std::sync::Arc::new(
            support::webhook(&db.url, &[], Recorder).await,
        ));
    }
    let c = db.client().await;
    for round in 0..10 {
        let body = format!(r#"{{"order":"o-race-{round}"}}"#);
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(hooks.len()));
        let mut tasks = Vec::new();
        for (i, hook) in hooks.iter().enumerate() {
            let (hook, body, barrier) = (hook.clone(), body.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                let req = Sender::Github.request(&format!("race-{round}-{i}"), body.as_bytes());
                barrier.wait().await;
                seen(&hook.handle(req).await)
            }));
        }
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.unwrap().1);
        }
        let processed = outcomes.iter().filter(|o| *o == "processed").count();
        assert_eq!(processed, 1, "round {round}: {outcomes:?}");
        assert!(
            outcomes
                .iter()
                .all(|o| ["processed", "duplicate", "in_progress"].contains(&o.as_str())),
            "round {round}: {outcomes:?}"
        );
        let effects = recorded(&c)
            .await
            .into_iter()
            .filter(|(_, _, b)| *b == body)
            .count();
        assert_eq!(effects, 1, "round {round}");
    }
}
