//! Operators' commands: what an invocation payload asks the retention function to do.

use serde::Deserialize;
use serde_json::Value;

use super::RetentionError;

/// Longest horizon an operator's purge accepts (the same bound as `RETENTION_DAYS`).
pub const MAX_OLDER_THAN_DAYS: u32 = 36_500;

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
        /// The horizon in days, 1 to [`MAX_OLDER_THAN_DAYS`].
        older_than_days: u32,
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
    /// Counts by source and status, the oldest in-progress lease and the oldest row.
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
        Command::Purge { older_than_days }
            if !(1..=MAX_OLDER_THAN_DAYS).contains(older_than_days) =>
        {
            Err(RetentionError::BadCommand(format!(
                "older_than_days must be 1 to {MAX_OLDER_THAN_DAYS}, got {older_than_days}"
            )))
        }
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
                Command::Purge { older_than_days: 7 },
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
}
