//! Target `retention_command`: the retention function's payload, as JSON, through
//! `retention::parse_command`, which must be total over any JSON value.

use serde_json::{json, Value};

use hookclaim::retention::{self, Command, MAX_OLDER_THAN_DAYS, MIN_PURGE_DAYS};

/// Every command name `parse_command` may return.
const KNOWN: &[&str] = &[
    "run",
    "dry_run",
    "purge",
    "replay",
    "replay_all",
    "stats",
    "migrate",
];

/// The target: never panics; a refusal is always `BadCommand`; an accepted command is the one
/// the payload names, within its limits, and parses again from its own canonical form.
pub fn run(data: &[u8]) {
    let Ok(payload) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let command = match retention::parse_command(&payload) {
        Ok(command) => command,
        Err(e) => {
            assert_eq!(e.error_type(), "hookclaim.BadCommand", "{e:?}");
            return;
        }
    };
    let name = command.name();
    assert!(KNOWN.contains(&name), "unknown command name {name}");
    match payload.get("command") {
        Some(named) if payload.is_object() => {
            assert_eq!(named.as_str(), Some(name), "ran another command than named")
        }
        // Null, an EventBridge event, the Scheduler's `{}`: a normal run.
        _ => assert_eq!(command, Command::Run {}),
    }
    match &command {
        Command::Purge {
            older_than_days,
            force,
        } => {
            assert!((1..=MAX_OLDER_THAN_DAYS).contains(older_than_days));
            assert!(
                *force || *older_than_days >= MIN_PURGE_DAYS,
                "short horizon without force"
            );
        }
        Command::ReplayAll {
            source,
            received_after,
            received_before,
            ..
        } => {
            assert!(!source.is_empty());
            if let (Some(after), Some(before)) = (received_after, received_before) {
                assert!(after.at < before.at, "an empty window was accepted");
            }
        }
        Command::Replay {
            source,
            delivery_id,
            ..
        } => assert!(!source.is_empty() && !delivery_id.is_empty()),
        _ => {}
    }
    let again = retention::parse_command(&canonical(&command))
        .unwrap_or_else(|e| panic!("{command:?} does not parse from its canonical form: {e}"));
    assert_eq!(again, command, "round trip changed the command");
}

/// The payload an operator would write for `command`.
fn canonical(command: &Command) -> Value {
    match command {
        Command::Purge {
            older_than_days,
            force,
        } => {
            json!({"command": "purge", "older_than_days": older_than_days, "force": force})
        }
        Command::ReplayAll {
            source,
            event_type,
            received_after,
            received_before,
            dry_run,
        } => json!({
            "command": "replay_all", "source": source, "event_type": event_type,
            "received_after": received_after.as_ref().map(|t| &t.text),
            "received_before": received_before.as_ref().map(|t| &t.text),
            "dry_run": dry_run,
        }),
        Command::Replay {
            source,
            delivery_id,
            force,
        } => json!({
            "command": "replay", "source": source, "delivery_id": delivery_id, "force": force
        }),
        other => json!({ "command": other.name() }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_committed_seed_passes() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/retention_command");
        for entry in std::fs::read_dir(dir).unwrap() {
            super::run(&std::fs::read(entry.unwrap().path()).unwrap());
        }
    }
}
