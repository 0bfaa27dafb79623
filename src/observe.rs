//! Structured logs and CloudWatch Embedded Metric Format (EMF) lines.
//!
//! Each delivery produces exactly one JSON line on stdout that is both its log record (source,
//! delivery id, event type, outcome, attempt, latency) and an EMF document, so CloudWatch counts
//! outcomes per source without a metrics API call.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{json, Value};

/// Metric namespace in CloudWatch.
pub const NAMESPACE: &str = "hookclaim";

/// Sets up JSON logging for `tracing`: level from `AWS_LAMBDA_LOG_LEVEL` (set by Lambda's
/// logging configuration) or `RUST_LOG`, default `info`.
pub fn init_logging() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".into())
        .to_lowercase();
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new(level))
        .try_init();
}

/// One delivery's record.
#[derive(Debug, Clone)]
pub struct DeliveryRecord<'a> {
    /// Source name from the path (may be an unknown name).
    pub source: &'a str,
    /// Delivery id, when one was established.
    pub delivery_id: Option<&'a str>,
    /// Event type, when known.
    pub event_type: Option<&'a str>,
    /// Outcome name, e.g. `processed`, `duplicate`, `unauthorized`.
    pub outcome: &'a str,
    /// HTTP status answered.
    pub status: u16,
    /// Attempt number, when the delivery was claimed.
    pub attempt: Option<i32>,
    /// Time from request to answer.
    pub latency: Duration,
    /// A short reason for rejections and failures (never a secret or a body).
    pub reason: Option<&'a str>,
    /// Set when a duplicate's body differs from the stored one.
    pub payload_mismatch: bool,
}

/// Builds the delivery's JSON line: a log record with an `_aws` EMF block declaring the
/// `deliveries` count (and `payload_mismatches` when set) and `latency_ms`, by source and outcome.
/// Serialised straight from borrowed fields: it runs once per delivery.
pub fn delivery_line(r: &DeliveryRecord<'_>, now: SystemTime) -> String {
    const METRICS: [Metric; 3] = [
        Metric::new("deliveries", "Count"),
        Metric::new("latency_ms", "Milliseconds"),
        Metric::new("payload_mismatches", "Count"),
    ];
    let declared = if r.payload_mismatch { 3 } else { 2 };
    let line = Line {
        aws: Emf {
            timestamp: millis(now),
            cloud_watch_metrics: [Directive {
                namespace: NAMESPACE,
                dimensions: [&["source", "outcome"]],
                metrics: &METRICS[..declared],
            }],
        },
        level: level_for(r.status),
        message: "delivery",
        source: r.source,
        delivery_id: r.delivery_id,
        event_type: r.event_type,
        outcome: r.outcome,
        status: r.status,
        attempt: r.attempt,
        deliveries: 1,
        latency_ms: (r.latency.as_secs_f64() * 1e6).round() / 1e3,
        reason: r.reason,
        payload_mismatches: r.payload_mismatch.then_some(1),
    };
    let mut text = serde_json::to_string(&line).unwrap_or_default();
    text.push('\n');
    text
}

#[derive(Serialize)]
struct Line<'a> {
    #[serde(rename = "_aws")]
    aws: Emf<'a>,
    level: &'static str,
    message: &'static str,
    source: &'a str,
    delivery_id: Option<&'a str>,
    event_type: Option<&'a str>,
    outcome: &'a str,
    status: u16,
    attempt: Option<i32>,
    deliveries: u8,
    latency_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_mismatches: Option<u8>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Emf<'a> {
    timestamp: u64,
    cloud_watch_metrics: [Directive<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Directive<'a> {
    namespace: &'static str,
    dimensions: [&'a [&'a str]; 1],
    metrics: &'a [Metric],
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Metric {
    name: &'static str,
    unit: &'static str,
}

impl Metric {
    const fn new(name: &'static str, unit: &'static str) -> Self {
        Metric { name, unit }
    }
}

fn millis(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

fn level_for(status: u16) -> &'static str {
    match status {
        500.. => "ERROR",
        401 | 413 => "WARN",
        _ => "INFO",
    }
}

/// The `_aws` block of an EMF document with the given dimension set and metric definitions.
pub fn emf_block(now: SystemTime, dimensions: &[&str], metrics: Vec<Value>) -> Value {
    json!({
        "Timestamp": millis(now),
        "CloudWatchMetrics": [{
            "Namespace": NAMESPACE,
            "Dimensions": [dimensions],
            "Metrics": metrics,
        }]
    })
}

/// Writes one JSON line to stdout under the stdout lock, so lines from concurrent tasks never
/// interleave. (`print!` rather than a raw write, so test harnesses capture it.)
pub fn emit(line: &Value) {
    let mut text = line.to_string();
    text.push('\n');
    emit_text(&text);
}

/// Writes an already serialised line (ending in a newline), like [`emit`].
pub fn emit_text(line: &str) {
    print!("{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_line_is_a_valid_emf_document() {
        let r = DeliveryRecord {
            source: "stripe",
            delivery_id: Some("evt_1"),
            event_type: Some("checkout.session.completed"),
            outcome: "processed",
            status: 200,
            attempt: Some(1),
            latency: Duration::from_micros(2500),
            reason: None,
            payload_mismatch: false,
        };
        let line = delivery_line(&r, UNIX_EPOCH + Duration::from_secs(10));
        assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(v["_aws"]["Timestamp"], 10_000);
        assert_eq!(cw["Namespace"], NAMESPACE);
        assert_eq!(cw["Dimensions"][0], json!(["source", "outcome"]));
        // Every declared metric and dimension has a value at the top level.
        for m in cw["Metrics"].as_array().unwrap() {
            assert!(v[m["Name"].as_str().unwrap()].is_number());
        }
        assert_eq!(v["source"], "stripe");
        assert_eq!(v["outcome"], "processed");
        assert_eq!(v["latency_ms"], 2.5);
    }

    #[test]
    fn mismatch_adds_its_own_metric() {
        let r = DeliveryRecord {
            source: "github",
            delivery_id: Some("d"),
            event_type: None,
            outcome: "duplicate",
            status: 200,
            attempt: None,
            latency: Duration::ZERO,
            reason: None,
            payload_mismatch: true,
        };
        let v: Value = serde_json::from_str(&delivery_line(&r, UNIX_EPOCH)).unwrap();
        assert_eq!(v["reason"], Value::Null);
        assert_eq!(v["payload_mismatches"], 1);
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
    }
}
