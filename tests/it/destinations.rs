//! The fan-out to destinations, against moto's server (SQS, EventBridge, Step Functions) and a
//! loopback HTTP endpoint, with a real PostgreSQL: each destination gets each delivery once and
//! every message carries the idempotency key; a crash between a destination's call and its
//! record repeats that destination once, under the same key, and no other; a FIFO queue drops
//! that repeat; a failed PutEvents entry is retried and leaves one event; payloads above a
//! destination's limit travel as claim checks; bad settings stop the cold start; a destination
//! that does not exist yet fails the delivery (retried, not dead) until it exists, and then a
//! re-drive delivers it; an event type too long for EventBridge's `DetailType` falls back to the
//! source name.
//!
//! Calls are counted on the server side, from moto's request recording.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hookclaim::aws::Aws;
use hookclaim::processor::idempotency_key;
use hookclaim::verify::Scheme;
use hookclaim::{Destinations, Secret, SecretFormat, Shipped};
use hookclaim_verify::Outgoing;
use serde_json::{json, Value};
use support::ledger::make_due;
use support::moto::{self, Call};
use support::{answer, count, endpoint, github_request, row, Format, TestDb};
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

/// The HTTP destinations' signing secret, in the variable their `secret_env` names.
const SIGNING_SECRET: &str = "whsec_aG9va2NsYWltLWRlc3RpbmF0aW9uLXRlc3Q=";
const SIGNING_SECRET_ENV: &str = "HOOKCLAIM_TEST_SIGNING_SECRET";

/// A name no other test uses, valid for queues, buses, rules and state machines.
fn unique(prefix: &str) -> String {
    format!("hc-{prefix}-{:010x}", fastrand::u64(..) >> 24)
}

/// The AWS configuration the tests' own clients use: moto's endpoint, as the code under test
/// reaches it.
async fn sdk() -> aws_config::SdkConfig {
    moto::server();
    hookclaim::aws::config_loader().load().await
}

/// A queue: its URL and ARN.
struct Queue {
    url: String,
    arn: String,
}

async fn queue(name: &str, fifo: bool) -> Queue {
    let sqs = aws_sdk_sqs::Client::new(&sdk().await);
    let mut req = sqs.create_queue().queue_name(name);
    if fifo {
        req = req.attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true");
    }
    let url = req
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "CreateQueue {name}: {}",
                aws_sdk_sqs::error::DisplayErrorContext(&e)
            )
        })
        .queue_url()
        .expect("queue URL")
        .to_string();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("GetQueueAttributes")
        .attributes()
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .cloned()
        })
        .expect("queue ARN");
    Queue { url, arn }
}

/// One message read back from a queue.
#[derive(Debug)]
struct Received {
    body: String,
    attributes: BTreeMap<String, String>,
    dedup_id: Option<String>,
    group_id: Option<String>,
}

/// Every message in the queue, each received and deleted once.
async fn drain(url: &str) -> Vec<Received> {
    let sqs = aws_sdk_sqs::Client::new(&sdk().await);
    let mut out = Vec::new();
    let mut empty = 0;
    while empty < 3 {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .visibility_timeout(60)
            .send()
            .await
            .expect("ReceiveMessage");
        let messages = got.messages();
        if messages.is_empty() {
            empty += 1;
            continue;
        }
        for m in messages {
            let system = m.attributes();
            let sys = |k: aws_sdk_sqs::types::MessageSystemAttributeName| {
                system.and_then(|a| a.get(&k).cloned())
            };
            out.push(Received {
                body: m.body().unwrap_or_default().to_string(),
                attributes: m
                    .message_attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| {
                                (k.clone(), v.string_value().unwrap_or_default().to_string())
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                dedup_id: sys(
                    aws_sdk_sqs::types::MessageSystemAttributeName::MessageDeduplicationId,
                ),
                group_id: sys(aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId),
            });
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().expect("receipt handle"))
                .send()
                .await
                .expect("DeleteMessage");
        }
    }
    out
}

/// An event bus whose events (of `event_source`) a rule copies into a queue, so a test can read
/// them back: the bus's name and the queue.
async fn bus_into_queue(event_source: &str) -> (String, Queue) {
    let events = aws_sdk_eventbridge::Client::new(&sdk().await);
    let bus = unique("bus");
    events
        .create_event_bus()
        .name(&bus)
        .send()
        .await
        .expect("CreateEventBus");
    let capture = queue(&unique("events"), false).await;
    let rule = unique("rule");
    events
        .put_rule()
        .name(&rule)
        .event_bus_name(&bus)
        .event_pattern(json!({"source": [event_source]}).to_string())
        .send()
        .await
        .expect("PutRule");
    events
        .put_targets()
        .rule(&rule)
        .event_bus_name(&bus)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("capture")
                .arn(&capture.arn)
                .build()
                .expect("target"),
        )
        .send()
        .await
        .expect("PutTargets");
    (bus, capture)
}

/// A state machine that does nothing; its ARN.
async fn state_machine() -> String {
    state_machine_named(&unique("machine")).await
}

/// A state machine called `name` that does nothing; its ARN.
async fn state_machine_named(name: &str) -> String {
    let sfn = aws_sdk_sfn::Client::new(&sdk().await);
    sfn.create_state_machine()
        .name(name)
        .definition(r#"{"StartAt":"Done","States":{"Done":{"Type":"Pass","End":true}}}"#)
        .role_arn("arn:aws:iam::123456789012:role/hookclaim-test")
        .send()
        .await
        .expect("CreateStateMachine")
        .state_machine_arn()
        .to_string()
}

/// The state machine's executions: (name, input).
async fn executions(machine: &str) -> Vec<(String, Value)> {
    let sfn = aws_sdk_sfn::Client::new(&sdk().await);
    let list = sfn
        .list_executions()
        .state_machine_arn(machine)
        .send()
        .await
        .expect("ListExecutions");
    let mut out = Vec::new();
    for e in list.executions() {
        let described = sfn
            .describe_execution()
            .execution_arn(e.execution_arn())
            .send()
            .await
            .expect("DescribeExecution");
        let input =
            serde_json::from_str(described.input().unwrap_or("null")).expect("input is JSON");
        out.push((e.name().to_string(), input));
    }
    out
}

/// The configuration's overrides for `destinations` on the github source, with the signing
/// secret its HTTP destinations read.
fn settings(destinations: &Value) -> Vec<(String, String)> {
    vec![
        ("HOOKCLAIM_PROCESSOR".into(), "destinations".into()),
        (
            "HOOKCLAIM_DESTINATIONS".into(),
            json!({ "github": destinations }).to_string(),
        ),
        (SIGNING_SECRET_ENV.into(), SIGNING_SECRET.into()),
        // A failed attempt is due again at once when a test makes it due.
        ("RETRY_BASE_SECS".into(), "60".into()),
    ]
}

fn refs(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The shipped processor as the binaries build it from `pairs`.
fn shipped(url: &str, pairs: &[(String, String)]) -> Shipped {
    let config = support::config(url, &refs(pairs));
    Shipped::from_config(&config).expect("processor from the configuration")
}

/// The calls of `target` (e.g. `AmazonSQS.SendMessage`) whose request mentions `key`.
fn calls_with(calls: &[Call], target: &str, key: &str) -> usize {
    calls
        .iter()
        .filter(|c| c.target == target && c.body.to_string().contains(key))
        .count()
}

const SEND_MESSAGE: &str = "AmazonSQS.SendMessage";
const PUT_EVENTS: &str = "AWSEvents.PutEvents";
const START_EXECUTION: &str = "AWSStepFunctions.StartExecution";

/// Runs the retention function once over `db` with the processor `pairs` configure: the
/// scheduled re-drive.
async fn redrive(db: &TestDb, pairs: &[(String, String)]) -> hookclaim::retention::Report {
    let retention = support::retention(&db.url, &refs(pairs), shipped(&db.url, pairs)).await;
    retention
        .handle(json!({}), SystemTime::now() + Duration::from_secs(30))
        .await
        .expect("retention run")
}

async fn progress(c: &tokio_postgres::Client, id: &str) -> Vec<String> {
    c.query(
        "SELECT destination FROM hookclaim_destination_progress WHERE delivery_id = $1
          ORDER BY recorded_at, destination",
        &[&id],
    )
    .await
    .expect("read progress")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[tokio::test]
async fn each_destination_receives_each_delivery_once_and_every_message_carries_the_key() {
    let db = TestDb::migrated().await;
    let fifo = queue(&format!("{}.fifo", unique("orders")), true).await;
    let plain = queue(&unique("audit"), false).await;
    let event_source = format!("hookclaim.test.{}", unique("src"));
    let (bus, events) = bus_into_queue(&event_source).await;
    let machine = state_machine().await;
    let (url, http_calls) = endpoint::start(200).await;
    let pairs = settings(&json!([
        {"kind": "sqs", "queue_url": fifo.url, "group_pointer": "/repository/owner"},
        {"kind": "sqs", "queue_url": plain.url},
        {"kind": "eventbridge", "bus": bus, "source": event_source},
        {"kind": "stepfunctions", "state_machine_arn": machine},
        {"kind": "http", "url": url, "secret_env": SIGNING_SECRET_ENV},
    ]));
    let hook = support::webhook(&db.url, &refs(&pairs), shipped(&db.url, &pairs)).await;

    let ids = ["fan-1", "fan-2", "fan-3"];
    let body = |id: &str| format!(r#"{{"repository":{{"owner":"octo"}},"delivery":"{id}"}}"#);
    let request = |id: &str| github_request(Format::HttpApiV2, id, body(id).as_bytes(), false);
    for id in ids {
        let first = hook.handle(request(id)).await;
        assert_eq!(
            answer(&first),
            (200, json!({"status": "processed", "delivery_id": id}))
        );
        let again = hook.handle(request(id)).await;
        assert_eq!(answer(&again).1["status"], "duplicate");
    }

    let key = |id: &str| idempotency_key("github", id);
    let c = db.client().await;
    for id in ids {
        assert_eq!(row(&c, "github", id).await.unwrap().0, "done");
        assert_eq!(
            progress(&c, id).await.len(),
            5,
            "{id}: every destination recorded"
        );
    }

    // SQS FIFO: one message per delivery, deduplicated on the key, grouped by the pointer.
    let messages = drain(&fifo.url).await;
    assert_eq!(messages.len(), 3, "{messages:?}");
    for (m, id) in messages.iter().zip(ids) {
        assert_eq!(m.body, body(id));
        assert_eq!(m.attributes["idempotency_key"], key(id));
        assert_eq!(m.attributes["delivery_id"], id);
        assert_eq!(m.dedup_id.as_deref(), Some(key(id).as_str()));
        assert_eq!(m.group_id.as_deref(), Some("octo"));
    }
    // SQS standard.
    let mut messages = drain(&plain.url).await;
    messages.sort_by(|a, b| a.body.cmp(&b.body));
    assert_eq!(messages.len(), 3, "{messages:?}");
    for (m, id) in messages.iter().zip(ids) {
        assert_eq!(m.body, body(id));
        assert_eq!(m.attributes["idempotency_key"], key(id));
    }
    // EventBridge, read back through a rule into a queue.
    let mut delivered: Vec<Value> = drain(&events.url)
        .await
        .iter()
        .map(|m| serde_json::from_str(&m.body).expect("event JSON"))
        .collect();
    delivered.sort_by_key(|e| {
        e["detail"]["hookclaim"]["delivery_id"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    assert_eq!(delivered.len(), 3, "{delivered:?}");
    for (e, id) in delivered.iter().zip(ids) {
        assert_eq!(e["source"], event_source.as_str());
        assert_eq!(e["detail-type"], "push");
        // Detail is the payload, with the delivery's names added as `hookclaim`.
        let mut detail = e["detail"].clone();
        let names = detail
            .as_object_mut()
            .and_then(|o| o.remove("hookclaim"))
            .expect("the hookclaim member");
        assert_eq!(names["idempotency_key"], key(id));
        assert_eq!(names["delivery_id"], id);
        assert_eq!(names["event_type"], "push");
        assert_eq!(detail, serde_json::from_str::<Value>(&body(id)).unwrap());
    }
    // Step Functions: one execution per delivery, named after its key.
    let mut started = executions(&machine).await;
    started.sort_by(|a, b| {
        a.1["hookclaim"]["delivery_id"]
            .to_string()
            .cmp(&b.1["hookclaim"]["delivery_id"].to_string())
    });
    assert_eq!(started.len(), 3, "{started:?}");
    for ((name, input), id) in started.iter().zip(ids) {
        assert_eq!(name, &key(id));
        assert_eq!(input["hookclaim"]["idempotency_key"], key(id));
        assert_eq!(input["delivery"], id);
        assert_eq!(input["repository"]["owner"], "octo");
    }
    // HTTP: one signed call per delivery, webhook-id the key.
    let calls = http_calls.lock().await;
    assert_eq!(calls.len(), 3);
    for (call, id) in calls.iter().zip(ids) {
        assert_eq!(call.headers["webhook-id"], key(id).as_str());
        assert_eq!(call.body, body(id).as_bytes());
    }
}

#[tokio::test]
async fn a_signed_forward_verifies_with_the_standard_webhooks_verifier() {
    let db = TestDb::migrated().await;
    let (url, http_calls) = endpoint::start(200).await;
    let pairs = settings(&json!([{"kind": "http", "url": url, "secret_env": SIGNING_SECRET_ENV}]));
    let hook = support::webhook(&db.url, &refs(&pairs), shipped(&db.url, &pairs)).await;
    let body = br#"{"action":"opened","number":7}"#;
    let resp = hook
        .handle(github_request(Format::HttpApiV2, "signed-1", body, false))
        .await;
    assert_eq!(answer(&resp).0, 200);

    let calls = http_calls.lock().await;
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    // The receiver's side: hookclaim's own Standard Webhooks verifier, as any receiver would
    // configure it (the whsec_ secret, a 300 s tolerance).
    let scheme = Scheme::Standard {
        tolerance_secs: 300,
        raw_secrets: false,
    };
    let secret = Secret::parse(SIGNING_SECRET, SecretFormat::StandardWebhooks).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let verified = hookclaim::verify::verify(&scheme, &[secret], &call.headers, &call.body, now)
        .expect("hookclaim's signed forward verifies as Standard Webhooks");
    assert_eq!(verified.delivery_id, idempotency_key("github", "signed-1"));
    // Another secret does not verify it, nor does a changed body.
    let other = Secret::parse(
        "whsec_b3RoZXItc2VjcmV0LWtleQ==",
        SecretFormat::StandardWebhooks,
    )
    .unwrap();
    assert!(hookclaim::verify::verify(&scheme, &[other], &call.headers, &call.body, now).is_err());
    let secret = Secret::parse(SIGNING_SECRET, SecretFormat::StandardWebhooks).unwrap();
    let tampered = br#"{"action":"opened","number":8}"#;
    assert!(hookclaim::verify::verify(&scheme, &[secret], &call.headers, tampered, now).is_err());
}

/// The failpoint: the record of `destination` fails as if the process had died between the
/// destination's answer and its record.
async fn fail_recording(c: &tokio_postgres::Client, destination: &str) {
    c.batch_execute(&format!(
        "CREATE FUNCTION hookclaim_test_die() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'the process died before recording'; END $$;
         CREATE TRIGGER hookclaim_test_die BEFORE INSERT ON hookclaim_destination_progress
           FOR EACH ROW WHEN (NEW.destination = '{destination}') EXECUTE FUNCTION hookclaim_test_die();"
    ))
    .await
    .expect("install the failpoint");
}

async fn recover(c: &tokio_postgres::Client) {
    c.batch_execute(
        "DROP TRIGGER hookclaim_test_die ON hookclaim_destination_progress;
         DROP FUNCTION hookclaim_test_die();",
    )
    .await
    .expect("remove the failpoint");
}

/// Which destination of three dies between its call and its record.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Dies {
    StepFunctions,
    Fifo,
    EventBridge,
}

/// Three destinations (Step Functions, a FIFO queue, EventBridge); the one `dies` names is
/// called and then not recorded; the scheduled re-drive finishes the delivery. Returns the
/// calls each destination received for the delivery, and what each holds afterwards.
async fn crash_between_call_and_record(dies: Dies) {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let machine = state_machine().await;
    let fifo = queue(&format!("{}.fifo", unique("crash")), true).await;
    let event_source = format!("hookclaim.test.{}", unique("src"));
    let (bus, events) = bus_into_queue(&event_source).await;
    let pairs = settings(&json!([
        {"kind": "stepfunctions", "state_machine_arn": machine, "name": "workflow"},
        {"kind": "sqs", "queue_url": fifo.url, "name": "queue"},
        {"kind": "eventbridge", "bus": bus, "source": event_source, "name": "bus"},
    ]));
    let (dying, before) = match dies {
        Dies::StepFunctions => ("workflow", 0),
        Dies::Fifo => ("queue", 1),
        Dies::EventBridge => ("bus", 2),
    };
    let id = format!("crash-{dying}");
    let key = idempotency_key("github", &id);
    let body = format!(r#"{{"delivery":"{id}"}}"#);
    let hook = support::webhook(&db.url, &refs(&pairs), shipped(&db.url, &pairs)).await;

    fail_recording(&c, dying).await;
    let resp = hook
        .handle(github_request(
            Format::HttpApiV2,
            &id,
            body.as_bytes(),
            false,
        ))
        .await;
    assert_eq!(answer(&resp).0, 503, "{:?}", answer(&resp));
    let (status, _, error) = row(&c, "github", &id).await.unwrap();
    assert_eq!(status, "failed");
    assert!(error.unwrap_or_default().contains("died before recording"));
    assert_eq!(
        progress(&c, &id).await.len(),
        before,
        "destinations before it stay recorded"
    );

    recover(&c).await;
    make_due(&c, &id).await;
    let report = redrive(&db, &pairs).await;
    assert_eq!(report.redriven.ok, 1, "{report:?}");
    assert_eq!(row(&c, "github", &id).await.unwrap().0, "done");
    assert_eq!(progress(&c, &id).await.len(), 3);

    // Calls as moto received them: the dying destination twice with the same key, the others
    // once (the ones recorded before it were skipped by the re-drive).
    let calls = moto::server().calls();
    let expect = |d: Dies| if d == dies { 2 } else { 1 };
    let sent = [
        (
            Dies::StepFunctions,
            calls_with(&calls, START_EXECUTION, &key),
        ),
        (Dies::Fifo, calls_with(&calls, SEND_MESSAGE, &key)),
        (Dies::EventBridge, calls_with(&calls, PUT_EVENTS, &key)),
    ];
    println!("calls per destination when {dies:?} dies before its record: {sent:?}");
    for (d, n) in sent {
        assert_eq!(n, expect(d), "{d:?}: {sent:?}");
    }

    // What the destinations hold: one execution named after the key (Step Functions refuses or
    // returns the repeat); one message (the FIFO queue drops a repeat within its window); and
    // for EventBridge, which does not deduplicate, the repeat arrives with the same key.
    let started = executions(&machine).await;
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0].0, key);
    let messages = drain(&fifo.url).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].dedup_id.as_deref(), Some(key.as_str()));
    let delivered = drain(&events.url).await;
    assert_eq!(delivered.len(), expect(Dies::EventBridge), "{delivered:?}");
    for m in &delivered {
        let e: Value = serde_json::from_str(&m.body).unwrap();
        assert_eq!(e["detail"]["hookclaim"]["idempotency_key"], key.as_str());
    }
}

#[tokio::test]
async fn a_crash_before_step_functions_is_recorded_restarts_the_same_execution_name_only() {
    crash_between_call_and_record(Dies::StepFunctions).await;
}

#[tokio::test]
async fn a_crash_before_a_fifo_send_is_recorded_repeats_it_once_and_the_queue_drops_the_repeat() {
    crash_between_call_and_record(Dies::Fifo).await;
}

#[tokio::test]
async fn a_crash_before_put_events_is_recorded_repeats_the_event_once_with_the_same_key() {
    crash_between_call_and_record(Dies::EventBridge).await;
}

/// A loopback proxy in front of moto that answers the first PutEvents itself with one failed
/// entry (the event is not put) and passes everything else through. It stops after a minute.
async fn failing_first_put_events(upstream: &str) -> (String, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_string();
    let put_events = Arc::new(Mutex::new(0usize));
    let seen = put_events.clone();
    tokio::spawn(tokio::time::timeout(Duration::from_secs(60), async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                while let Some((head, body)) = endpoint::read_http(&mut client).await {
                    let is_put_events = head
                        .to_lowercase()
                        .contains("x-amz-target: awsevents.putevents");
                    let first = if is_put_events {
                        let mut n = seen.lock().await;
                        *n += 1;
                        *n == 1
                    } else {
                        false
                    };
                    let reply = if first {
                        let failed = r#"{"FailedEntryCount":1,"Entries":[{"ErrorCode":"InternalFailure","ErrorMessage":"injected by the test"}]}"#;
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.1\r\ncontent-length: {}\r\n\r\n",
                            failed.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(failed.as_bytes());
                        r
                    } else {
                        let Ok(mut up) = tokio::net::TcpStream::connect(&upstream).await else {
                            return;
                        };
                        let mut request = head.clone().into_bytes();
                        request.extend_from_slice(b"\r\n\r\n");
                        request.extend_from_slice(&body);
                        if up.write_all(&request).await.is_err() {
                            return;
                        }
                        let Some((head, body)) = endpoint::read_http(&mut up).await else {
                            return;
                        };
                        let mut r = head.into_bytes();
                        r.extend_from_slice(b"\r\n\r\n");
                        r.extend_from_slice(&body);
                        r
                    };
                    if client.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    }));
    (url, put_events)
}

#[tokio::test]
async fn a_failed_put_events_entry_is_retried_and_leaves_one_event_and_earlier_progress_stays() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let plain = queue(&unique("first"), false).await;
    let event_source = format!("hookclaim.test.{}", unique("src"));
    let (bus, events) = bus_into_queue(&event_source).await;
    let (proxy, put_events) = failing_first_put_events(&moto::server().url).await;
    let listed = json!({"github": [
        {"kind": "sqs", "queue_url": plain.url, "name": "queue"},
        {"kind": "eventbridge", "bus": bus, "source": event_source, "name": "bus"},
    ]});
    let no_secrets = |_: &str| None;
    let config = hookclaim::config::parse_destinations(&listed.to_string(), &no_secrets).unwrap();
    // The processor's AWS calls go through the proxy; everything else about it is as deployed.
    let through_proxy = || async {
        let sdk = hookclaim::aws::config_loader()
            .endpoint_url(&proxy)
            .load()
            .await;
        Destinations::new(&config, Arc::new(Aws::with_config(sdk))).unwrap()
    };
    moto::server();
    let hook = support::webhook(&db.url, &[], through_proxy().await).await;
    let id = "partial-1";
    let key = idempotency_key("github", id);

    let resp = hook
        .handle(github_request(Format::HttpApiV2, id, br#"{"n":1}"#, false))
        .await;
    assert_eq!(answer(&resp).0, 503, "{:?}", answer(&resp));
    let (status, attempt, error) = row(&c, "github", id).await.unwrap();
    let error = error.unwrap_or_default();
    assert_eq!((status.as_str(), attempt), ("failed", 1));
    assert!(
        error.starts_with("destination bus: PutEvents: the entry failed: InternalFailure"),
        "{error}"
    );
    let waits = count(
        &c,
        "SELECT count(*) FROM hookclaim_deliveries WHERE next_attempt_at > now() + interval '1 second'",
    )
    .await;
    assert_eq!(waits, 1, "the retry waits for its backoff");
    assert_eq!(
        progress(&c, id).await,
        ["queue"],
        "the queue's progress is kept"
    );

    make_due(&c, id).await;
    let retention = support::retention(&db.url, &[], through_proxy().await).await;
    let report = retention
        .handle(json!({}), SystemTime::now() + Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(report.redriven.ok, 1, "{report:?}");
    assert_eq!(row(&c, "github", id).await.unwrap().0, "done");
    assert_eq!(
        *put_events.lock().await,
        2,
        "the failed PutEvents and its retry"
    );

    let delivered = drain(&events.url).await;
    assert_eq!(
        delivered.len(),
        1,
        "one event for the delivery: {delivered:?}"
    );
    let e: Value = serde_json::from_str(&delivered[0].body).unwrap();
    assert_eq!(e["detail"]["hookclaim"]["idempotency_key"], key.as_str());
    assert_eq!(
        drain(&plain.url).await.len(),
        1,
        "the queue was not sent to again"
    );
    assert_eq!(calls_with(&moto::server().calls(), SEND_MESSAGE, &key), 1);
}

#[tokio::test]
async fn a_payload_above_a_destinations_limit_is_sent_as_a_claim_check() {
    let db = TestDb::migrated().await;
    let plain = queue(&unique("large"), false).await;
    let event_source = format!("hookclaim.test.{}", unique("src"));
    let (bus, events) = bus_into_queue(&event_source).await;
    let machine = state_machine().await;
    let (url, http_calls) = endpoint::start(200).await;
    let pairs = settings(&json!([
        {"kind": "sqs", "queue_url": plain.url, "max_bytes": 4096},
        {"kind": "eventbridge", "bus": bus, "source": event_source, "max_bytes": 4096},
        // Step Functions' own limit, 256 KiB.
        {"kind": "stepfunctions", "state_machine_arn": machine},
        {"kind": "http", "url": url, "secret_env": SIGNING_SECRET_ENV, "max_bytes": 4096},
    ]));
    let hook = support::webhook(&db.url, &refs(&pairs), shipped(&db.url, &pairs)).await;
    let id = "large-1";
    let key = idempotency_key("github", id);
    let body = format!(r#"{{"blob":"{}"}}"#, "x".repeat(300_000));
    let resp = hook
        .handle(github_request(
            Format::HttpApiV2,
            id,
            body.as_bytes(),
            false,
        ))
        .await;
    assert_eq!(answer(&resp).0, 200, "{:?}", answer(&resp));

    let check = |text: &str| {
        let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(v["hookclaim"]["source"], "github", "{v}");
        assert_eq!(v["hookclaim"]["delivery_id"], id, "{v}");
        assert_eq!(v["hookclaim"]["idempotency_key"], key.as_str(), "{v}");
        assert_eq!(v["claim_check"], "too_large", "{v}");
        assert_eq!(v["payload_bytes"], body.len(), "{v}");
        assert!(
            text.len() < 400,
            "a claim check is small: {} bytes",
            text.len()
        );
    };
    let messages = drain(&plain.url).await;
    assert_eq!(messages.len(), 1);
    check(&messages[0].body);
    assert_eq!(messages[0].attributes["claim_check"], "too_large");
    let delivered = drain(&events.url).await;
    assert_eq!(delivered.len(), 1);
    let e: Value = serde_json::from_str(&delivered[0].body).unwrap();
    check(&e["detail"].to_string());
    let started = executions(&machine).await;
    assert_eq!(started.len(), 1);
    check(&started[0].1.to_string());
    let calls = http_calls.lock().await;
    check(std::str::from_utf8(&calls[0].body).unwrap());
    assert_eq!(calls[0].headers["content-type"], "application/json");

    // The claim check is enough to read the whole payload back from the ledger.
    let c = db.client().await;
    let stored: Vec<u8> = c
        .query_one(
            "SELECT payload FROM hookclaim_deliveries WHERE source = $1 AND delivery_id = $2",
            &[&"github", &id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, body.as_bytes());
}

#[tokio::test]
async fn a_bad_destination_setting_fails_the_cold_start_naming_it() {
    let base = support::local_env();
    let cases: &[(Option<&str>, &str)] = &[
        (None, "needs a JSON object"),
        (Some("not json"), "invalid JSON"),
        (Some(r#"{"github":[{"kind":"sqs"}]}"#), "queue_url"),
        (
            Some(r#"{"github":[{"kind":"pubsub","topic":"x"}]}"#),
            "kind \"pubsub\" is not one of sqs, eventbridge, stepfunctions, http",
        ),
        (
            Some(r#"{"nosuch":[{"kind":"sqs","queue_url":"https://q/1/a"}]}"#),
            "HOOKCLAIM_SOURCES",
        ),
        (
            Some(r#"{"github":[{"kind":"http","url":"https://x","secret_env":"UNSET_SECRET"}]}"#),
            "UNSET_SECRET",
        ),
        (
            Some(
                r#"{"github":[{"kind":"stepfunctions","state_machine_arn":"arn:aws:states:us-east-1:1:stateMachine:m","max_bytes":300000}]}"#,
            ),
            "max_bytes",
        ),
    ];
    for (destinations, expect) in cases {
        let mut env = base.clone();
        env.insert("DATABASE_URL".into(), "postgres://u@localhost/db".into());
        env.insert("HOOKCLAIM_PROCESSOR".into(), "destinations".into());
        if let Some(d) = destinations {
            env.insert("HOOKCLAIM_DESTINATIONS".into(), d.to_string());
        }
        let e = hookclaim::Config::from_lookup(|k| env.get(k).cloned()).unwrap_err();
        assert_eq!(e.setting, "HOOKCLAIM_DESTINATIONS", "{destinations:?}: {e}");
        assert!(e.to_string().contains(expect), "{destinations:?}: {e}");
    }
}

#[tokio::test]
async fn a_destination_that_does_not_exist_yet_fails_the_delivery_until_it_exists_then_a_redrive_delivers(
) {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    // Names whose queue and state machine are created only later, as after a deploy done in the
    // wrong order: their URL and ARN are those of existing ones with the name changed.
    let queue_name = unique("later");
    let machine_name = unique("later-machine");
    let existing = queue(&unique("exists"), false).await;
    let queue_url = existing
        .url
        .replace(existing.url.rsplit('/').next().unwrap(), &queue_name);
    let existing_machine = state_machine().await;
    let machine_arn =
        existing_machine.replace(existing_machine.rsplit(':').next().unwrap(), &machine_name);
    let pairs = settings(&json!([
        {"kind": "sqs", "queue_url": queue_url, "name": "queue"},
        {"kind": "stepfunctions", "state_machine_arn": machine_arn, "name": "machine"},
    ]));
    let hook = support::webhook(&db.url, &refs(&pairs), shipped(&db.url, &pairs)).await;
    let id = "later-1";

    // Neither exists: the sender is asked to retry, the delivery is failed (not dead) and due
    // again after its backoff.
    let resp = hook
        .handle(support::github_delivery(Format::HttpApiV2, id))
        .await;
    let first = answer(&resp);
    let (status, attempt, error) = row(&c, "github", id).await.unwrap();
    let first_error = error.unwrap_or_default();
    println!("[destinations] queue and state machine missing: {first:?}, row {status} attempt {attempt}: {first_error}");
    assert_eq!(first, (503, json!({"status": "failed", "delivery_id": id})));
    assert!(resp.headers().contains_key("retry-after"));
    assert_eq!((status.as_str(), attempt), ("failed", 1));
    assert!(
        first_error.starts_with("destination queue: SendMessage"),
        "{first_error}"
    );
    // The SDK's error summarised to its code and message, not its whole text.
    assert!(
        first_error.contains("NonExistentQueue") && first_error.len() < 700,
        "{first_error}"
    );
    assert!(!first_error.contains("raw: Response"), "{first_error}");

    // The queue is created; the state machine still is not: the re-drive delivers to the queue,
    // and the delivery fails again on the state machine.
    queue(&queue_name, false).await;
    make_due(&c, id).await;
    let report = redrive(&db, &pairs).await;
    let (status, attempt, error) = row(&c, "github", id).await.unwrap();
    let second_error = error.unwrap_or_default();
    println!("[destinations] queue created: re-drive {:?}, row {status} attempt {attempt}: {second_error}", report.redriven);
    assert_eq!((status.as_str(), attempt), ("failed", 2));
    assert!(
        second_error.starts_with("destination machine: StartExecution"),
        "{second_error}"
    );
    assert_eq!(progress(&c, id).await, ["queue"]);

    // The state machine is created too: the next re-drive finishes the delivery, sending to the
    // queue no second time.
    state_machine_named(&machine_name).await;
    make_due(&c, id).await;
    let report = redrive(&db, &pairs).await;
    let (status, attempt, _) = row(&c, "github", id).await.unwrap();
    println!(
        "[destinations] state machine created: re-drive {:?}, row {status} attempt {attempt}",
        report.redriven
    );
    assert_eq!(report.redriven.ok, 1, "{report:?}");
    assert_eq!((status.as_str(), attempt), ("done", 3));
    assert_eq!(progress(&c, id).await, ["queue", "machine"]);
    assert_eq!(drain(&queue_url).await.len(), 1);
    let started = executions(&machine_arn).await;
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].0, idempotency_key("github", id));
}

#[tokio::test]
async fn an_event_type_too_long_for_eventbridge_is_put_under_the_source_name() {
    let db = TestDb::migrated().await;
    let event_source = format!("hookclaim.test.{}", unique("src"));
    let (bus, events) = bus_into_queue(&event_source).await;
    let pairs = settings(&json!([{"kind": "eventbridge", "bus": bus, "source": event_source}]));
    let hook = support::webhook(&db.url, &refs(&pairs), shipped(&db.url, &pairs)).await;
    // GitHub's event type comes from its header; 200 characters is within what hookclaim keeps
    // (256) and over what EventBridge takes as a DetailType (128).
    let long_type = format!("push.{}", "x".repeat(195));
    let fits = "t".repeat(128);
    let mut delivered = Vec::new();
    for (id, event_type) in [("long-type", long_type.as_str()), ("fits", fits.as_str())] {
        let body = format!(r#"{{"n":"{id}"}}"#);
        let body = body.as_bytes();
        let sent = Outgoing::new(body, support::EVENTS_SIGNED_AT as i64)
            .header("content-type", "application/json")
            .event_type(event_type)
            .id(id);
        let signed = support::sign_as("github", support::GITHUB_SECRET, &sent);
        let req = support::request(
            Format::HttpApiV2,
            "POST",
            "github",
            &support::header_pairs(&signed),
            body,
            false,
        );
        let resp = hook.handle(req).await;
        assert_eq!(answer(&resp).0, 200, "{id}: {:?}", answer(&resp));
    }
    for received in drain(&events.url).await {
        let e: Value = serde_json::from_str(&received.body).unwrap();
        delivered.push((
            e["detail"]["hookclaim"]["delivery_id"]
                .as_str()
                .unwrap()
                .to_string(),
            e["detail-type"].as_str().unwrap().to_string(),
            e["detail"]["hookclaim"]["event_type"]
                .as_str()
                .unwrap()
                .to_string(),
        ));
    }
    delivered.sort();
    println!(
        "[destinations] detail-types put: {:?}",
        delivered
            .iter()
            .map(|(id, t, _)| (id.as_str(), t.chars().count()))
            .collect::<Vec<_>>()
    );
    assert_eq!(delivered.len(), 2, "{delivered:?}");
    let (_, fits_type, _) = &delivered[0];
    assert_eq!(fits_type, &fits, "a type EventBridge takes is kept");
    let (_, long_detail_type, long_event_type) = &delivered[1];
    assert_eq!(long_detail_type, "github", "the source name stands in");
    assert_eq!(
        long_event_type, &long_type,
        "the whole type is in the detail"
    );
    for (_, detail_type, _) in &delivered {
        assert!(detail_type.chars().count() <= 128, "{detail_type}");
    }
}

#[tokio::test]
async fn purging_a_delivery_removes_its_progress() {
    let db = TestDb::migrated().await;
    let c = db.client().await;
    let plain = queue(&unique("purge"), false).await;
    let pairs = settings(&json!([{"kind": "sqs", "queue_url": plain.url}]));
    let hook = support::webhook(&db.url, &refs(&pairs), shipped(&db.url, &pairs)).await;
    for id in ["old-1", "old-2", "new-1"] {
        let resp = hook
            .handle(support::github_delivery(Format::HttpApiV2, id))
            .await;
        assert_eq!(answer(&resp).0, 200);
    }
    // Past KEY_RETENTION_DAYS too: GitHub's keys outlive their payloads, and progress goes with
    // the key's row.
    c.batch_execute(
        "UPDATE hookclaim_deliveries SET completed_at = now() - interval '400 days'
          WHERE delivery_id LIKE 'old-%'",
    )
    .await
    .unwrap();
    let report = redrive(&db, &pairs).await;
    assert_eq!(report.purged, 2, "{report:?}");
    let left = count(&c, "SELECT count(*) FROM hookclaim_destination_progress").await;
    assert_eq!(left, 1, "only the kept delivery's progress is left");
    assert_eq!(progress(&c, "new-1").await.len(), 1);
}

#[tokio::test]
async fn a_destination_that_answers_after_the_claim_was_taken_over_is_not_recorded() {
    let db = TestDb::migrated().await;
    // An endpoint that, while the call is in flight, lets another invocation take the delivery
    // over (its lease ended): this attempt is now a zombie.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    let takeover = db.client().await;
    tokio::spawn(tokio::time::timeout(Duration::from_secs(30), async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        while endpoint::read_http(&mut sock).await.is_some() {
            takeover
                .batch_execute(
                    "UPDATE hookclaim_deliveries SET attempt = attempt + 1, lease_owner = 'newer'
                      WHERE delivery_id = 'zombie-1'",
                )
                .await
                .unwrap();
            let reply = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
            if sock.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
    }));
    let pairs = settings(&json!([{"kind": "http", "url": url, "secret_env": SIGNING_SECRET_ENV}]));
    let hook = support::webhook(&db.url, &refs(&pairs), shipped(&db.url, &pairs)).await;

    let resp = hook
        .handle(support::github_delivery(Format::HttpApiV2, "zombie-1"))
        .await;

    // The newer attempt holds the delivery; the zombie records nothing and promises nothing
    // (503, busy).
    assert_eq!(answer(&resp).0, 503, "{:?}", answer(&resp));
    assert_eq!(answer(&resp).1["status"], "busy");
    let c = db.client().await;
    assert!(progress(&c, "zombie-1").await.is_empty());
    let (status, attempt, _) = row(&c, "github", "zombie-1").await.unwrap();
    assert_eq!((status.as_str(), attempt), ("processing", 2));
}
