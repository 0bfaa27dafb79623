//! The shipped fan-out: each source's deliveries go to a list of destinations (SQS queues,
//! EventBridge buses, Step Functions state machines, signed HTTP endpoints), each of them once.
//!
//! Every destination is called with the delivery's idempotency key in a place it deduplicates
//! on (a FIFO queue's deduplication id, an execution's name, `webhook-id`) or that consumers
//! read. Each destination's completion is recorded as soon as it answers, in a statement of its
//! own that commits whatever the delivery's transaction concludes and lands only while this
//! attempt still holds the claim: each is a step of the delivery, recorded with
//! [`Work::record_step`] as a processor of your own records its steps. A re-drive skips the destinations recorded, so
//! a crash after destination 1 of 3 never sends to destination 1 again; the one that was being
//! called when the crash came gets one repeat, under the same key.
//!
//! EventBridge and Step Functions get the payload with a `hookclaim` member added that names the
//! delivery (its key among them); SQS and HTTP get the payload as received, the names beside it.
//! A message above a destination's size limit, or one the destination cannot carry (EventBridge
//! and Step Functions take JSON, SQS takes text), is replaced by a claim check: a small JSON
//! object naming the delivery, with which a consumer reads the stored payload.

mod eventbridge;
mod http;
mod sqs;
mod stepfunctions;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use serde_json::{json, Value};

use crate::aws::Aws;
use crate::config::{DestinationConfig, Destinations as DestinationsConfig, Target};
use crate::observe::{self, Metric, Telemetry};
use crate::keyed::ClientError;
use crate::error::StartupError;
use crate::processor::{Delivery, ProcessError, Processor};
use crate::work::Work;

/// Fans each delivery out to its source's destinations (`HOOKCLAIM_PROCESSOR=destinations`).
/// A source without destinations is stored only.
pub struct Destinations {
    by_source: BTreeMap<String, Vec<Destination>>,
    aws: Arc<Aws>,
    telemetry: Telemetry,
}

/// One configured destination.
struct Destination {
    name: String,
    timeout: Duration,
    max_bytes: Option<usize>,
    kind: Kind,
}

enum Kind {
    Sqs(sqs::Sqs),
    EventBridge(eventbridge::EventBridge),
    StepFunctions(stepfunctions::StepFunctions),
    // The HTTP client is much larger than the AWS kinds' few strings.
    Http(Box<http::Http>),
}

/// Why a destination did not take a delivery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// Worth trying again later: throttling, a timeout, a server error.
    #[error("{0}")]
    Retry(String),
    /// Worth trying again, no sooner than the destination asked (its `Retry-After`).
    #[error("{0}")]
    RetryIn(String, Duration),
    /// Throttled: tried again no sooner than the destination asked, without spending an
    /// attempt ([`ProcessError::defer`]).
    #[error("{0}")]
    Defer(String, Duration),
    /// The destination's fault, not the delivery's: it does not exist (yet), access to it is
    /// denied, the request as configured is refused. Retried like [`DestinationError::Retry`],
    /// so fixing the configuration is enough, and counted (`destination_faults`) for an alarm.
    #[error("{0}")]
    Fault(String),
    /// This delivery can never be accepted, whatever the configuration: its content is refused.
    #[error("{0}")]
    Permanent(String),
}

impl Destinations {
    /// The destinations `config` lists, calling AWS through `aws`'s clients. Makes no call.
    pub fn new(config: &DestinationsConfig, aws: Arc<Aws>) -> Result<Self, ClientError> {
        let mut by_source = BTreeMap::new();
        for (source, list) in config {
            let destinations = list
                .iter()
                .map(Destination::new)
                .collect::<Result<Vec<_>, ClientError>>()?;
            by_source.insert(source.clone(), destinations);
        }
        Ok(Destinations {
            by_source,
            aws,
            telemetry: Telemetry::default(),
        })
    }

    #[doc(hidden)]
    /// Writes the destinations' fault lines (and their metric) as `telemetry` says: under the
    /// function's namespace (the shipped choice gives it), or in memory for tests.
    pub fn with_telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// Whether any source sends to a destination of `kind` (`sqs`, `eventbridge`…).
    fn uses(&self, kind: &str) -> bool {
        self.by_source
            .values()
            .flatten()
            .any(|d| d.kind.name() == kind)
    }
}

impl Destination {
    fn new(config: &DestinationConfig) -> Result<Self, ClientError> {
        let kind = match &config.target {
            Target::Sqs {
                queue_url,
                fifo,
                group_pointer,
            } => Kind::Sqs(sqs::Sqs::new(queue_url, *fifo, group_pointer.clone())),
            Target::EventBridge {
                bus,
                source,
                detail_type,
            } => Kind::EventBridge(eventbridge::EventBridge::new(
                bus,
                source,
                detail_type.clone(),
            )),
            Target::StepFunctions { state_machine_arn } => {
                Kind::StepFunctions(stepfunctions::StepFunctions::new(state_machine_arn))
            }
            Target::Http {
                url,
                secret,
                conflict_is_done,
            } => Kind::Http(Box::new(http::Http::new(
                url.clone(),
                secret.clone(),
                *conflict_is_done,
                config.timeout,
            )?)),
        };
        Ok(Destination {
            name: config.name.clone(),
            timeout: config.timeout,
            max_bytes: config.max_bytes,
            kind,
        })
    }

    /// Sends `d` once; what the destination answered (a message id…) when it took it.
    async fn send(&self, aws: &Aws, d: &Delivery) -> Result<Option<String>, DestinationError> {
        match &self.kind {
            Kind::Sqs(k) => k.send(aws.sqs().await, d, self.max_bytes).await,
            Kind::EventBridge(k) => k.send(aws.eventbridge().await, d, self.max_bytes).await,
            Kind::StepFunctions(k) => k.send(aws.step_functions().await, d, self.max_bytes).await,
            Kind::Http(k) => k.send(d, self.max_bytes).await,
        }
    }
}

impl Kind {
    fn name(&self) -> &'static str {
        match self {
            Kind::Sqs(_) => "sqs",
            Kind::EventBridge(_) => "eventbridge",
            Kind::StepFunctions(_) => "stepfunctions",
            Kind::Http(_) => "http",
        }
    }
}

impl Processor for Destinations {
    fn name(&self) -> &'static str {
        "destinations"
    }

    async fn start(&self) -> Result<(), StartupError> {
        // The clients are made once per execution environment, here at cold start, and only
        // for the kinds some source uses.
        if self.uses("sqs") {
            self.aws.sqs().await;
        }
        if self.uses("eventbridge") {
            self.aws.eventbridge().await;
        }
        if self.uses("stepfunctions") {
            self.aws.step_functions().await;
        }
        Ok(())
    }

    async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        let Some(destinations) = self.by_source.get(&d.source).filter(|l| !l.is_empty()) else {
            return Ok(());
        };
        // Steps are only ever recorded under a claim, and a delivery's first claim is attempt
        // 1: a first attempt has nothing to skip and saves the read.
        let recorded = match d.attempt {
            1 => Default::default(),
            _ => work.steps_done().await?,
        };
        for destination in destinations {
            if recorded.contains(&destination.name) {
                continue;
            }
            let name = &destination.name;
            let sent = tokio::time::timeout(destination.timeout, destination.send(&self.aws, d))
                .await
                .unwrap_or_else(|_| {
                    Err(DestinationError::Retry(format!(
                        "no answer within {} ms",
                        destination.timeout.as_millis()
                    )))
                });
            let detail = match sent {
                Ok(detail) => detail,
                Err(DestinationError::Retry(why)) => {
                    return Err(ProcessError::new(format!("destination {name}: {why}")))
                }
                Err(DestinationError::RetryIn(why, after)) => {
                    return Err(ProcessError::retry_in(
                        format!("destination {name}: {why}"),
                        after,
                    ))
                }
                Err(DestinationError::Defer(why, after)) => {
                    return Err(ProcessError::defer(
                        format!("destination {name}: {why}"),
                        after,
                    ))
                }
                Err(DestinationError::Fault(why)) => {
                    let now = SystemTime::now();
                    let line = fault_line(d, destination, &why, self.telemetry.namespace(), now);
                    self.telemetry.emit(&line);
                    return Err(ProcessError::new(format!("destination {name}: {why}")));
                }
                Err(DestinationError::Permanent(why)) => {
                    return Err(ProcessError::permanent(format!("destination {name}: {why}")))
                }
            };
            // A lost claim fails the step: this attempt's conclusion is fenced anyway.
            work.record_step(name, detail.as_deref()).await?;
        }
        Ok(())
    }
}

/// The metric an alarm watches for destinations that cannot take anything as configured.
pub const DESTINATION_FAULTS: &str = "destination_faults";

/// The log line of a destination's fault, an EMF document counting one [`DESTINATION_FAULTS`]
/// by destination and over all of them (an empty dimension set), so one alarm watches every
/// destination of the function. A fault needs someone to fix the configuration: an error.
fn fault_line(
    d: &Delivery,
    destination: &Destination,
    why: &str,
    namespace: &str,
    now: SystemTime,
) -> Value {
    let metrics = [Metric::new(DESTINATION_FAULTS, "Count")];
    json!({
        "_aws": observe::emf_block(now, namespace, &[&["destination"], &[]], &metrics),
        "level": observe::Level::Error.as_str(),
        "message": "destination fault: retried until the destination is fixed or attempts run out",
        "source": d.source,
        "delivery_id": observe::capped(&d.delivery_id, observe::MAX_DELIVERY_ID),
        "attempt": d.attempt,
        "destination": destination.name,
        "kind": destination.kind.name(),
        "error": observe::capped(why, observe::MAX_REASON),
        DESTINATION_FAULTS: 1,
    })
}

/// The member every JSON message and claim check carries: `"hookclaim":{"idempotency_key",
/// "source", "delivery_id", "event_type"}`, the delivery's names.
fn names_member(d: &Delivery) -> String {
    let names = serde_json::json!({
        "idempotency_key": d.idempotency_key(),
        "source": d.source,
        "delivery_id": d.delivery_id,
        "event_type": d.event_type,
    });
    format!("\"hookclaim\":{names}")
}

/// Why a claim check stands in for the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stand {
    /// The message would be larger than the destination's limit.
    TooLarge,
    /// The destination takes JSON and the payload is not JSON.
    NotJson,
    /// The destination takes text and the payload is not text it accepts.
    NotText,
}

impl Stand {
    fn as_str(self) -> &'static str {
        match self {
            Stand::TooLarge => "too_large",
            Stand::NotJson => "not_json",
            Stand::NotText => "not_text",
        }
    }
}

/// A claim check: the delivery's names, why the payload was left out, and its size. Enough to
/// read the stored row (`source`, `delivery_id`) and to deduplicate (`idempotency_key`).
fn claim_check(d: &Delivery, why: Stand) -> String {
    format!(
        "{{{},\"claim_check\":\"{}\",\"payload_bytes\":{}}}",
        names_member(d),
        why.as_str(),
        d.payload.len()
    )
}

/// The JSON EventBridge's `Detail` and Step Functions' input carry: the payload with the
/// `hookclaim` member added first, its bytes otherwise as received (never re-serialised), so
/// rules and states read the payload's own fields where they are. A payload that is JSON but
/// not an object, or whose object already has a `hookclaim` member, goes under `payload`
/// instead. `None` when the payload is not JSON.
fn with_names(d: &Delivery) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(&d.payload).ok()?;
    let text = std::str::from_utf8(&d.payload).ok()?.trim();
    let names = names_member(d);
    Some(match value {
        serde_json::Value::Object(members) if !members.contains_key("hookclaim") => {
            // The text of an object starts with its opening brace.
            let rest = text[1..].trim_start();
            match rest.starts_with('}') {
                true => format!("{{{names}}}"),
                false => format!("{{{names},{rest}"),
            }
        }
        _ => format!("{{{names},\"payload\":{text}}}"),
    })
}

/// The JSON message for a destination that takes JSON of at most `max_bytes`, of which
/// `overhead` go to other fields: the payload with the delivery's names, or a claim check.
fn json_message(d: &Delivery, max_bytes: Option<usize>, overhead: usize) -> (String, Option<Stand>) {
    match with_names(d) {
        None => (claim_check(d, Stand::NotJson), Some(Stand::NotJson)),
        Some(m) if max_bytes.is_some_and(|most| m.len() + overhead > most) => {
            (claim_check(d, Stand::TooLarge), Some(Stand::TooLarge))
        }
        Some(m) => (m, None),
    }
}

/// AWS error codes worth retrying whatever their HTTP status.
const RETRYABLE_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "ProvisionedThroughputExceededException",
    "RequestTimeout",
    "RequestTimeoutException",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "KMSThrottlingException",
    "KmsThrottled",
    "ExpiredToken",
    "ExpiredTokenException",
];

/// AWS error codes that refuse the delivery's content itself, which no configuration or later
/// attempt changes: characters SQS does not take, an execution input Step Functions refuses,
/// an event detail that is not JSON. (The messages hookclaim sends avoid each: a claim check
/// replaces what a destination cannot carry.)
const PER_DELIVERY_CODES: &[&str] = &[
    "InvalidMessageContents",
    "AWS.SimpleQueueService.InvalidMessageContents",
    "InvalidExecutionInput",
    "MalformedDetail",
];

/// Reads an AWS SDK error: no answer is worth retrying; an answer is read by [`read_error`];
/// a request the SDK could not even build is permanent.
fn sdk_failure<E>(operation: &str, e: &SdkError<E, HttpResponse>) -> DestinationError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match e {
        SdkError::ConstructionFailure(_) => DestinationError::Permanent(sdk_summary(operation, e)),
        SdkError::ServiceError(service) => read_error(
            service.raw().status().as_u16(),
            service.err().code().unwrap_or_default(),
            sdk_summary(operation, e),
        ),
        _ => DestinationError::Retry(sdk_summary(operation, e)),
    }
}

/// The most an SDK error's text may take in a recorded error: its code and message say what
/// happened; the rest of the SDK's text (request ids, raw responses, source chains) does not
/// belong in every failed row.
const MAX_SDK_ERROR: usize = 512;

/// An SDK error as it is recorded: the operation, and the service's error code and message
/// where the service answered; otherwise the SDK's own description, cut to [`MAX_SDK_ERROR`].
fn sdk_summary<E>(operation: &str, e: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let text = match e {
        SdkError::ServiceError(service) => {
            let err = service.err();
            format!(
                "{} (HTTP {}): {}",
                err.code().unwrap_or("unknown error"),
                service.raw().status().as_u16(),
                err.message().unwrap_or("no message")
            )
        }
        _ => DisplayErrorContext(e).to_string(),
    };
    let text = format!("{operation}: {text}");
    crate::observe::capped(&text, MAX_SDK_ERROR).into_owned()
}

/// Reads an AWS error answer (`status`, the HTTP status; 200 for a failed entry of a call that
/// succeeded) with error `code`: a throttle or a server error is worth retrying; a refusal of
/// the delivery's content ([`PER_DELIVERY_CODES`]) is permanent; anything else (the queue or
/// state machine does not exist, access is denied, the KMS key is disabled, a parameter of the
/// configuration is refused) is the destination's fault, retried until it is fixed.
fn read_error(status: u16, code: &str, text: String) -> DestinationError {
    if status >= 500 || status == 408 || status == 429 || RETRYABLE_CODES.contains(&code) {
        DestinationError::Retry(text)
    } else if PER_DELIVERY_CODES.contains(&code) {
        DestinationError::Permanent(text)
    } else {
        DestinationError::Fault(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Stripe delivery with `payload`, for the destination kinds' tests too.
    pub(super) fn delivery(payload: &[u8]) -> Delivery {
        Delivery {
            source: "stripe".into(),
            delivery_id: "evt_1".into(),
            event_type: Some("invoice.paid".into()),
            payload: payload.to_vec(),
            headers: BTreeMap::new(),
            attempt: 1,
        }
    }

    #[test]
    fn the_names_are_added_to_the_payload_as_received() {
        let d = delivery(br#" {"b": 1,  "a":[2]} "#);
        let m = with_names(&d).unwrap();
        assert!(m.starts_with(r#"{"hookclaim":{"#), "{m}");
        assert!(m.ends_with(r#"},"b": 1,  "a":[2]}"#), "{m}");
        let v: serde_json::Value = serde_json::from_str(&m).unwrap();
        assert_eq!(v["hookclaim"]["idempotency_key"], d.idempotency_key());
        assert_eq!(v["hookclaim"]["delivery_id"], "evt_1");
        assert_eq!(v["hookclaim"]["event_type"], "invoice.paid");
        assert_eq!(v["a"][0], 2);
        // An empty object, JSON that is not an object, and an object with a member of that name.
        for (payload, inner) in [
            (&b"{ }"[..], None),
            (b"[1,2]", Some(serde_json::json!([1, 2]))),
            (b"\"text\"", Some(serde_json::json!("text"))),
            (br#"{"hookclaim":7}"#, Some(serde_json::json!({"hookclaim": 7}))),
        ] {
            let m = with_names(&delivery(payload)).unwrap();
            let v: serde_json::Value = serde_json::from_str(&m).unwrap_or_else(|e| panic!("{e}: {m}"));
            assert_eq!(v["hookclaim"]["source"], "stripe", "{m}");
            assert_eq!(v.get("payload").cloned(), inner, "{m}");
        }
        assert!(with_names(&delivery(b"a=1&b=2")).is_none());
    }

    #[test]
    fn aws_errors_are_read_as_the_destinations_fault_unless_transient_or_about_the_content() {
        use DestinationError::{Fault, Permanent, Retry};
        type Class = fn(String) -> DestinationError;
        let cases: [(u16, &str, Class); 14] = [
            (400, "ThrottlingException", Retry),
            (400, "RequestThrottled", Retry),
            (429, "TooManyRequestsException", Retry),
            (500, "InternalFailure", Retry),
            (503, "ServiceUnavailable", Retry),
            (408, "", Retry),
            (200, "InternalFailure", Retry),
            (400, "AWS.SimpleQueueService.NonExistentQueue", Fault),
            (400, "StateMachineDoesNotExist", Fault),
            (400, "ResourceNotFoundException", Fault),
            (403, "AccessDeniedException", Fault),
            (400, "KMS.DisabledException", Fault),
            (400, "InvalidExecutionInput", Permanent),
            (400, "InvalidMessageContents", Permanent),
        ];
        for (status, code, class) in cases {
            let text = format!("{status} {code}");
            assert_eq!(read_error(status, code, text.clone()), class(text), "{status} {code}");
        }
        assert_eq!(
            read_error(200, "MalformedDetail", "x".into()),
            Permanent("x".into())
        );
    }

    #[test]
    fn a_fault_line_counts_one_fault_by_destination_and_over_all_of_them() {
        let destination = Destination::new(&DestinationConfig {
            name: "orders".into(),
            timeout: Duration::from_secs(1),
            max_bytes: None,
            target: Target::StepFunctions {
                state_machine_arn: "arn:aws:states:us-east-1:1:stateMachine:m".into(),
            },
        })
        .unwrap();
        let line = fault_line(
            &delivery(b"{}"),
            &destination,
            "StartExecution: StateMachineDoesNotExist",
            "hookclaim/test",
            SystemTime::UNIX_EPOCH,
        );
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Dimensions"], json!([["destination"], []]));
        assert_eq!(directive["Namespace"], "hookclaim/test");
        assert_eq!(directive["Metrics"][0]["Name"], DESTINATION_FAULTS);
        assert_eq!(line[DESTINATION_FAULTS], 1);
        assert_eq!(line["destination"], "orders");
        assert_eq!(line["kind"], "stepfunctions");
        assert_eq!(line["level"], "ERROR");
        assert_eq!(line["delivery_id"], "evt_1");
    }

    #[test]
    fn a_claim_check_names_the_delivery_and_says_why() {
        let d = delivery(&[b'x'; 3000]);
        let v: serde_json::Value = serde_json::from_str(&claim_check(&d, Stand::TooLarge)).unwrap();
        assert_eq!(v["hookclaim"]["source"], "stripe");
        assert_eq!(v["hookclaim"]["delivery_id"], "evt_1");
        assert_eq!(v["hookclaim"]["idempotency_key"], d.idempotency_key());
        assert_eq!(v["claim_check"], "too_large");
        assert_eq!(v["payload_bytes"], 3000);
        let (m, why) = json_message(&delivery(br#"{"a":"0123456789"}"#), Some(60), 0);
        assert_eq!(why, Some(Stand::TooLarge), "{m}");
        let (m, why) = json_message(&delivery(br#"{"a":1}"#), None, 0);
        assert_eq!(why, None, "{m}");
        let (_, why) = json_message(&delivery(b"not json"), None, 0);
        assert_eq!(why, Some(Stand::NotJson));
    }
}
