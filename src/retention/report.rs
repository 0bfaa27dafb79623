//! What a retention invocation did: the report returned to the caller, and its log line, which is
//! also a CloudWatch EMF document.

use std::time::SystemTime;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::RetentionError;
use crate::observe::{self, Metric};
use crate::pipeline::{Happened, Outcome};
use crate::ledger::{LedgerStats, StoredDelivery, Waiting};

/// At most this many dead deliveries are listed in one report; the rest are only counted.
pub const MAX_DEAD_LISTED: usize = 50;

/// How re-driven deliveries ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Redriven {
    /// Processed and recorded as done.
    pub ok: u64,
    /// Failed again; due later with backoff.
    pub failed: u64,
    /// Deferred by a throttling downstream; due later, no attempt spent.
    pub deferred: u64,
    /// Given up: permanent failure, attempts exhausted, or nothing left to re-drive.
    pub dead: u64,
    /// Taken over by a newer attempt while this one ran; nothing recorded.
    pub fenced: u64,
}

/// A delivery that became dead in this invocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadDelivery {
    /// Source name.
    pub source: String,
    /// Delivery id.
    pub delivery_id: String,
    /// The attempt that gave up.
    pub attempt: i32,
    /// Its last error.
    pub error: String,
}

/// Work a run leaves (or, in a dry run, would find): each count is what the next run picks up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Backlog {
    /// Expired leases and due retries.
    pub reclaim: u64,
    /// Finished rows past the purge horizon.
    pub purge: u64,
    /// Payloads past the trim horizon (0 when trimming is off).
    pub trim: u64,
}

/// A phase of a run that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhaseError {
    /// `reclaim`, `purge` or `trim`.
    pub phase: &'static str,
    /// What went wrong.
    pub error: String,
}

/// The outcome of an operator's replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// Source name.
    pub source: String,
    /// Delivery id.
    pub delivery_id: String,
    /// The attempt the replay ran as.
    pub attempt: i32,
    /// `done`, `failed`, `deferred`, `dead` or `fenced`.
    pub outcome: &'static str,
    /// The error, when it did not end done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `failed` and `deferred`: seconds until the next attempt is due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_secs: Option<f64>,
}

/// What a bulk replay (`replay_all`) selected and left; how each delivery ended is counted in
/// the report's `reclaimed`, `redriven` and `dead`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BulkReplayReport {
    /// Source name.
    pub source: String,
    /// The event type filter, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// The window's start, as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_after: Option<String>,
    /// The window's end, as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_before: Option<String>,
    /// True when nothing was replayed, only counted.
    pub dry_run: bool,
    /// Failed or dead deliveries the filter selected at the start, with their payload.
    pub matched: u64,
    /// Selected deliveries without their payload (trimmed): nothing to run, so never replayed.
    pub unreplayable: u64,
    /// Deliveries that another invocation (a concurrent replay, a redelivery, the scheduled run)
    /// took or finished between listing and claiming; left to it.
    pub skipped: u64,
    /// Selected deliveries still failed or dead at the end (those not reached, and those that
    /// failed again); `None` when they could not be counted in time.
    pub remaining: Option<u64>,
}

/// The outcome of the `migrate` command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrateReport {
    /// Versions this invocation applied (empty when the schema was already current).
    pub applied: Vec<i32>,
    /// The schema version now.
    pub version: i32,
}

/// What an invocation did: returned to the caller and logged (also as EMF metrics).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The command that ran (`run` for a scheduled event).
    pub command: &'static str,
    /// Rows taken over by the reclaim (or the replay).
    pub reclaimed: u64,
    /// How the re-driven deliveries ended.
    pub redriven: Redriven,
    /// Deliveries that became dead, with their last errors (the first 50; the others are
    /// counted in `dead_not_listed`).
    pub dead: Vec<DeadDelivery>,
    /// Dead deliveries beyond the listed ones.
    pub dead_not_listed: u64,
    /// Rows deleted.
    pub purged: u64,
    /// Payloads dropped.
    pub trimmed: u64,
    /// What is left for the next run; `None` when it could not be counted in time.
    pub remaining: Option<Backlog>,
    /// Wall time of the invocation's work.
    pub elapsed_ms: u64,
    /// True when the deadline stopped the work before it was finished.
    pub stopped_early: bool,
    /// Phases of a run that failed; the others still ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phase_errors: Vec<PhaseError>,
    /// Dry run: what a run would do now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would: Option<Backlog>,
    /// Replay: how it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayReport>,
    /// Stats: the ledger at a glance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<LedgerStats>,
    /// Migrate: what was applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrations: Option<MigrateReport>,
    /// Run: how long the oldest expired lease and the oldest due retry have been waiting at the
    /// end of the run (0 when there are none); `None` when not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
    /// Bulk replay: what it selected and left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bulk_replay: Option<BulkReplayReport>,
}

impl Report {
    pub(super) fn new(command: &'static str) -> Self {
        Report {
            command,
            reclaimed: 0,
            redriven: Redriven::default(),
            dead: Vec::new(),
            dead_not_listed: 0,
            purged: 0,
            trimmed: 0,
            remaining: None,
            elapsed_ms: 0,
            stopped_early: false,
            phase_errors: Vec::new(),
            would: None,
            replay: None,
            stats: None,
            migrations: None,
            waiting: None,
            bulk_replay: None,
        }
    }

    pub(super) fn record_dead(&mut self, stored: &StoredDelivery, error: String) {
        self.redriven.dead += 1;
        if self.dead.len() < MAX_DEAD_LISTED {
            self.dead.push(DeadDelivery {
                source: stored.source.clone(),
                delivery_id: stored.delivery_id.clone(),
                attempt: stored.attempt,
                error,
            });
        } else {
            self.dead_not_listed += 1;
        }
    }

    pub(super) fn record(&mut self, stored: &StoredDelivery, outcome: &Outcome) {
        match outcome.happened {
            Happened::Done => self.redriven.ok += 1,
            Happened::Failed(_) => self.redriven.failed += 1,
            Happened::Deferred(_) => self.redriven.deferred += 1,
            Happened::Dead => self.record_dead(stored, outcome.reason.clone().unwrap_or_default()),
            // A re-drive claims nothing: it holds the row, or its finish is fenced.
            _ => self.redriven.fenced += 1,
        }
    }
}

/// The report as one JSON log line that is also a CloudWatch EMF document: counts per command.
///
/// `completed` (1 when the command ended without error) and `errors` are always there, so an
/// alarm on `completed` for `command=run`, treating missing data as breaching, notices a run that
/// fails, a cold start that fails (no line at all), and a schedule that stopped. A run adds the
/// ages of the oldest waiting work (`oldest_expired_lease_age_secs`,
/// `oldest_due_retry_age_secs`); `remaining_purge` is the rows still past the purge horizon.
pub fn report_line(
    report: &Report,
    error: Option<&RetentionError>,
    namespace: &str,
    now: SystemTime,
) -> Value {
    let counts = [
        ("completed", u64::from(error.is_none()), "Count"),
        ("errors", u64::from(error.is_some()), "Count"),
        ("reclaimed", report.reclaimed, "Count"),
        ("redriven_ok", report.redriven.ok, "Count"),
        ("redriven_failed", report.redriven.failed, "Count"),
        ("redriven_deferred", report.redriven.deferred, "Count"),
        ("redriven_dead", report.redriven.dead, "Count"),
        ("purged", report.purged, "Count"),
        ("trimmed", report.trimmed, "Count"),
        ("stopped_early", u64::from(report.stopped_early), "Count"),
        ("elapsed_ms", report.elapsed_ms, "Milliseconds"),
    ];
    let mut values: Vec<(&'static str, Value, &'static str)> = counts
        .into_iter()
        .map(|(name, n, unit)| (name, json!(n), unit))
        .collect();
    if let Some(left) = report.remaining {
        values.push(("remaining_reclaim", json!(left.reclaim), "Count"));
        values.push(("remaining_purge", json!(left.purge), "Count"));
        values.push(("remaining_trim", json!(left.trim), "Count"));
    }
    if let Some(waiting) = report.waiting {
        values.push((
            "oldest_expired_lease_age_secs",
            json!(round_ms(waiting.expired_lease_secs)),
            "Seconds",
        ));
        values.push((
            "oldest_due_retry_age_secs",
            json!(round_ms(waiting.due_retry_secs)),
            "Seconds",
        ));
    }
    let metrics: Vec<Metric> = values
        .iter()
        .map(|(name, _, unit)| Metric::new(name, unit))
        .collect();
    let mut line = Map::new();
    line.insert(
        "_aws".into(),
        observe::emf_block(now, namespace, &[&["command"]], &metrics),
    );
    let troubled = error.is_some() || report.stopped_early || report.redriven.dead > 0;
    line.insert(
        "level".into(),
        json!(match (error, troubled) {
            (Some(_), _) => "ERROR",
            (None, true) => "WARN",
            (None, false) => "INFO",
        }),
    );
    line.insert("message".into(), json!("retention report"));
    line.insert("command".into(), json!(report.command));
    for (name, value, _) in &values {
        line.insert((*name).into(), value.clone());
    }
    if let Some(e) = error {
        line.insert("error_type".into(), json!(e.error_type()));
        line.insert("error".into(), json!(e.to_string()));
    }
    line.insert(
        "report".into(),
        serde_json::to_value(report).unwrap_or(Value::Null),
    );
    Value::Object(line)
}

fn round_ms(secs: f64) -> f64 {
    (secs * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::db::DbError;

    #[test]
    fn report_line_is_a_valid_emf_document() {
        let mut report = Report::new("run");
        report.purged = 12;
        report.redriven.dead = 1;
        report.remaining = Some(Backlog {
            reclaim: 0,
            purge: 3,
            trim: 0,
        });
        let v = report_line(&report, None, "hookclaim", std::time::UNIX_EPOCH);
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cw["Dimensions"][0], json!(["command"]));
        assert_eq!(v["command"], "run");
        for m in cw["Metrics"].as_array().unwrap() {
            assert!(v[m["Name"].as_str().unwrap()].is_number(), "{m}");
        }
        assert_eq!(v["purged"], 12);
        assert_eq!(v["remaining_purge"], 3);
        assert_eq!(v["level"], "WARN", "a dead delivery is worth a look");
        assert_eq!(v["report"]["redriven"]["dead"], 1);
        assert!(v["report"].get("stats").is_none(), "empty sections omitted");

        let failed = report_line(
            &Report::new("purge"),
            Some(&RetentionError::Database(DbError::Timeout)),
            "hookclaim",
            std::time::UNIX_EPOCH,
        );
        assert_eq!(failed["level"], "ERROR");
        assert_eq!(failed["error_type"], "hookclaim.DatabaseUnavailable");
        assert!(failed.get("remaining_purge").is_none());
    }

    #[test]
    fn dead_list_is_bounded_and_the_rest_counted() {
        let mut report = Report::new("run");
        let stored = StoredDelivery {
            source: "s".into(),
            delivery_id: "d".into(),
            attempt: 3,
            event_type: None,
            payload: None,
            headers: BTreeMap::new(),
            last_error: None,
            gave_up: false,
        };
        for _ in 0..MAX_DEAD_LISTED + 5 {
            report.record_dead(&stored, "boom".into());
        }
        assert_eq!(report.dead.len(), MAX_DEAD_LISTED);
        assert_eq!(report.dead_not_listed, 5);
        assert_eq!(report.redriven.dead, MAX_DEAD_LISTED as u64 + 5);
    }
}
