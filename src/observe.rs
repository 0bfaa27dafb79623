//! Structured logs and CloudWatch Embedded Metric Format (EMF) lines.
//!
//! Each delivery produces exactly one JSON line on stdout that is both its log record (source,
//! delivery id, event type, outcome, attempt, latency) and an EMF document, so CloudWatch counts
//! outcomes per source without a metrics API call.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

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
pub fn delivery_line(r: &DeliveryRecord<'_>, now: SystemTime) -> Value {
    let mut metrics = vec![
        json!({"Name": "deliveries", "Unit": "Count"}),
        json!({"Name": "latency_ms", "Unit": "Milliseconds"}),
    ];
    let mut line = Map::new();
    if r.payload_mismatch {
        metrics.push(json!({"Name": "payload_mismatches", "Unit": "Count"}));
        line.insert("payload_mismatches".into(), json!(1));
    }
    line.insert(
        "_aws".into(),
        emf_block(now, &["source", "outcome"], metrics),
    );
    line.insert("level".into(), json!(level_for(r.status)));
    line.insert("message".into(), json!("delivery"));
    line.insert("source".into(), json!(r.source));
    line.insert("delivery_id".into(), json!(r.delivery_id));
    line.insert("event_type".into(), json!(r.event_type));
    line.insert("outcome".into(), json!(r.outcome));
    line.insert("status".into(), json!(r.status));
    line.insert("attempt".into(), json!(r.attempt));
    line.insert("deliveries".into(), json!(1));
    line.insert(
        "latency_ms".into(),
        json!((r.latency.as_secs_f64() * 1e6).round() / 1e3),
    );
    if let Some(reason) = r.reason {
        line.insert("reason".into(), json!(reason));
    }
    Value::Object(line)
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
    let ms = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    json!({
        "Timestamp": ms,
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
    print!("{text}");
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
        let v = delivery_line(&r, UNIX_EPOCH + Duration::from_secs(10));
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
        let v = delivery_line(&r, UNIX_EPOCH);
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
