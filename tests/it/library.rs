//! hookclaim as a library: the handler as a `tower::Service` beside a route of the user's own,
//! the processor contract's retry time reaching the sender and the ledger, ordinary `ToSql`
//! parameters, and steps recorded outside the delivery's transaction, through the public
//! test harness.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hookclaim::observe::Telemetry;
use hookclaim::testing::{Happened, Harness};
use hookclaim::{Delivery, ProcessError, Processor, StoreOnly, Work};
use lambda_http::tower::{service_fn, Service, ServiceBuilder, ServiceExt as _};
use lambda_http::{Body, Request, Response};
use support::scripted::Scripted;
use support::{answer, github_delivery, github_request, row, Format, TestDb};

/// A GET to `path`, as a function URL delivers it.
fn get(path: &str) -> Request {
    http::Request::builder()
        .method("GET")
        .uri(path)
        .body(Body::Empty)
        .unwrap()
}

#[tokio::test]
async fn the_webhook_serves_as_a_tower_service_beside_a_health_route_of_the_users_own() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let hook = &hook;
    // The user's own function: a health route, and the webhook under a tower layer.
    let webhook = ServiceBuilder::new()
        .map_response(|mut resp: Response<Body>| {
            resp.headers_mut()
                .insert("x-served-by", http::HeaderValue::from_static("tower"));
            resp
        })
        .service(hook);
    let app = service_fn(move |req: Request| {
        let mut webhook = webhook.clone();
        async move {
            if req.uri().path() == "/health" {
                return Ok(Response::new(Body::from("ok")));
            }
            webhook.ready().await?.call(req).await
        }
    });

    let health = app.clone().oneshot(get("/health")).await.unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.body().as_ref(), b"ok");

    let body = br#"{"zen":"served"}"#;
    let resp = app
        .clone()
        .oneshot(github_request(Format::FunctionUrl, "tower-1", body, false))
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-served-by"], "tower");
    let (status, json) = answer(&resp);
    assert_eq!((status, json["status"].as_str()), (200, Some("processed")));
    let c = db.client().await;
    assert_eq!(row(&c, "github", "tower-1").await.unwrap().0, "done");

    // The webhook alone still refuses what is not its route, as before.
    let (status, _) = answer(&hook.handle(get("/health")).await);
    assert_eq!(status, 405);
}

#[tokio::test]
async fn retry_in_reaches_the_503_retry_after_and_the_rows_next_attempt_at() {
    let db = TestDb::migrated().await;
    // A policy backoff far from the processor's minute, so the two cannot be confused; the
    // real clock (GitHub's signature has no timestamp), so the wait left is now's.
    let config = support::config(&db.url, &[("RETRY_BASE_SECS", "5")]);
    let hook = hookclaim::Webhook::from_config(&config, Scripted)
        .await
        .unwrap();
    let body = br#"{"behaviour":"retry-in"}"#;
    let resp = hook
        .handle(github_request(Format::HttpApiV2, "retry-in-1", body, false))
        .await;
    let (status, json) = answer(&resp);
    assert_eq!((status, json["status"].as_str()), (503, Some("failed")));
    assert_eq!(resp.headers()["retry-after"], "60");

    let c = db.client().await;
    let due_in: f64 = c
        .query_one(
            "SELECT extract(epoch FROM next_attempt_at - now())::float8, status, last_error
               FROM hookclaim_deliveries WHERE delivery_id = 'retry-in-1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        (55.0..=60.0).contains(&due_in),
        "next attempt in {due_in} s"
    );
    let (status, attempt, error) = row(&c, "github", "retry-in-1").await.unwrap();
    assert_eq!((status.as_str(), attempt), ("failed", 1));
    assert_eq!(error.as_deref(), Some("downstream asked for a minute"));

    // The sender's redelivery before then is told the same wait, less the time gone.
    let again = hook
        .handle(github_request(Format::HttpApiV2, "retry-in-1", body, false))
        .await;
    let (status, json) = answer(&again);
    assert_eq!(
        (status, json["status"].as_str()),
        (503, Some("retry_later"))
    );
    let wait: u64 = again.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((55..=60).contains(&wait), "Retry-After {wait}");
}

/// Writes with parameters of several Rust types, borrowed from the delivery and from locals.
struct Typed;

impl Processor for Typed {
    fn name(&self) -> &'static str {
        "typed"
    }

    async fn setup(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
    ) -> Result<(), tokio_postgres::Error> {
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS typed (id varchar(64) PRIMARY KEY, amount bigint,
                 small int, note text, body jsonb, at timestamptz)",
        )
        .await
    }

    async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        let event: serde_json::Value = d.json()?;
        // A &str borrowed from a local that is gone when `process` returns.
        let id: &str = event["id"].as_str().unwrap_or_default();
        let small: i32 = 7; // an int4 into a bigint column and an int column
        let note: Option<&str> = None;
        let at = std::time::SystemTime::now();
        work.queue(
            "INSERT INTO typed VALUES ($1, $2, $3, $4, $5, $6)",
            &[&id, &small, &small, &note, &event, &at],
        );
        let seen = work
            .query("SELECT count(*) FROM typed WHERE id = $1", &[&id])
            .await?;
        assert_eq!(
            seen[0].get::<_, i64>(0),
            1,
            "a query sees the writes queued before it"
        );
        if event["unencodable"] == true {
            // hstore is an extension's type, not a built-in one.
            let tags: std::collections::HashMap<String, Option<String>> = Default::default();
            work.queue("SELECT $1", &[&tags]);
        }
        Ok(())
    }
}

#[tokio::test]
async fn parameters_are_ordinary_tosql_values_borrowed_for_the_call() {
    let db = TestDb::migrated().await;
    let harness = Harness::builder(Typed)
        .sources(r#"{"typed":{"kind":"stripe"}}"#)
        .connect(&db.url)
        .await
        .unwrap();
    let d = Delivery::new("typed", "typed-1", r#"{"id":"order-1","amount":3}"#);
    assert_eq!(
        harness.deliver(&d).await.unwrap().outcome.happened,
        Happened::Done
    );
    let c = harness.client();
    let r = c
        .query_one(
            "SELECT id, amount, small, note, body->>'id' FROM typed",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, String>(0), "order-1");
    assert_eq!(r.get::<_, i64>(1), 7);
    assert_eq!(r.get::<_, i32>(2), 7);
    assert_eq!(r.get::<_, Option<String>>(3), None);
    assert_eq!(r.get::<_, String>(4), "order-1");

    // A parameter of no built-in type fails the attempt before anything is sent.
    let d = Delivery::new("typed", "typed-2", r#"{"id":"order-2","unencodable":true}"#);
    let failed = harness.deliver(&d).await.unwrap().outcome;
    assert!(matches!(failed.happened, Happened::Failed(_)), "{failed:?}");
    let error = failed.reason.unwrap_or_default();
    assert!(error.contains("parameter $1 of `SELECT $1`"), "{error}");
    let n: i64 = c
        .query_one("SELECT count(*) FROM typed WHERE id = 'order-2'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "nothing of the attempt was committed");
}

/// Calls a counted "external service" once per delivery, recorded as a step, and fails its
/// first attempt after the call: the re-drive must not call again.
struct Stepper(Arc<AtomicUsize>);

impl Processor for Stepper {
    fn name(&self) -> &'static str {
        "stepper"
    }

    async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        if !work.steps_done().await?.contains("crm") {
            self.0.fetch_add(1, Ordering::SeqCst);
            work.record_step("crm", Some("crm-id-1")).await?;
        }
        if d.attempt == 1 {
            return Err(ProcessError::retry_in(
                "the next call timed out",
                Duration::from_secs(2),
            ));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_step_recorded_outside_the_transaction_is_not_repeated_by_the_redrive() {
    let db = TestDb::migrated().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let harness = Harness::builder(Stepper(calls.clone()))
        .sources(r#"{"crm":{"kind":"stripe"}}"#)
        .connect(&db.url)
        .await
        .unwrap();
    let d = Delivery::new("crm", "step-1", "{}");
    let failed = harness.deliver(&d).await.unwrap().outcome;
    assert_eq!(failed.happened, Happened::Failed(Duration::from_secs(2)));
    // The step committed on its own, whatever the attempt concluded.
    let c = harness.client();
    let detail: Option<String> = c
        .query_one(
            "SELECT detail FROM hookclaim_destination_progress WHERE delivery_id = 'step-1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(detail.as_deref(), Some("crm-id-1"));
    // The sender's redelivery within the two seconds finds it not due yet.
    let not_due = harness.deliver(&d).await.unwrap().outcome;
    assert!(
        matches!(not_due.happened, Happened::RetryLater(_)),
        "{not_due:?}"
    );
    assert_eq!(
        harness.redrive(&d).await.unwrap().outcome.happened,
        Happened::Done
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the external call ran once"
    );
}

#[test]
fn a_processors_own_setting_stops_the_cold_start_through_run_webhook_with_naming_it() {
    // A user's function: `run_webhook_with` and a `make` closure that reads a setting of its
    // own, unset here.
    let bins =
        support::emulator::build_binaries("hookclaim-fixture-faulty", &["faulty-setting"], false);
    let out = std::process::Command::new(&bins["faulty-setting"])
        .env_clear()
        .envs(support::local_env())
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .expect("run the fixture's binary");

    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("processor not built"))
        .unwrap_or_else(|| panic!("no cold start error in {stdout}"));
    let logged: serde_json::Value = serde_json::from_str(line).unwrap();
    let message = "FAULTY_LICENCE_URL: environment variable not found";
    assert_eq!(logged["error"], message);
    assert_eq!(logged["error_type"], "hookclaim.Processor");
    assert_eq!(logged["setting"], "FAULTY_LICENCE_URL");
    // What `main` returned, as the process printed it.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("Error: {message}")), "{stderr}");
    // And as the Lambda runtime reports it.
    let e = hookclaim::Error::from(hookclaim::StartupError::processor(
        "FAULTY_LICENCE_URL",
        std::env::VarError::NotPresent,
    ));
    let diagnostic = lambda_runtime::Diagnostic::from(e);
    assert_eq!(diagnostic.error_type, "hookclaim.Processor");
    assert_eq!(diagnostic.error_message, message);
    println!("[library] a processor's own setting: {line}");
}

#[tokio::test]
async fn the_webhook_is_an_owned_service_inside_towers_buffer_and_a_spawned_task() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;

    // tower's Buffer moves its service into a worker task of its own: it must be 'static.
    let mut buffered = tower::buffer::Buffer::new(hook.clone(), 8);
    let resp = buffered
        .ready()
        .await
        .unwrap()
        .call(github_delivery(Format::FunctionUrl, "buffer-1"))
        .await
        .unwrap();
    let (status, json) = answer(&resp);
    assert_eq!((status, json["status"].as_str()), (200, Some("processed")));

    // A spawned task owns its clone, as a router built once and moved into the runtime does.
    let spawned = hook.clone();
    let task = tokio::spawn(spawned.oneshot(github_delivery(Format::FunctionUrl, "spawned-1")));
    let (status, json) = answer(&task.await.unwrap().unwrap());
    assert_eq!((status, json["status"].as_str()), (200, Some("processed")));

    // Every clone answers from the one environment: the redelivery is seen as a duplicate.
    let again = hook
        .handle(github_delivery(Format::FunctionUrl, "spawned-1"))
        .await;
    let (status, json) = answer(&again);
    assert_eq!((status, json["status"].as_str()), (200, Some("duplicate")));
    let c = db.client().await;
    assert_eq!(row(&c, "github", "buffer-1").await.unwrap().0, "done");
}

/// Every event a subscriber of the user's own receives: its target and its fields as text.
type Recorded = Arc<std::sync::Mutex<Vec<(String, BTreeMap<String, String>)>>>;

/// A `tracing` layer of the user's own that records every event.
struct Recorder(Recorded);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorder {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Fields(BTreeMap<String, String>);
        impl tracing::field::Visit for Fields {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                self.0.insert(field.name().into(), value.into());
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.insert(field.name().into(), format!("{value:?}"));
            }
        }
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        let target = event.metadata().target().to_owned();
        self.0.lock().unwrap().push((target, fields.0));
    }
}

#[tokio::test]
async fn a_users_own_subscriber_sees_each_delivery_as_an_event_with_its_fields() {
    use tracing_subscriber::layer::SubscriberExt as _;

    let db = TestDb::migrated().await;
    // The user's own subscriber, installed before hookclaim is built, as in their `main`.
    let recorded = Recorded::default();
    let subscriber = tracing_subscriber::registry().with(Recorder(recorded.clone()));
    let _installed = tracing::subscriber::set_default(subscriber);
    let config = support::config(&db.url, &[]);
    let (telemetry, lines) = Telemetry::default().in_memory();
    let hook = hookclaim::Webhook::from_config(&config, StoreOnly)
        .await
        .unwrap()
        .with_telemetry(telemetry);

    let body = br#"{"zen":"subscribed"}"#;
    let resp = hook
        .handle(github_request(Format::HttpApiV2, "sub-1", body, false))
        .await;

    assert_eq!(answer(&resp).0, 200);
    let recorded = recorded.lock().unwrap();
    let (_, fields) = recorded
        .iter()
        .find(|(target, _)| target == "hookclaim::delivery")
        .expect("the delivery's event reached the user's subscriber");
    for (field, value) in [
        ("message", "delivery"),
        ("source", "github"),
        ("delivery_id", "sub-1"),
        ("outcome", "processed"),
        ("status", "200"),
        ("attempt", "1"),
        ("payload_mismatch", "false"),
        ("replayed_body", "false"),
        ("cold_start", "true"),
    ] {
        assert_eq!(
            fields.get(field).map(String::as_str),
            Some(value),
            "{field}: {fields:?}"
        );
    }
    assert!(fields.contains_key("latency_ms"), "{fields:?}");
    // The delivery's line, with its metrics, went to the handler's writer, not to stdout.
    let line: serde_json::Value = serde_json::from_str(lines.lock().unwrap().trim()).unwrap();
    assert_eq!(
        (line["delivery_id"].as_str(), line["outcome"].as_str()),
        (Some("sub-1"), Some("processed"))
    );
    assert_eq!(
        line["_aws"]["CloudWatchMetrics"][0]["Namespace"],
        "hookclaim"
    );
}
