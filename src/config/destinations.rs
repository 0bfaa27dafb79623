//! Where each source's deliveries go with `HOOKCLAIM_PROCESSOR=destinations`:
//! `HOOKCLAIM_DESTINATIONS`, a JSON object of source name to a list of destinations.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;

use super::{bad, typed, ConfigError, Lookup, Source};
use crate::secret::{Secret, SecretFormat};

const DESTINATIONS: &str = "HOOKCLAIM_DESTINATIONS";

/// SQS's largest message (body and attributes), 1 MiB.
pub const SQS_MAX_BYTES: usize = 1_048_576;

/// EventBridge's largest entry (Source, DetailType and Detail counted together), 1 MiB.
pub const EVENTBRIDGE_MAX_BYTES: usize = 1_048_576;

/// Step Functions' largest execution input, 256 KiB.
pub const STEP_FUNCTIONS_MAX_BYTES: usize = 262_144;

/// How long one destination call may take by default.
pub const DEFAULT_DESTINATION_TIMEOUT: Duration = Duration::from_secs(5);

/// One destination of a source's deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationConfig {
    /// Unique within the source; the key its progress is recorded under, and what errors name.
    pub name: String,
    /// Bound on one call to it.
    pub timeout: Duration,
    /// A message larger than this is sent as a claim check instead; `None`: never.
    pub max_bytes: Option<usize>,
    /// Where it is and how it is called.
    pub target: Target,
}

/// The kinds of destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `SendMessage` to a queue; FIFO when the URL ends in `.fifo`.
    Sqs {
        /// The queue's URL.
        queue_url: String,
        /// A FIFO queue: deduplicated on the idempotency key.
        fifo: bool,
        /// Where the FIFO message group id is read from in the payload; the source name when
        /// absent or when the payload has no usable value there.
        group_pointer: Option<String>,
    },
    /// EventBridge `PutEvents`, one entry per delivery.
    EventBridge {
        /// The event bus's name or ARN.
        bus: String,
        /// The entry's `Source`.
        source: String,
        /// The entry's `DetailType`; the delivery's event type (else the source name) when
        /// `None`.
        detail_type: Option<String>,
    },
    /// Step Functions `StartExecution`, named after the idempotency key.
    StepFunctions {
        /// The state machine's ARN.
        state_machine_arn: String,
    },
    /// POST to a URL, signed with Standard Webhooks headers.
    Http {
        /// Where deliveries are posted.
        url: http::Uri,
        /// The `whsec_` signing secret.
        secret: Secret,
        /// A 409 means done rather than "retry".
        conflict_is_done: bool,
    },
}

impl Target {
    /// The kind's name in configuration: `sqs`, `eventbridge`, `stepfunctions` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Sqs { .. } => "sqs",
            Target::EventBridge { .. } => "eventbridge",
            Target::StepFunctions { .. } => "stepfunctions",
            Target::Http { .. } => "http",
        }
    }
}

/// Each source's destinations, in the order they are called.
pub type Destinations = BTreeMap<String, Vec<DestinationConfig>>;

/// `sqs`: a queue.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sqs {
    queue_url: String,
    group_pointer: Option<String>,
}

/// `eventbridge`: an event bus.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventBridge {
    bus: Option<String>,
    source: Option<String>,
    detail_type: Option<String>,
}

/// `stepfunctions`: a state machine.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepFunctions {
    state_machine_arn: String,
}

/// `http`: a signed POST to an endpoint.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Http {
    url: String,
    secret_env: String,
    conflict: Option<Conflict>,
}

/// What a 409 from an HTTP endpoint means: its `conflict`, and `FORWARD_CONFLICT`.
#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum Conflict {
    Retry,
    Done,
}

/// The settings every kind shares; each kind's own are the struct named for it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Common {
    name: Option<String>,
    timeout_ms: Option<u64>,
    max_bytes: Option<usize>,
}

/// Reads `HOOKCLAIM_DESTINATIONS`, which `HOOKCLAIM_PROCESSOR=destinations` requires. An HTTP
/// destination's secret is read from the variable its `secret_env` names.
pub(super) fn read(get: Lookup<'_>) -> Result<Destinations, ConfigError> {
    let raw = get(DESTINATIONS).ok_or_else(|| {
        bad(
            DESTINATIONS,
            "HOOKCLAIM_PROCESSOR=destinations needs a JSON object of source name to a list of \
             destinations",
        )
    })?;
    parse(&raw, get)
}

/// Parses `HOOKCLAIM_DESTINATIONS`, reading HTTP signing secrets through `get`.
pub fn parse(json: &str, get: Lookup<'_>) -> Result<Destinations, ConfigError> {
    let specs: BTreeMap<String, Vec<serde_json::Value>> =
        serde_json::from_str(json).map_err(|e| bad(DESTINATIONS, format!("invalid JSON: {e}")))?;
    if specs.values().all(Vec::is_empty) {
        return Err(bad(DESTINATIONS, "no destination configured"));
    }
    let mut out = Destinations::new();
    for (source, list) in specs {
        let mut names = BTreeSet::new();
        let mut destinations = Vec::with_capacity(list.len());
        for (i, value) in list.into_iter().enumerate() {
            let at = |problem: String| {
                bad(
                    DESTINATIONS,
                    format!("source {source:?}, destination {}: {problem}", i + 1),
                )
            };
            let destination = destination(&source, value, get).map_err(at)?;
            if !names.insert(destination.name.clone()) {
                return Err(at(format!(
                    "another destination of this source is named {:?}; give each a \"name\"",
                    destination.name
                )));
            }
            destinations.push(destination);
        }
        out.insert(source, destinations);
    }
    Ok(out)
}

/// Refuses destinations for a source that `HOOKCLAIM_SOURCES` does not configure: they could
/// never receive anything, which is most likely a typo.
pub(super) fn check_sources(
    destinations: &Destinations,
    sources: &BTreeMap<String, Source>,
) -> Result<(), ConfigError> {
    match destinations.keys().find(|s| !sources.contains_key(*s)) {
        Some(unknown) => Err(bad(
            DESTINATIONS,
            format!("source {unknown:?} is not configured in HOOKCLAIM_SOURCES"),
        )),
        None => Ok(()),
    }
}

/// One kind's own settings, read: its target, the name it gets by default and the most a
/// message to it may hold (`None`: no limit).
type Kind = (Target, String, Option<usize>);

fn destination(
    source: &str,
    value: serde_json::Value,
    get: Lookup<'_>,
) -> Result<DestinationConfig, String> {
    let serde_json::Value::Object(mut object) = value else {
        return Err("a destination is a JSON object with a \"kind\"".into());
    };
    let common: serde_json::Map<_, _> = ["name", "timeout_ms", "max_bytes"]
        .into_iter()
        .filter_map(|k| object.remove_entry(k))
        .collect();
    let common: Common = typed(common)?;
    let (target, default_name, limit) = match object.remove("kind") {
        Some(serde_json::Value::String(kind)) => match kind.as_str() {
            "sqs" => sqs(typed(object)?)?,
            "eventbridge" => eventbridge(source, typed(object)?)?,
            "stepfunctions" => step_functions(typed(object)?)?,
            "http" => http_endpoint(typed(object)?, get)?,
            other => {
                return Err(format!(
                    "kind {other:?} is not one of sqs, eventbridge, stepfunctions, http"
                ))
            }
        },
        _ => return Err("needs a \"kind\": sqs, eventbridge, stepfunctions or http".into()),
    };
    let name = common.name.unwrap_or(default_name);
    let name_ok =
        !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_graphic());
    if !name_ok {
        return Err(format!(
            "name {name:?} must be 1-128 visible ASCII characters"
        ));
    }
    let timeout_ms = common
        .timeout_ms
        .unwrap_or(DEFAULT_DESTINATION_TIMEOUT.as_millis() as u64);
    if !(100..=60_000).contains(&timeout_ms) {
        return Err(format!("timeout_ms {timeout_ms} is outside 100..=60000"));
    }
    let max_bytes = match (common.max_bytes, limit) {
        (Some(n), Some(most)) if n == 0 || n > most => {
            return Err(format!(
                "max_bytes {n} is outside 1..={most}, the most a {} destination accepts",
                target.kind()
            ))
        }
        (Some(0), None) => return Err("max_bytes must be at least 1".into()),
        (Some(n), _) => Some(n),
        (None, limit) => limit,
    };
    Ok(DestinationConfig {
        name,
        timeout: Duration::from_millis(timeout_ms),
        max_bytes,
        target,
    })
}

fn sqs(Sqs {
    queue_url,
    group_pointer,
}: Sqs) -> Result<Kind, String> {
    let queue = queue_url
        .parse::<http::Uri>()
        .ok()
        .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
        .and_then(|u| u.path().rsplit('/').next().map(str::to_owned))
        .filter(|q| !q.is_empty())
        .ok_or(
            "queue_url must be the queue's URL (https://sqs.<region>.amazonaws.com/<account>/<queue>)",
        )?;
    let fifo = queue.ends_with(".fifo");
    if let Some(p) = &group_pointer {
        if !fifo {
            return Err("group_pointer applies only to FIFO queues (a .fifo queue_url)".into());
        }
        if !p.starts_with('/') {
            return Err("group_pointer must be a JSON pointer like /data/object/customer".into());
        }
    }
    let target = Target::Sqs {
        queue_url,
        fifo,
        group_pointer,
    };
    Ok((target, format!("sqs:{queue}"), Some(SQS_MAX_BYTES)))
}

fn eventbridge(source: &str, settings: EventBridge) -> Result<Kind, String> {
    let EventBridge {
        bus,
        source: event_source,
        detail_type,
    } = settings;
    let bus = bus.unwrap_or_else(|| "default".into());
    let bus_name = bus
        .rsplit_once("event-bus/")
        .map_or(bus.as_str(), |(_, n)| n)
        .to_owned();
    let event_source = event_source.unwrap_or_else(|| format!("hookclaim.{source}"));
    if event_source.is_empty() || event_source.len() > 256 || event_source.starts_with("aws.") {
        return Err("source must be 1-256 characters and may not start with \"aws.\"".into());
    }
    if detail_type
        .as_ref()
        .is_some_and(|t| t.is_empty() || t.chars().count() > 128)
    {
        return Err("detail_type must be 1-128 characters".into());
    }
    let target = Target::EventBridge {
        bus,
        source: event_source,
        detail_type,
    };
    Ok((
        target,
        format!("eventbridge:{bus_name}"),
        Some(EVENTBRIDGE_MAX_BYTES),
    ))
}

fn step_functions(StepFunctions { state_machine_arn }: StepFunctions) -> Result<Kind, String> {
    let machine = state_machine_arn
        .strip_prefix("arn:")
        .and_then(|a| a.split_once(":stateMachine:"))
        .map(|(_, n)| n.to_owned())
        .filter(|n| !n.is_empty())
        .ok_or(
            "state_machine_arn must be a state machine's ARN (arn:aws:states:…:stateMachine:<name>)",
        )?;
    let target = Target::StepFunctions { state_machine_arn };
    Ok((
        target,
        format!("stepfunctions:{machine}"),
        Some(STEP_FUNCTIONS_MAX_BYTES),
    ))
}

fn http_endpoint(
    Http {
        url,
        secret_env,
        conflict,
    }: Http,
    get: Lookup<'_>,
) -> Result<Kind, String> {
    let url = url
        .parse::<http::Uri>()
        .ok()
        .filter(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
        .ok_or("url must be an http:// or https:// URL")?;
    let text = get(&secret_env).ok_or_else(|| {
        format!(
            "secret_env names {secret_env:?}, which is not set; it must hold the whsec_ \
             signing secret"
        )
    })?;
    // The error names the variable, never its value.
    let secret = Secret::parse(&text, SecretFormat::StandardWebhooks)
        .ok()
        .filter(|s| !s.is_public_key())
        .ok_or_else(|| {
            format!("{secret_env} is not a Standard Webhooks secret (whsec_ and base64)")
        })?;
    let conflict_is_done = conflict == Some(Conflict::Done);
    let host = url.host().unwrap_or_default().to_owned();
    let target = Target::Http {
        url,
        secret,
        conflict_is_done,
    };
    Ok((target, format!("http:{host}"), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn parse_with(json: &str) -> Result<Destinations, ConfigError> {
        let get = |k: &str| (k == "HOOK_SECRET").then(|| SECRET.to_string());
        parse(json, &get)
    }

    #[test]
    fn every_kind_is_read_with_its_defaults() {
        let d = parse_with(
            r#"{"stripe":[
                {"kind":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/1/orders.fifo","group_pointer":"/data/object/customer"},
                {"kind":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/1/audit"},
                {"kind":"eventbridge","source":"com.example.stripe"},
                {"kind":"stepfunctions","state_machine_arn":"arn:aws:states:eu-west-1:1:stateMachine:fulfil","max_bytes":1000},
                {"kind":"http","url":"https://hooks.example/in","secret_env":"HOOK_SECRET","timeout_ms":2000}
            ]}"#,
        )
        .unwrap();
        let list = &d["stripe"];
        let names: Vec<&str> = list.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "sqs:orders.fifo",
                "sqs:audit",
                "eventbridge:default",
                "stepfunctions:fulfil",
                "http:hooks.example"
            ]
        );
        assert!(matches!(list[0].target, Target::Sqs { fifo: true, .. }));
        assert!(matches!(list[1].target, Target::Sqs { fifo: false, .. }));
        assert_eq!(list[0].max_bytes, Some(SQS_MAX_BYTES));
        assert_eq!(list[2].max_bytes, Some(EVENTBRIDGE_MAX_BYTES));
        assert_eq!(list[3].max_bytes, Some(1000));
        assert_eq!(list[4].max_bytes, None);
        assert_eq!(list[4].timeout, Duration::from_secs(2));
        assert_eq!(list[0].timeout, DEFAULT_DESTINATION_TIMEOUT);
    }

    #[test]
    fn bad_destinations_are_refused_naming_the_setting_source_and_position() {
        let cases = [
            (
                r#"{"stripe":[{"kind":"kafka"}]}"#,
                "kind \"kafka\" is not one of sqs, eventbridge, stepfunctions, http",
            ),
            (r#"{"stripe":[{"queue_url":"x"}]}"#, "needs a \"kind\""),
            (r#"{"stripe":[{"kind":"sqs"}]}"#, "queue_url"),
            (
                r#"{"stripe":[{"kind":"sqs","queue_url":"orders"}]}"#,
                "queue_url",
            ),
            (
                r#"{"stripe":[{"kind":"sqs","queue_url":"https://q/1/a","group_pointer":"/x"}]}"#,
                "FIFO",
            ),
            (
                r#"{"stripe":[{"kind":"sqs","queue_url":"https://q/1/a.fifo","group_pointer":"x"}]}"#,
                "JSON pointer",
            ),
            (
                r#"{"stripe":[{"kind":"sqs","queue_url":"https://q/1/a","max_bytes":2000000}]}"#,
                "max_bytes",
            ),
            (
                r#"{"stripe":[{"kind":"sqs","queue_url":"https://q/1/a","tiemout_ms":5}]}"#,
                "unknown field",
            ),
            (
                r#"{"stripe":[{"kind":"sqs","queue_url":"https://q/1/a","timeout_ms":5}]}"#,
                "timeout_ms",
            ),
            (
                r#"{"stripe":[{"kind":"eventbridge","source":"aws.events"}]}"#,
                "aws.",
            ),
            (
                r#"{"stripe":[{"kind":"stepfunctions","state_machine_arn":"fulfil"}]}"#,
                "ARN",
            ),
            (
                r#"{"stripe":[{"kind":"http","url":"ftp://x","secret_env":"HOOK_SECRET"}]}"#,
                "url",
            ),
            (
                r#"{"stripe":[{"kind":"http","url":"https://x","secret_env":"UNSET"}]}"#,
                "UNSET",
            ),
            (
                r#"{"stripe":[{"kind":"sqs","queue_url":"https://q/1/a"},{"kind":"sqs","queue_url":"https://q/2/a"}]}"#,
                "name",
            ),
            (
                r#"{"stripe":[{"kind":"http","url":"https://x","secret_env":"HOOK_SECRET","conflict":"ignore"}]}"#,
                "conflict: unknown variant `ignore`, expected `retry` or `done`",
            ),
            (
                r#"{"stripe":[{"kind":"sqs","queue_url":"https://q/1/a","name":7}]}"#,
                "name: invalid type: integer `7`, expected a string",
            ),
            (
                r#"{"stripe":[{"kind":"sqs","queue_url":"https://q/1/a","name":""}]}"#,
                "must be 1-128 visible ASCII characters",
            ),
            (
                r#"{"stripe":[{"kind":"http","url":"https://x","secret_env":"HOOK_SECRET","max_bytes":0}]}"#,
                "max_bytes must be at least 1",
            ),
            (
                r#"{"stripe":[{"kind":"eventbridge","detail_type":""}]}"#,
                "detail_type must be 1-128 characters",
            ),
            (r#"{"stripe":["sqs"]}"#, "a destination is a JSON object"),
            (r#"{"stripe":[]}"#, "no destination"),
            (r#"["x"]"#, "invalid JSON"),
        ];
        for (json, expect) in cases {
            let e = parse_with(json).unwrap_err();
            assert_eq!(e.setting, DESTINATIONS, "{json}");
            assert!(e.problem.contains(expect), "{json}: {e}");
            if json.contains("kind") {
                assert!(
                    e.problem.contains("source \"stripe\", destination"),
                    "{json}: {e}"
                );
            }
        }
        // The secret's value never appears, even when it is unusable.
        let get = |k: &str| (k == "HOOK_SECRET").then(|| "whpk_not-a-secret".to_string());
        let e = parse(
            r#"{"s":[{"kind":"http","url":"https://x","secret_env":"HOOK_SECRET"}]}"#,
            &get,
        )
        .unwrap_err();
        assert!(!e.to_string().contains("not-a-secret"), "{e}");
    }
}
