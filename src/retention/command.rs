//! Operators' commands: what an invocation payload asks the retention function to do.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::RetentionError;

/// Longest horizon an operator's purge accepts (the same bound as `RETENTION_DAYS`).
pub const MAX_OLDER_THAN_DAYS: u32 = 36_500;

/// Shortest horizon a purge accepts without `force`. A key purged while its sender may still
/// redeliver it (Stripe retries for three days, others for longer) lets that redelivery run
/// again, so a shorter horizon must be asked for explicitly.
pub const MIN_PURGE_DAYS: u32 = 7;

/// What an invocation asks for.
///
/// Operators send `{"command": "<name>", ...}`; unknown names, missing or extra fields and wrong
/// types are refused. Every variant is a struct variant, even without fields, so that
/// `deny_unknown_fields` applies to it too (serde ignores extra keys for unit variants of an
/// internally tagged enum).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// A normal run: reclaim and re-drive, purge, trim. Also what a scheduled event starts.
    Run {},
    /// Counts what a run would reclaim, purge and trim; changes nothing.
    DryRun {},
    /// Purges finished rows older than `older_than_days` instead of `RETENTION_DAYS`.
    Purge {
        /// The horizon in days, 1 to [`MAX_OLDER_THAN_DAYS`]; below [`MIN_PURGE_DAYS`] only with
        /// `force`.
        older_than_days: u32,
        /// Accept a horizon below [`MIN_PURGE_DAYS`].
        #[serde(default)]
        force: bool,
    },
    /// Runs one delivery again through the processor.
    Replay {
        /// Configured source name.
        source: String,
        /// The sender's delivery id.
        delivery_id: String,
        /// Also replay a delivery that is already done.
        #[serde(default)]
        force: bool,
    },
    /// Runs every failed or dead delivery of a source again, optionally only those of one event
    /// type or received within a window, until done or the deadline; or, with `dry_run`, counts
    /// them. Safe to run twice at once and while deliveries arrive: each delivery is claimed
    /// (fenced) before it runs.
    ReplayAll {
        /// Configured source name.
        source: String,
        /// Only deliveries of this event type.
        #[serde(default)]
        event_type: Option<String>,
        /// Only deliveries received at or after this time.
        #[serde(default)]
        received_after: Option<Timestamp>,
        /// Only deliveries received before this time.
        #[serde(default)]
        received_before: Option<Timestamp>,
        /// Count what would be replayed; change nothing.
        #[serde(default)]
        dry_run: bool,
    },
    /// Counts by source and status, the oldest in-progress lease, the oldest row, and the oldest
    /// stuck deliveries with their ids.
    Stats {},
    /// Applies pending schema migrations.
    Migrate {},
}

impl Command {
    /// The command's name, as operators write it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Run {} => "run",
            Command::DryRun {} => "dry_run",
            Command::Purge { .. } => "purge",
            Command::Replay { .. } => "replay",
            Command::ReplayAll { .. } => "replay_all",
            Command::Stats {} => "stats",
            Command::Migrate {} => "migrate",
        }
    }
}

/// Turns an invocation payload into a [`Command`]. Pure, and total over any JSON value.
///
/// A JSON object with a `"command"` key is an operator command and must be well-formed. Any other
/// object (an EventBridge event, the Scheduler's `{}`) and `null` start a normal run. Any other
/// JSON value (a bare string, a number, an array) is refused, since it is neither.
pub fn parse_command(payload: &Value) -> Result<Command, RetentionError> {
    let command = match payload {
        Value::Null => return Ok(Command::Run {}),
        Value::Object(map) if !map.contains_key("command") => return Ok(Command::Run {}),
        Value::Object(_) => {
            Command::deserialize(payload).map_err(|e| RetentionError::BadCommand(e.to_string()))?
        }
        other => {
            return Err(RetentionError::BadCommand(format!(
                "expected a JSON object such as {{\"command\":\"stats\"}}, got {}",
                json_kind(other)
            )))
        }
    };
    match &command {
        Command::Purge {
            older_than_days, ..
        } if !(1..=MAX_OLDER_THAN_DAYS).contains(older_than_days) => {
            Err(RetentionError::BadCommand(format!(
                "older_than_days must be 1 to {MAX_OLDER_THAN_DAYS}, got {older_than_days}"
            )))
        }
        Command::Purge {
            older_than_days,
            force: false,
        } if *older_than_days < MIN_PURGE_DAYS => Err(RetentionError::BadCommand(format!(
            "older_than_days {older_than_days} is below {MIN_PURGE_DAYS}: keys senders may still \
             redeliver would be purged, and such a redelivery would run again; \
             send \"force\": true to purge anyway"
        ))),
        Command::ReplayAll { source, .. } if source.is_empty() => Err(RetentionError::BadCommand(
            "replay_all needs a non-empty source".into(),
        )),
        Command::ReplayAll {
            received_after: Some(after),
            received_before: Some(before),
            ..
        } if after.at >= before.at => Err(RetentionError::BadCommand(
            "received_after must be before received_before".into(),
        )),
        Command::Replay {
            source,
            delivery_id,
            ..
        } if source.is_empty() || delivery_id.is_empty() => Err(RetentionError::BadCommand(
            "replay needs a non-empty source and delivery_id".into(),
        )),
        _ => Ok(command),
    }
}

/// Options of the command line's that are flags (`--force`): `true` when present.
const FLAGS: &[&str] = &["force", "dry_run"];
/// Options of the command line's whose value is a number (the rest are strings).
const NUMBERS: &[&str] = &["older_than_days"];

/// Turns a command line (`stats`, `purge --older-than-days 7`, `replay-all --source github
/// --dry-run`, or one JSON payload) into the payload an invocation would carry, for
/// [`parse_command`] to check like any other. Option names take `-` or `_`; `--name=value` works
/// too. No arguments at all is a normal run.
pub fn payload_from_args<S: AsRef<str>>(args: &[S]) -> Result<Value, RetentionError> {
    let bad = |msg: String| RetentionError::BadCommand(msg);
    let Some((first, rest)) = args.split_first() else {
        return Ok(Value::Object(Map::new()));
    };
    let first = first.as_ref();
    if first.trim_start().starts_with('{') {
        if !rest.is_empty() {
            return Err(bad("a JSON payload must be the only argument".into()));
        }
        return serde_json::from_str(first).map_err(|e| bad(format!("payload is not JSON: {e}")));
    }
    let mut payload = Map::new();
    payload.insert("command".into(), Value::from(first.replace('-', "_")));
    let mut rest = rest.iter().map(AsRef::as_ref);
    while let Some(arg) = rest.next() {
        let Some(option) = arg.strip_prefix("--") else {
            return Err(bad(format!("expected an option such as --source, got {arg:?}")));
        };
        let (name, inline) = match option.split_once('=') {
            Some((name, value)) => (name.replace('-', "_"), Some(value)),
            None => (option.replace('-', "_"), None),
        };
        let value = if FLAGS.contains(&name.as_str()) {
            match inline {
                None | Some("true") => Value::Bool(true),
                Some("false") => Value::Bool(false),
                Some(other) => return Err(bad(format!("--{name} takes no value, got {other:?}"))),
            }
        } else {
            let text = match inline {
                Some(v) => v,
                None => rest
                    .next()
                    .ok_or_else(|| bad(format!("--{name} needs a value")))?,
            };
            if NUMBERS.contains(&name.as_str()) {
                let n: u64 = text
                    .parse()
                    .map_err(|_| bad(format!("--{name} must be a whole number, got {text:?}")))?;
                Value::from(n)
            } else {
                Value::from(text)
            }
        };
        if payload.insert(name.clone(), value).is_some() {
            return Err(bad(format!("--{name} given twice")));
        }
    }
    Ok(Value::Object(payload))
}

/// A point in time an operator wrote (RFC 3339, e.g. `2026-01-01T00:00:00Z`), with the text as
/// written for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timestamp {
    /// As written.
    pub text: String,
    /// The instant.
    pub at: SystemTime,
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        match parse_rfc3339(&text) {
            Some(at) => Ok(Timestamp { text, at }),
            None => Err(serde::de::Error::custom(format!(
                "{text:?} is not an RFC 3339 time such as 2026-01-01T00:00:00Z"
            ))),
        }
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, from 1970 on. No calendar library is needed
/// for this one format, and the replay window is all that reads it.
fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<u64> {
        let part = s.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let shape = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && matches!(b[10], b'T' | b't' | b' ')
        && b[13] == b':'
        && b[16] == b':';
    if !shape {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    let mut nanos = 0u64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        for (i, c) in frac.bytes().take(9).take(digits).enumerate() {
            nanos += u64::from(c - b'0') * 10u64.pow(8 - i as u32);
        }
        rest = &frac[digits..];
    }
    let offset_secs: i64 = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let h = i64::from((*h1 as char).to_digit(10)? * 10 + (*h2 as char).to_digit(10)?);
            let m = i64::from((*m1 as char).to_digit(10)? * 10 + (*m2 as char).to_digit(10)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'+' {
                secs
            } else {
                -secs
            }
        }
        _ => return None,
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if year < 1970
        || !(1..=12).contains(&month)
        || day == 0
        || day > month_days[month as usize - 1]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days since 1970-01-01 (the civil-from-days algorithm, run backwards).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let local = (days * 86_400 + hour * 3600 + minute * 60 + second) as i64;
    let utc = u64::try_from(local - offset_secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(utc) + Duration::from_nanos(nanos))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}


#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(json: &str) -> Result<Command, RetentionError> {
        parse_command(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn scheduled_payloads_and_the_run_command_start_a_run() {
        for payload in [
            "{}",
            "null",
            r#"{"version":"0","detail-type":"Scheduled Event","source":"aws.events","detail":{}}"#,
            r#"{"command":"run"}"#,
        ] {
            assert_eq!(parse(payload).unwrap(), Command::Run {}, "{payload}");
        }
    }

    #[test]
    fn each_command_parses() {
        let cases = [
            (r#"{"command":"dry_run"}"#, Command::DryRun {}),
            (
                r#"{"command":"purge","older_than_days":7}"#,
                Command::Purge {
                    older_than_days: 7,
                    force: false,
                },
            ),
            (
                r#"{"command":"purge","older_than_days":1,"force":true}"#,
                Command::Purge {
                    older_than_days: 1,
                    force: true,
                },
            ),
            (
                r#"{"command":"replay_all","source":"github"}"#,
                Command::ReplayAll {
                    source: "github".into(),
                    event_type: None,
                    received_after: None,
                    received_before: None,
                    dry_run: false,
                },
            ),
            (
                r#"{"command":"replay","source":"stripe","delivery_id":"evt_1"}"#,
                Command::Replay {
                    source: "stripe".into(),
                    delivery_id: "evt_1".into(),
                    force: false,
                },
            ),
            (
                r#"{"command":"replay","source":"s","delivery_id":"d","force":true}"#,
                Command::Replay {
                    source: "s".into(),
                    delivery_id: "d".into(),
                    force: true,
                },
            ),
            (r#"{"command":"stats"}"#, Command::Stats {}),
            (r#"{"command":"migrate"}"#, Command::Migrate {}),
        ];
        for (json, want) in cases {
            assert_eq!(parse(json).unwrap(), want, "{json}");
        }
    }

    #[test]
    fn malformed_commands_are_refused_with_a_reason() {
        let cases = [
            (r#"{"command":"vacuum"}"#, "unknown variant"),
            (r#"{"command":""}"#, "unknown variant"),
            (r#"{"command":null}"#, "invalid type"),
            (r#"{"command":7}"#, "invalid type"),
            (r#"{"command":"purge"}"#, "missing field `older_than_days`"),
            (
                r#"{"command":"purge","older_than_days":"7"}"#,
                "invalid type",
            ),
            (
                r#"{"command":"purge","older_than_days":-1}"#,
                "invalid value",
            ),
            (
                r#"{"command":"purge","older_than_days":7.5}"#,
                "invalid type",
            ),
            (
                r#"{"command":"purge","older_than_days":0}"#,
                "older_than_days",
            ),
            (
                r#"{"command":"purge","older_than_days":36501}"#,
                "older_than_days",
            ),
            (
                r#"{"command":"purge","older_than_days":7,"dry":true}"#,
                "unknown field",
            ),
            (
                r#"{"command":"replay","source":"stripe"}"#,
                "missing field `delivery_id`",
            ),
            (
                r#"{"command":"replay","delivery_id":"x"}"#,
                "missing field `source`",
            ),
            (
                r#"{"command":"replay","source":"s","delivery_id":"d","force":"yes"}"#,
                "invalid type",
            ),
            (
                r#"{"command":"replay","source":"","delivery_id":"d"}"#,
                "non-empty",
            ),
            (r#"{"command":"stats","by":"source"}"#, "unknown field"),
            (r#"{"command":"run","now":true}"#, "unknown field"),
            (r#"{"command":"migrate","to":2}"#, "unknown field"),
            (
                r#"{"command":"dry_run","older_than_days":7}"#,
                "unknown field",
            ),
            (r#"{"command":"Stats"}"#, "unknown variant"),
            (
                r#"{"command":"purge","older_than_days":6}"#,
                "send \"force\": true",
            ),
            (
                r#"{"command":"purge","older_than_days":0,"force":true}"#,
                "older_than_days must be 1",
            ),
            (r#"{"command":"replay_all"}"#, "missing field `source`"),
            (r#"{"command":"replay_all","source":""}"#, "non-empty"),
            (
                r#"{"command":"replay_all","source":"s","received_after":"yesterday"}"#,
                "RFC 3339",
            ),
            (
                r#"{"command":"replay_all","source":"s","received_after":"2026-01-02T00:00:00Z","received_before":"2026-01-01T00:00:00Z"}"#,
                "must be before",
            ),
            (
                r#"{"command":"replay_all","source":"s","status":"dead"}"#,
                "unknown field",
            ),
            (r#""stats""#, "got a string"),
            (r#"[{"command":"stats"}]"#, "got an array"),
            ("42", "got a number"),
        ];
        for (json, needle) in cases {
            match parse(json) {
                Err(e @ RetentionError::BadCommand(_)) => {
                    assert!(e.to_string().contains(needle), "{json}: {e}");
                    assert_eq!(e.error_type(), "hookclaim.BadCommand");
                }
                other => panic!("{json}: expected BadCommand, got {other:?}"),
            }
        }
    }

    #[test]
    fn replay_all_reads_its_window() {
        let got = parse(
            r#"{"command":"replay_all","source":"github","event_type":"push",
                "received_after":"2026-01-01T00:00:00Z","received_before":"2026-01-01T03:30:00+01:00",
                "dry_run":true}"#,
        )
        .unwrap();
        let Command::ReplayAll {
            source,
            event_type,
            received_after: Some(after),
            received_before: Some(before),
            dry_run,
        } = got
        else {
            panic!("{got:?}");
        };
        assert_eq!((source.as_str(), event_type.as_deref(), dry_run), ("github", Some("push"), true));
        assert_eq!(before.at.duration_since(after.at).unwrap(), Duration::from_secs(2 * 3600 + 1800));
        assert_eq!(after.text, "2026-01-01T00:00:00Z");
    }

    #[test]
    fn rfc3339_times_parse_and_anything_else_does_not() {
        let secs = |s: &str| {
            parse_rfc3339(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64())
        };
        assert_eq!(secs("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(secs("2026-01-01T00:00:00Z"), Some(1_767_225_600.0));
        assert_eq!(secs("2024-02-29T12:00:00.5Z"), Some(1_709_208_000.5));
        assert_eq!(secs("2026-01-01T01:00:00+01:00"), Some(1_767_225_600.0));
        assert_eq!(secs("2025-12-31t19:00:00-05:00"), Some(1_767_225_600.0));
        for bad in [
            "",
            "2026-01-01",
            "2026-01-01T00:00:00",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+0100",
            "1969-12-31T23:59:59Z",
            "+026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Zjunk",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_command_line_becomes_the_same_payload_an_invocation_carries() {
        let cases: &[(&[&str], Value)] = &[
            (&[], json!({})),
            (&["stats"], json!({"command": "stats"})),
            (&["dry-run"], json!({"command": "dry_run"})),
            (
                &["purge", "--older-than-days", "3", "--force"],
                json!({"command": "purge", "older_than_days": 3, "force": true}),
            ),
            (
                &["replay", "--source", "acme", "--delivery-id", "42"],
                json!({"command": "replay", "source": "acme", "delivery_id": "42"}),
            ),
            (
                &["replay-all", "--source=github", "--received_after", "2026-01-01T00:00:00Z", "--dry-run=false"],
                json!({"command": "replay_all", "source": "github",
                       "received_after": "2026-01-01T00:00:00Z", "dry_run": false}),
            ),
            (&[r#"{"command":"stats"}"#], json!({"command": "stats"})),
        ];
        for (args, want) in cases {
            assert_eq!(&payload_from_args(args).unwrap(), want, "{args:?}");
        }
        for (args, needle) in [
            (&["purge", "--older-than-days"][..], "needs a value"),
            (&["purge", "--older-than-days", "seven"][..], "whole number"),
            (&["stats", "extra"][..], "expected an option"),
            (&["replay", "--source", "a", "--source", "b"][..], "given twice"),
            (&["replay-all", "--dry-run=maybe"][..], "takes no value"),
            (&[r#"{"command":"stats"}"#, "--force"][..], "only argument"),
            (&["{nope"][..], "not JSON"),
        ] {
            let e = payload_from_args(args).unwrap_err();
            assert!(e.to_string().contains(needle), "{args:?}: {e}");
        }
        // The payload goes through the same checks as an invocation's.
        let p = payload_from_args(&["purge", "--older-than-days", "3"]).unwrap();
        assert!(parse_command(&p).unwrap_err().to_string().contains("force"));
    }
}
