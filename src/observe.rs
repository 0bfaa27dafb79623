//! Structured logs and CloudWatch Embedded Metric Format (EMF) lines, as values: a function
//! holds its [`Telemetry`] (the metrics' namespace and where lines go), and nothing here is
//! process state. Logging (a `tracing` subscriber) is installed only by the `run_*` entry
//! points ([`init_logging`]); a function of the user's own keeps theirs, and sees each
//! delivery as a `tracing` event ([`delivery_event`]) with the line's fields.
//!
//! Each delivery produces exactly one JSON line on stdout that is both its log record (source,
//! delivery id, event type, outcome, attempt, latency) and an EMF document, so CloudWatch counts
//! outcomes per source without a metrics API call. The line also carries the invocation's
//! correlation keys under the names Powertools' logger gives them (`function_request_id`,
//! `xray_trace_id`, `correlation_id`, `cold_start`), so Logs Insights queries written for
//! Powertools functions work on it unchanged.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;
use tracing_subscriber::filter::{LevelFilter, Targets};

/// The CloudWatch namespace of the metrics when `HOOKCLAIM_METRICS_NAMESPACE` is not set.
pub const DEFAULT_NAMESPACE: &str = "hookclaim";

/// The `tracing` target of each delivery's event ([`delivery_event`]). The entry points'
/// subscriber leaves it out: the delivery's line is written by its [`Telemetry`].
pub const DELIVERY_TARGET: &str = "hookclaim::delivery";

/// A function's telemetry: the namespace its metrics are written under
/// (`HOOKCLAIM_METRICS_NAMESPACE`) and where its lines go. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Telemetry {
    namespace: Arc<str>,
    sink: Sink,
}

/// Where lines go.
#[derive(Debug, Clone)]
enum Sink {
    Stdout,
    /// A command run from a terminal, whose stdout is for the command's answer.
    Stderr,
    /// Kept in memory, for tests.
    Memory(Arc<Mutex<String>>),
}

impl Default for Telemetry {
    /// [`DEFAULT_NAMESPACE`], lines on stdout.
    fn default() -> Self {
        Telemetry::new(DEFAULT_NAMESPACE)
    }
}

impl Telemetry {
    /// Lines on stdout, metrics under `namespace`.
    pub fn new(namespace: &str) -> Self {
        Telemetry {
            namespace: namespace.into(),
            sink: Sink::Stdout,
        }
    }

    /// The same, with lines on stderr.
    pub fn on_stderr(self) -> Self {
        Telemetry {
            sink: Sink::Stderr,
            ..self
        }
    }

    /// The same, with lines kept in memory, in the text returned: for tests.
    pub fn in_memory(self) -> (Self, Arc<Mutex<String>>) {
        let lines = Arc::new(Mutex::new(String::new()));
        let telemetry = Telemetry {
            sink: Sink::Memory(lines.clone()),
            ..self
        };
        (telemetry, lines)
    }

    /// The namespace metrics are written under.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Writes one JSON line.
    pub fn emit(&self, line: &Value) {
        let mut text = line.to_string();
        text.push('\n');
        self.write(&text);
    }

    /// Writes an already serialised line (ending in a newline) in one write, under the stream's
    /// lock, so lines from concurrent tasks never interleave. (`print!` rather than a raw write,
    /// so test harnesses capture it.)
    pub fn write(&self, line: &str) {
        match &self.sink {
            Sink::Stdout => print!("{line}"),
            Sink::Stderr => eprint!("{line}"),
            Sink::Memory(lines) => {
                if let Ok(mut lines) = lines.lock() {
                    lines.push_str(line);
                }
            }
        }
    }
}

/// Checks a namespace against CloudWatch's rules: 1 to 255 characters, each a letter, a digit,
/// a space or one of `. - _ / # :`; not only spaces, and neither starting nor ending with one
/// (an alarm written without them would watch another namespace); not starting with `:` or
/// with `AWS/`, which is AWS's own. The error says which rule it breaks.
pub fn check_namespace(namespace: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || " .-_/#:".contains(c);
    if namespace.is_empty() || namespace.len() > 255 {
        return Err(format!(
            "{} characters; a namespace has 1 to 255",
            namespace.chars().count()
        ));
    }
    if let Some(c) = namespace.chars().find(|c| !allowed(*c)) {
        return Err(format!(
            "{c:?} is not allowed; a namespace has letters, digits, spaces and . - _ / # : only"
        ));
    }
    if namespace.starts_with(' ') || namespace.ends_with(' ') {
        return Err("a namespace may not start or end with a space".into());
    }
    if namespace.starts_with(':') {
        return Err("a namespace may not start with \":\"".into());
    }
    if namespace.starts_with("AWS/") {
        return Err("namespaces starting with \"AWS/\" are AWS's own".into());
    }
    Ok(())
}

/// The `source` dimension value of every request whose path names no configured source, so a
/// stranger cannot create metrics (each custom metric is billed) by inventing names.
pub const UNKNOWN_SOURCE: &str = "unknown";

/// Longest requested source name a delivery line keeps (configured names are at most 64).
pub const MAX_REQUESTED_SOURCE: usize = 64;
/// Longest delivery id a delivery line keeps: verification refuses longer ones.
pub const MAX_DELIVERY_ID: usize = crate::verify::MAX_ID_LEN;
/// Longest event type a delivery line keeps: verification drops longer ones.
pub const MAX_EVENT_TYPE: usize = crate::verify::MAX_EVENT_TYPE_LEN;
/// Longest reason a delivery line keeps (a processor's error text can be anything).
pub const MAX_REASON: usize = 256;
/// Longest request id or trace id a delivery line keeps (AWS's are under 64 bytes; a direct
/// invocation's event can hold anything).
pub const MAX_CORRELATION_ID: usize = 128;

/// Upper bound, in bytes, of one delivery line whatever the request held: the fixed fields, plus
/// each request-derived field at its cap, doubled for JSON escaping (`"` and `\` take two
/// bytes; control characters are replaced before they could take six).
pub const MAX_DELIVERY_LINE: usize = 4096;

/// What ties a delivery's line to its invocation and request, under Powertools' key names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Correlation<'a> {
    /// The Lambda request id (`function_request_id`).
    pub function_request_id: Option<&'a str>,
    /// The X-Ray trace id (its `Root`, as Powertools logs it), when the invocation has one.
    pub xray_trace_id: Option<&'a str>,
    /// The API Gateway or function URL request id (`correlation_id`, Powertools' key for it).
    pub correlation_id: Option<&'a str>,
    /// Whether this invocation is the execution environment's first.
    pub cold_start: bool,
}

impl<'a> Correlation<'a> {
    /// The keys of `req`, an event the Lambda runtime delivered (none for a request built by
    /// hand); `cold_start` when it is the environment's first.
    pub fn of(req: &'a lambda_http::Request, cold_start: bool) -> Self {
        use lambda_http::request::RequestContext;
        use lambda_http::RequestExt;

        let lambda = req.lambda_context_ref();
        let correlation_id = match req.request_context_ref() {
            Some(RequestContext::ApiGatewayV2(c)) => c.request_id.as_deref(),
            Some(RequestContext::ApiGatewayV1(c)) => c.request_id.as_deref(),
            _ => None,
        };
        Correlation {
            function_request_id: lambda.map(|c| c.request_id.as_str()).filter(|s| !s.is_empty()),
            xray_trace_id: lambda.and_then(|c| c.xray_trace_id.as_deref()).and_then(trace_root),
            correlation_id,
            cold_start,
        }
    }
}

/// The `Root` of an X-Ray trace header (`Root=1-…;Parent=…;Sampled=1`), the trace id X-Ray's
/// console and Powertools show.
fn trace_root(header: &str) -> Option<&str> {
    let root = header
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Root="))
        .unwrap_or(header);
    (!root.is_empty()).then_some(root)
}

/// Sets up JSON logging for `tracing`, on stdout or, for a command run from a terminal (whose
/// stdout is for the command's answer), on stderr: level from `AWS_LAMBDA_LOG_LEVEL` (set by
/// Lambda's logging configuration) or `RUST_LOG`, default `info`. A setting it cannot read logs
/// at `info` and says so in a warning line. Each delivery's event is left out: its line, with
/// the same fields and the metrics, is the function's [`Telemetry`]'s.
pub fn init_logging(to_stderr: bool) {
    use tracing_subscriber::prelude::*;

    let setting = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_default();
    let (filter, unreadable) = match log_filter(&setting) {
        Ok(filter) => (filter, None),
        Err(e) => (Targets::new().with_default(LevelFilter::INFO), Some(e)),
    };
    let logs = tracing_subscriber::fmt::layer()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false);
    let filter = filter.with_target(DELIVERY_TARGET, LevelFilter::OFF);
    let registry = tracing_subscriber::registry().with(filter);
    let _ = if to_stderr {
        registry.with(logs.with_writer(std::io::stderr)).try_init()
    } else {
        registry.with(logs).try_init()
    };
    if let Some(e) = unreadable {
        tracing::warn!(
            setting = %setting,
            error = %e,
            "log level setting not understood; logging at info"
        );
    }
}

/// The filter a log level setting asks for: empty for `info`; a level (Lambda's `TRACE` …
/// `FATAL`, any case; `FATAL` is `error`, the most serious level `tracing` has), or
/// `RUST_LOG`'s comma-separated `target=level` directives with an optional default level.
fn log_filter(setting: &str) -> Result<Targets, String> {
    let setting = setting.trim().to_ascii_lowercase();
    let setting = match setting.as_str() {
        "" => "info",
        "fatal" => "error",
        other => other,
    };
    if setting.contains(['[', '{']) {
        return Err("span and field filters are not supported: use target=level".into());
    }
    // A bare word that is not a level would be read as a target name with every level on.
    let levels = ["off", "error", "warn", "info", "debug", "trace"];
    if let Some(word) = setting
        .split(',')
        .map(str::trim)
        .find(|d| !d.contains('=') && !levels.contains(d))
    {
        return Err(format!("{word:?} is not a level"));
    }
    setting.parse().map_err(|e| format!("{e}"))
}

/// How serious a log line is, as Lambda's JSON log format and its log-level filter read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Routine: a delivery answered as it should be, including a retry the sender is asked for.
    Info,
    /// Worth a look: a failed attempt that will be retried, a refused signature.
    Warn,
    /// Needs someone: a delivery given up on, a database that cannot be reached.
    Error,
}

impl Level {
    /// The `level` field's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }
}

/// One delivery's record.
///
/// `source` is a configured source name or [`UNKNOWN_SOURCE`]: it becomes a metric dimension
/// value. Every field taken from the request is cut to its cap when the line is written.
#[derive(Debug, Clone)]
pub struct DeliveryRecord<'a> {
    /// A configured source name, or [`UNKNOWN_SOURCE`].
    pub source: &'a str,
    /// The name the path asked for, when it is not a configured source (logged, capped at
    /// [`MAX_REQUESTED_SOURCE`]; never a dimension).
    pub requested_source: Option<&'a str>,
    /// Delivery id, when one was established.
    pub delivery_id: Option<&'a str>,
    /// Event type, when known.
    pub event_type: Option<&'a str>,
    /// Outcome name, e.g. `processed`, `duplicate`, `unauthorized`.
    pub outcome: &'a str,
    /// The line's level, which follows the outcome (not the HTTP status: a routine retry is
    /// answered 503, a delivery given up on 200).
    pub level: Level,
    /// HTTP status answered.
    pub status: u16,
    /// Attempt number, when the delivery was claimed.
    pub attempt: Option<i32>,
    /// Time from request to answer.
    pub latency: Duration,
    /// A short reason for rejections and failures (never a secret or a body).
    pub reason: Option<&'a str>,
    /// Set when the request's body differs from the one stored under its key (a duplicate, or
    /// a takeover that runs the stored one).
    pub payload_mismatch: bool,
    /// Set when the replay guard answered the body from another delivery's row: a signed body
    /// re-sent under a new id.
    pub replayed_body: bool,
    /// The invocation's correlation keys.
    pub correlation: Correlation<'a>,
}

/// Builds the delivery's JSON line: a log record with an `_aws` EMF block declaring the
/// `deliveries` count and `latency_ms`, by source and outcome and by outcome alone (so an alarm
/// can watch an outcome over every source), and, when set, `payload_mismatches` and
/// `replayed_bodies` by source alone (whatever the outcome, a body that is not the stored one is
/// worth a look). Serialised straight from borrowed fields: it runs once per delivery. At most
/// [`MAX_DELIVERY_LINE`] bytes.
pub fn delivery_line(r: &DeliveryRecord<'_>, namespace: &str, now: SystemTime) -> String {
    const COUNTS: [Metric; 2] = [
        Metric::new("deliveries", "Count"),
        Metric::new("latency_ms", "Milliseconds"),
    ];
    const MISMATCH: Metric = Metric::new("payload_mismatches", "Count");
    const REPLAYED: Metric = Metric::new("replayed_bodies", "Count");
    let flagged: &[Metric] = match (r.payload_mismatch, r.replayed_body) {
        (true, true) => &[MISMATCH, REPLAYED],
        (true, false) => &[MISMATCH],
        (false, true) => &[REPLAYED],
        (false, false) => &[],
    };
    let directives = [
        Directive {
            namespace,
            dimensions: &[&["source", "outcome"], &["outcome"]],
            metrics: &COUNTS,
        },
        Directive {
            namespace,
            dimensions: &[&["source"]],
            metrics: flagged,
        },
    ];
    // The by-source directive only on a line that counts one of its metrics.
    let declared = if flagged.is_empty() { 1 } else { 2 };
    let line = Line {
        aws: Emf {
            timestamp: millis(now),
            cloud_watch_metrics: &directives[..declared],
        },
        level: r.level.as_str(),
        message: "delivery",
        source: &capped(r.source, MAX_REQUESTED_SOURCE),
        requested_source: r.requested_source.map(|s| capped(s, MAX_REQUESTED_SOURCE)),
        delivery_id: r.delivery_id.map(|s| capped(s, MAX_DELIVERY_ID)),
        event_type: r.event_type.map(|s| capped(s, MAX_EVENT_TYPE)),
        outcome: r.outcome,
        status: r.status,
        attempt: r.attempt,
        deliveries: 1,
        latency_ms: (r.latency.as_secs_f64() * 1e6).round() / 1e3,
        reason: r.reason.map(|s| capped(s, MAX_REASON)),
        payload_mismatches: r.payload_mismatch.then_some(1),
        replayed_bodies: r.replayed_body.then_some(1),
        function_request_id: r
            .correlation
            .function_request_id
            .map(|s| capped(s, MAX_CORRELATION_ID)),
        xray_trace_id: r
            .correlation
            .xray_trace_id
            .map(|s| capped(s, MAX_CORRELATION_ID)),
        correlation_id: r
            .correlation
            .correlation_id
            .map(|s| capped(s, MAX_CORRELATION_ID)),
        cold_start: r.correlation.cold_start,
    };
    let mut text = serde_json::to_string(&line).unwrap_or_default();
    text.push('\n');
    debug_assert!(text.len() <= MAX_DELIVERY_LINE, "{} bytes", text.len());
    text
}

/// `s` cut to at most `max` bytes at a char boundary, with control characters replaced, so that
/// a field of the line is bounded whatever the request held. Borrowed when nothing changes (the
/// usual case: it runs once per delivery).
pub fn capped(s: &str, max: usize) -> Cow<'_, str> {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let kept = &s[..end];
    if kept.chars().any(char::is_control) {
        Cow::Owned(
            kept.chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(kept)
    }
}

#[derive(Serialize)]
struct Line<'a> {
    #[serde(rename = "_aws")]
    aws: Emf<'a>,
    level: &'static str,
    message: &'static str,
    source: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    requested_source: Option<Cow<'a, str>>,
    delivery_id: Option<Cow<'a, str>>,
    event_type: Option<Cow<'a, str>>,
    outcome: &'a str,
    status: u16,
    attempt: Option<i32>,
    deliveries: u8,
    latency_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_mismatches: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    replayed_bodies: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_request_id: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    xray_trace_id: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_id: Option<Cow<'a, str>>,
    cold_start: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Emf<'a> {
    timestamp: u64,
    cloud_watch_metrics: &'a [Directive<'a>],
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Directive<'a> {
    namespace: &'a str,
    dimensions: &'a [&'a [&'a str]],
    metrics: &'a [Metric],
}

/// One metric an EMF document declares: its name (a field of the line) and unit.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Metric {
    name: &'static str,
    unit: &'static str,
}

impl Metric {
    /// The metric `name`, counted in `unit` (`Count`, `Milliseconds`, `Seconds`…).
    pub const fn new(name: &'static str, unit: &'static str) -> Self {
        Metric { name, unit }
    }
}

fn millis(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// The `_aws` block of an EMF document whose `metrics` are counted under `namespace` and each
/// of the given dimension sets (an empty set counts them without dimensions, over everything):
/// the same typed document the delivery line carries, for lines built as JSON values.
pub fn emf_block(
    now: SystemTime,
    namespace: &str,
    dimension_sets: &[&[&str]],
    metrics: &[Metric],
) -> Value {
    let directive = [Directive {
        namespace,
        dimensions: dimension_sets,
        metrics,
    }];
    let emf = Emf {
        timestamp: millis(now),
        cloud_watch_metrics: &directive,
    };
    serde_json::to_value(&emf).unwrap_or(Value::Null)
}

/// Each delivery as a `tracing` event (target [`DELIVERY_TARGET`], at the line's level) with
/// the delivery line's fields, request-derived ones capped as there: what a subscriber of the
/// user's own sees of it.
pub fn delivery_event(r: &DeliveryRecord<'_>) {
    let requested_source = r.requested_source.map(|s| capped(s, MAX_REQUESTED_SOURCE));
    let delivery_id = r.delivery_id.map(|s| capped(s, MAX_DELIVERY_ID));
    let event_type = r.event_type.map(|s| capped(s, MAX_EVENT_TYPE));
    let reason = r.reason.map(|s| capped(s, MAX_REASON));
    let latency_ms = (r.latency.as_secs_f64() * 1e6).round() / 1e3;
    let c = &r.correlation;
    let request_id = c.function_request_id.map(|s| capped(s, MAX_CORRELATION_ID));
    let trace_id = c.xray_trace_id.map(|s| capped(s, MAX_CORRELATION_ID));
    let correlation_id = c.correlation_id.map(|s| capped(s, MAX_CORRELATION_ID));
    macro_rules! event {
        ($level:expr) => {
            tracing::event!(
                target: DELIVERY_TARGET,
                $level,
                source = r.source,
                requested_source = requested_source.as_deref(),
                delivery_id = delivery_id.as_deref(),
                event_type = event_type.as_deref(),
                outcome = r.outcome,
                status = r.status,
                attempt = r.attempt,
                latency_ms,
                reason = reason.as_deref(),
                payload_mismatch = r.payload_mismatch,
                replayed_body = r.replayed_body,
                function_request_id = request_id.as_deref(),
                xray_trace_id = trace_id.as_deref(),
                correlation_id = correlation_id.as_deref(),
                cold_start = c.cold_start,
                "delivery"
            )
        };
    }
    match r.level {
        Level::Info => event!(tracing::Level::INFO),
        Level::Warn => event!(tracing::Level::WARN),
        Level::Error => event!(tracing::Level::ERROR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn log_level_settings_of_lambda_and_rust_log_are_read_and_bad_ones_refused() {
        let default_level = |s: &str| log_filter(s).map(|t| t.default_level());
        assert_eq!(default_level(""), Ok(Some(LevelFilter::INFO)));
        assert_eq!(default_level("DEBUG"), Ok(Some(LevelFilter::DEBUG)));
        assert_eq!(default_level("WARN"), Ok(Some(LevelFilter::WARN)));
        assert_eq!(default_level("FATAL"), Ok(Some(LevelFilter::ERROR)));
        let directives = log_filter("warn,hookclaim=debug").unwrap();
        assert!(directives.would_enable("hookclaim::db", &tracing::Level::DEBUG));
        assert!(!directives.would_enable("tokio_postgres", &tracing::Level::INFO));
        assert!(directives.would_enable("tokio_postgres", &tracing::Level::WARN));
        for bad in ["loud", "info,verbose", "hookclaim=loud", "[span]=debug"] {
            assert!(log_filter(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn delivery_line_is_a_valid_emf_document() {
        let r = DeliveryRecord {
            source: "stripe",
            requested_source: None,
            delivery_id: Some("evt_1"),
            event_type: Some("checkout.session.completed"),
            outcome: "processed",
            level: Level::Info,
            status: 200,
            attempt: Some(1),
            latency: Duration::from_micros(2500),
            reason: None,
            payload_mismatch: false,
            replayed_body: false,
            correlation: Correlation {
                function_request_id: Some("8f60efab-ac52-4171-a13b-aeab25aabac0"),
                xray_trace_id: Some("1-5759e988-bd862e3fe1be46a994272793"),
                correlation_id: Some("c6af9ac6-7b61-11e6-9a41-93e8deadbeef"),
                cold_start: true,
            },
        };
        let line = delivery_line(&r, DEFAULT_NAMESPACE, UNIX_EPOCH + Duration::from_secs(10));
        assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(v["_aws"]["Timestamp"], 10_000);
        assert_eq!(cw["Namespace"], DEFAULT_NAMESPACE);
        assert_eq!(cw["Dimensions"][0], json!(["source", "outcome"]));
        assert_eq!(cw["Dimensions"][1], json!(["outcome"]));
        assert!(v.get("requested_source").is_none());
        // Every declared metric and dimension has a value at the top level.
        for m in cw["Metrics"].as_array().unwrap() {
            assert!(v[m["Name"].as_str().unwrap()].is_number());
        }
        assert_eq!(v["source"], "stripe");
        assert_eq!(v["outcome"], "processed");
        assert_eq!(v["latency_ms"], 2.5);
        assert_eq!(v["function_request_id"], "8f60efab-ac52-4171-a13b-aeab25aabac0");
        assert_eq!(v["xray_trace_id"], "1-5759e988-bd862e3fe1be46a994272793");
        assert_eq!(v["correlation_id"], "c6af9ac6-7b61-11e6-9a41-93e8deadbeef");
        assert_eq!(v["cold_start"], true);
    }

    #[test]
    fn correlation_keys_come_from_the_lambda_context_and_the_request_context() {
        use lambda_http::RequestExt;
        // An HTTP API (payload 2.0) event, as API Gateway sends it.
        let event = r#"{"version": "2.0", "routeKey": "POST /webhooks/{source}",
            "rawPath": "/webhooks/stripe", "rawQueryString": "", "headers": {},
            "requestContext": {"accountId": "123456789012", "apiId": "h00kc1a1m0",
                "domainName": "h00kc1a1m0.execute-api.us-east-1.amazonaws.com",
                "domainPrefix": "h00kc1a1m0", "requestId": "K+0gMu09gwC3cQ=",
                "http": {"method": "POST", "path": "/webhooks/stripe", "protocol": "HTTP/1.1",
                    "sourceIp": "203.0.113.20", "userAgent": "Stripe/1.0"},
                "routeKey": "POST /webhooks/{source}", "stage": "$default",
                "time": "01/Jan/2026:00:00:00 +0000", "timeEpoch": 1767225600000},
            "body": "{}", "isBase64Encoded": false}"#;
        let mut ctx = lambda_runtime::Context::default();
        ctx.request_id = "8f60efab-ac52-4171-a13b-aeab25aabac0".into();
        ctx.xray_trace_id =
            Some("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1".into());
        let req = lambda_http::request::from_str(event)
            .unwrap()
            .with_lambda_context(ctx);
        let c = Correlation::of(&req, true);
        assert_eq!(c.function_request_id, Some("8f60efab-ac52-4171-a13b-aeab25aabac0"));
        assert_eq!(c.xray_trace_id, Some("1-5759e988-bd862e3fe1be46a994272793"));
        assert_eq!(c.correlation_id, Some("K+0gMu09gwC3cQ="));
        assert!(c.cold_start);
        let bare = lambda_http::Request::default();
        assert_eq!(Correlation::of(&bare, false), Correlation::default());
    }

    #[test]
    fn the_trace_id_is_the_headers_root() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        assert_eq!(trace_root(header), Some("1-5759e988-bd862e3fe1be46a994272793"));
        assert_eq!(trace_root("Parent=1;Root=1-a-b"), Some("1-a-b"));
        assert_eq!(trace_root("1-a-b"), Some("1-a-b"));
        assert_eq!(trace_root(""), None);
    }

    #[test]
    fn mismatch_adds_its_own_metric() {
        let r = DeliveryRecord {
            source: "github",
            requested_source: None,
            delivery_id: Some("d"),
            event_type: None,
            outcome: "duplicate",
            level: Level::Info,
            status: 200,
            attempt: None,
            latency: Duration::ZERO,
            reason: None,
            payload_mismatch: true,
            replayed_body: false,
            correlation: Correlation::default(),
        };
        let v: Value = serde_json::from_str(&delivery_line(&r, DEFAULT_NAMESPACE, UNIX_EPOCH)).unwrap();
        assert_eq!(v["reason"], Value::Null);
        assert_eq!(v["payload_mismatches"], 1);
        assert!(v.get("replayed_bodies").is_none());
        let cw = &v["_aws"]["CloudWatchMetrics"];
        assert_eq!(cw[0]["Metrics"].as_array().unwrap().len(), 2);
        assert_eq!(cw[1]["Dimensions"], json!([["source"]]));
        assert_eq!(cw[1]["Metrics"], json!([{"Name": "payload_mismatches", "Unit": "Count"}]));
    }

    #[test]
    fn a_body_the_replay_guard_answered_is_counted_by_source() {
        let r = DeliveryRecord {
            source: "github",
            requested_source: None,
            delivery_id: Some("d2"),
            event_type: None,
            outcome: "duplicate",
            level: Level::Warn,
            status: 200,
            attempt: None,
            latency: Duration::ZERO,
            reason: None,
            payload_mismatch: false,
            replayed_body: true,
            correlation: Correlation::default(),
        };
        let v: Value = serde_json::from_str(&delivery_line(&r, DEFAULT_NAMESPACE, UNIX_EPOCH)).unwrap();
        assert_eq!(v["replayed_bodies"], 1);
        let cw = &v["_aws"]["CloudWatchMetrics"];
        assert_eq!(cw[1]["Dimensions"], json!([["source"]]));
        assert_eq!(cw[1]["Metrics"], json!([{"Name": "replayed_bodies", "Unit": "Count"}]));
    }

    #[test]
    fn request_derived_fields_are_capped_and_the_line_stays_under_its_bound() {
        // The worst case: every request-derived field far over its cap, made of characters that
        // JSON escapes, with multi-byte characters straddling the caps.
        let hostile = "\"\\\u{0}é😀".repeat(2000);
        let r = DeliveryRecord {
            source: UNKNOWN_SOURCE,
            requested_source: Some(&hostile),
            delivery_id: Some(&hostile),
            event_type: Some(&hostile),
            outcome: "payload_too_large",
            level: Level::Warn,
            status: 413,
            attempt: Some(i32::MAX),
            latency: Duration::from_secs(u32::MAX as u64),
            reason: Some(&hostile),
            payload_mismatch: true,
            replayed_body: true,
            correlation: Correlation {
                function_request_id: Some(&hostile),
                xray_trace_id: Some(&hostile),
                correlation_id: Some(&hostile),
                cold_start: false,
            },
        };
        let line = delivery_line(&r, DEFAULT_NAMESPACE, UNIX_EPOCH + Duration::from_secs(u32::MAX as u64));
        assert!(line.len() <= MAX_DELIVERY_LINE, "{} bytes", line.len());
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["source"], UNKNOWN_SOURCE);
        let kept = |k: &str| v[k].as_str().unwrap().len();
        assert!(kept("requested_source") <= MAX_REQUESTED_SOURCE);
        assert!(kept("delivery_id") <= MAX_DELIVERY_ID);
        assert!(kept("event_type") <= MAX_EVENT_TYPE);
        assert!(kept("reason") <= MAX_REASON);
        assert!(kept("function_request_id") <= MAX_CORRELATION_ID);
        assert!(kept("correlation_id") <= MAX_CORRELATION_ID);
        assert!(!v["reason"].as_str().unwrap().contains('\u{0}'));
    }

    #[test]
    fn namespaces_follow_cloudwatchs_rules() {
        for good in [
            "hookclaim",
            "hookclaim/prod-stack",
            "Team_A:hooks#1.v2",
            "my hooks",
            &"n".repeat(255),
        ] {
            assert_eq!(check_namespace(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("", "1 to 255"),
            (&"n".repeat(256) as &str, "1 to 255"),
            ("hooks\u{0}", "not allowed"),
            ("hooks\n", "not allowed"),
            ("hooks*", "not allowed"),
            ("hooks$", "not allowed"),
            ("héllo", "not allowed"),
            (" hooks", "space"),
            ("hooks ", "space"),
            ("   ", "space"),
            (":hooks", "\":\""),
            ("AWS/Lambda", "AWS's own"),
        ] {
            let e = check_namespace(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn capped_borrows_clean_text_and_cuts_at_a_char_boundary() {
        assert!(matches!(capped("stripe", 64), Cow::Borrowed("stripe")));
        assert_eq!(capped("ééé", 5), "éé");
        assert_eq!(capped("a\nb", 64), "a?b");
        assert_eq!(capped("", 0), "");
    }
}
