//! The retention function: re-drives deliveries whose processing died or failed, purges finished
//! rows past their retention, trims old payloads, and answers operators' commands.
//!
//! A scheduled run (any payload without a `"command"` key: the EventBridge "Scheduled Event", or
//! the Scheduler's `{}`) works in three phases, each in bounded steps that stop at the
//! invocation's deadline minus a margin: reclaim and re-drive, purge, trim. What is left is
//! reported and picked up by the next run. Operators invoke the function directly with a JSON
//! command (see [`Command`] and `events/retention-*.json`).

use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::config::{Config, RetentionSettings};
use crate::db::{classify, Database, DbError, Session};
use crate::observe;
use crate::pipeline::{self, RetryPolicy, Settled};
use crate::processor::{Delivery, Processor};
use crate::schema::{self, Readiness};
use crate::store::{self, Attempt, Claimant, Finish, LedgerStats, StoredDelivery};

/// At most this many dead deliveries are listed in one report; the rest are only counted.
pub const MAX_DEAD_LISTED: usize = 50;

/// Longest horizon an operator's purge accepts (the same bound as `RETENTION_DAYS`).
pub const MAX_OLDER_THAN_DAYS: u32 = 36_500;

/// The error recorded on a reclaimed row whose payload was already trimmed.
pub const TRIMMED_PAYLOAD_ERROR: &str =
    "payload was trimmed before the delivery finished; it cannot be re-driven";

/// Time kept back from the deadline for reporting after the work has stopped.
const REPORT_RESERVE: Duration = Duration::from_millis(250);

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

/// Why an invocation failed. Each variant is a distinct Lambda `errorType`.
#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    /// The payload is not a command this function knows; nothing was changed.
    #[error("bad command: {0}")]
    BadCommand(String),
    /// A replay named a delivery that does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A replay named a delivery that cannot be replayed now; nothing was changed.
    #[error("replay refused: {0}")]
    ReplayRefused(String),
    /// The database could not be reached or failed; work done before is kept and reported in the
    /// log.
    #[error(transparent)]
    Database(#[from] DbError),
}

impl RetentionError {
    /// The Lambda `errorType`: `hookclaim.<Kind>`.
    pub fn error_type(&self) -> &'static str {
        match self {
            RetentionError::BadCommand(_) => "hookclaim.BadCommand",
            RetentionError::NotFound(_) => "hookclaim.NotFound",
            RetentionError::ReplayRefused(_) => "hookclaim.ReplayRefused",
            RetentionError::Database(
                DbError::Connect(_) | DbError::Timeout | DbError::Connection(_),
            ) => "hookclaim.DatabaseUnavailable",
            RetentionError::Database(DbError::Query(_) | DbError::Tls(_)) => {
                "hookclaim.DatabaseError"
            }
        }
    }
}

impl From<RetentionError> for lambda_runtime::Diagnostic {
    fn from(e: RetentionError) -> Self {
        lambda_runtime::Diagnostic {
            error_type: e.error_type().into(),
            error_message: e.to_string(),
        }
    }
}

/// How re-driven deliveries ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Redriven {
    /// Processed and recorded as done.
    pub ok: u64,
    /// Failed again; due later with backoff.
    pub failed: u64,
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

/// The outcome of an operator's replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// Source name.
    pub source: String,
    /// Delivery id.
    pub delivery_id: String,
    /// The attempt the replay ran as.
    pub attempt: i32,
    /// `done`, `failed`, `dead` or `fenced`.
    pub outcome: &'static str,
    /// The error, when it did not end done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `failed`: seconds until the next attempt is due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_secs: Option<f64>,
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
    /// Deliveries that became dead, with their last errors (at most [`MAX_DEAD_LISTED`]).
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
}

impl Report {
    fn new(command: &'static str) -> Self {
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
            would: None,
            replay: None,
            stats: None,
            migrations: None,
        }
    }

    fn record_dead(&mut self, stored: &StoredDelivery, error: String) {
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

    fn record(&mut self, stored: &StoredDelivery, settled: &Settled) {
        match settled {
            Settled::Done => self.redriven.ok += 1,
            Settled::Failed { .. } => self.redriven.failed += 1,
            Settled::Dead { error } => self.record_dead(stored, error.clone()),
            Settled::Fenced => self.redriven.fenced += 1,
        }
    }
}

/// The report as one JSON log line that is also a CloudWatch EMF document: counts per command.
pub fn report_line(report: &Report, error: Option<&RetentionError>, now: SystemTime) -> Value {
    let mut values: Vec<(&str, u64, &str)> = vec![
        ("reclaimed", report.reclaimed, "Count"),
        ("redriven_ok", report.redriven.ok, "Count"),
        ("redriven_failed", report.redriven.failed, "Count"),
        ("redriven_dead", report.redriven.dead, "Count"),
        ("purged", report.purged, "Count"),
        ("trimmed", report.trimmed, "Count"),
        ("stopped_early", u64::from(report.stopped_early), "Count"),
        ("elapsed_ms", report.elapsed_ms, "Milliseconds"),
    ];
    if let Some(left) = report.remaining {
        values.push(("remaining_reclaim", left.reclaim, "Count"));
        values.push(("remaining_purge", left.purge, "Count"));
        values.push(("remaining_trim", left.trim, "Count"));
    }
    let metrics = values
        .iter()
        .map(|(name, _, unit)| json!({"Name": name, "Unit": unit}))
        .collect();
    let mut line = Map::new();
    line.insert(
        "_aws".into(),
        observe::emf_block(now, &["command"], metrics),
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
        line.insert((*name).into(), json!(value));
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

/// Where the work must stop: the deadline minus the margin, as a monotonic instant.
#[derive(Debug, Clone, Copy)]
struct Clock {
    deadline: SystemTime,
    stop_at: Instant,
}

impl Clock {
    fn new(deadline: SystemTime, margin: Duration) -> Self {
        let left = deadline
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        Clock {
            deadline,
            stop_at: Instant::now() + left.saturating_sub(margin),
        }
    }

    fn expired(&self) -> bool {
        Instant::now() >= self.stop_at
    }

    /// Time until the invocation itself ends.
    fn until_deadline(&self) -> Duration {
        self.deadline
            .duration_since(SystemTime::now())
            .unwrap_or_default()
    }
}

/// Everything one execution environment needs to run retention; built once at cold start.
pub struct Retention<P> {
    db: Database,
    processor: P,
    settings: RetentionSettings,
    retry: RetryPolicy,
    lease_margin: Duration,
    ready: Readiness,
}

impl<P: Processor> Retention<P> {
    /// Builds the state from its parts.
    pub fn new(
        db: Database,
        processor: P,
        settings: RetentionSettings,
        retry: RetryPolicy,
        lease_margin: Duration,
    ) -> Self {
        Retention {
            db,
            processor,
            settings,
            retry,
            lease_margin,
            ready: Readiness::default(),
        }
    }

    /// Builds the state from the configuration.
    pub fn from_config(config: &Config, db: Database, processor: P) -> Self {
        Self::new(
            db,
            processor,
            config.retention,
            config.retry,
            config.lease_margin,
        )
    }

    /// The environment's database, for tools and tests.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Connects, brings the schema up to date and runs the processor's setup, as the webhook
    /// function does. Done once per environment; until it succeeds, every invocation tries it.
    pub async fn prepare(&self) -> Result<(), DbError> {
        let mut session = self.db.session().await;
        self.prepare_in(&mut session).await
    }

    async fn prepare_in(&self, session: &mut Session<'_>) -> Result<(), DbError> {
        self.ready.ensure(session, &self.processor).await
    }

    /// Handles one invocation: parses the payload (refusing a malformed command before touching
    /// anything), runs it within `deadline` (from the Lambda context; tests pass their own),
    /// logs the report and returns it.
    pub async fn handle(
        &self,
        payload: Value,
        deadline: SystemTime,
    ) -> Result<Report, RetentionError> {
        let started = Instant::now();
        let command = parse_command(&payload).inspect_err(|e| {
            tracing::warn!(error = %e, "retention command refused");
        })?;
        let clock = Clock::new(deadline, self.settings.deadline_margin);
        let mut report = Report::new(command.name());
        // Boxed: the commands' futures nest deep enough to exceed the compiler's layout query
        // depth in callers that wrap `handle` in further async code.
        let result = Box::pin(self.execute(&command, clock, &mut report)).await;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        observe::emit(&report_line(
            &report,
            result.as_ref().err(),
            SystemTime::now(),
        ));
        result.map(|()| report)
    }

    async fn execute(
        &self,
        command: &Command,
        clock: Clock,
        report: &mut Report,
    ) -> Result<(), RetentionError> {
        let mut session = self.db.session().await;
        // `migrate` applies the schema itself and reports what it applied.
        if !matches!(command, Command::Migrate {}) {
            self.prepare_in(&mut session).await?;
        }
        match command {
            Command::Migrate {} => self.migrate(&mut session, report).await,
            Command::Run {} => self.run(&mut session, clock, report).await,
            Command::DryRun {} => {
                report.would = Some(self.backlog(&mut session, self.settings.retention).await?);
                Ok(())
            }
            Command::Purge { older_than_days } => {
                let horizon = Duration::from_secs(u64::from(*older_than_days) * 86_400);
                let finished = self.purge(&mut session, horizon, clock, report).await?;
                report.stopped_early = !finished;
                report.remaining = self
                    .remaining(&mut session, clock, horizon, finished, true)
                    .await;
                Ok(())
            }
            Command::Replay {
                source,
                delivery_id,
                force,
            } => {
                self.replay(&mut session, source, delivery_id, *force, clock, report)
                    .await
            }
            Command::Stats {} => {
                let stats = session.run(|c, _| Box::pin(store::stats(c))).await?;
                report.stats = Some(stats);
                Ok(())
            }
        }
    }

    /// A normal run: reclaim and re-drive, then purge, then trim, each until done or the clock
    /// runs out; then count what is left.
    async fn run(
        &self,
        session: &mut Session<'_>,
        clock: Clock,
        report: &mut Report,
    ) -> Result<(), RetentionError> {
        let reclaimed_all = self.reclaim(session, clock, report).await?;
        let purged_all = reclaimed_all
            && self
                .purge(session, self.settings.retention, clock, report)
                .await?;
        let trimmed_all = purged_all && self.trim(session, clock, report).await?;
        report.stopped_early = !trimmed_all;
        report.remaining = self
            .remaining(
                session,
                clock,
                self.settings.retention,
                purged_all,
                trimmed_all,
            )
            .await;
        Ok(())
    }

    /// Takes over expired leases and due retries one at a time and runs each through the
    /// pipeline. Returns whether it ran out of work (rather than time).
    ///
    /// The whole run claims under one owner token, and the reclaim skips rows that token already
    /// held, so each delivery is attempted at most once per run.
    async fn reclaim(
        &self,
        session: &mut Session<'_>,
        clock: Clock,
        report: &mut Report,
    ) -> Result<bool, RetentionError> {
        let owner = owner_token();
        loop {
            if clock.expired() {
                return Ok(false);
            }
            let claimant = Claimant {
                owner: &owner,
                lease: clock.until_deadline() + self.lease_margin,
            };
            let next = session
                .run(|c, _| Box::pin(store::reclaim_next(c, claimant)))
                .await?;
            let Some(stored) = next else {
                return Ok(true);
            };
            report.reclaimed += 1;
            let settled = self.redrive(session, &stored, &owner).await?;
            log_redrive(&stored, &settled);
            report.record(&stored, &settled);
        }
    }

    /// Runs a claimed stored delivery through the pipeline; one without its payload is marked
    /// dead, since there is nothing to run.
    async fn redrive(
        &self,
        session: &mut Session<'_>,
        stored: &StoredDelivery,
        owner: &str,
    ) -> Result<Settled, DbError> {
        let Some(delivery) = delivery_of(stored) else {
            let at = Attempt {
                source: &stored.source,
                delivery_id: &stored.delivery_id,
                attempt: stored.attempt,
                owner,
            };
            let finish = session
                .run(|c, _| Box::pin(store::finish_dead(c, &at, TRIMMED_PAYLOAD_ERROR)))
                .await?;
            return Ok(match finish {
                Finish::Applied => Settled::Dead {
                    error: TRIMMED_PAYLOAD_ERROR.into(),
                },
                Finish::Fenced => Settled::Fenced,
            });
        };
        pipeline::run_claimed(session, &self.processor, &delivery, owner, &self.retry).await
    }

    /// Deletes finished rows older than `horizon` in batches. Returns whether it ran out of work.
    async fn purge(
        &self,
        session: &mut Session<'_>,
        horizon: Duration,
        clock: Clock,
        report: &mut Report,
    ) -> Result<bool, RetentionError> {
        let batch = self.settings.batch_size;
        loop {
            if clock.expired() {
                return Ok(false);
            }
            let n = session
                .run(|c, _| Box::pin(store::purge_batch(c, horizon, batch)))
                .await?;
            report.purged += n;
            if n < batch as u64 {
                return Ok(true);
            }
        }
    }

    /// Drops old payloads in batches, if trimming is configured. Returns whether it ran out of
    /// work.
    async fn trim(
        &self,
        session: &mut Session<'_>,
        clock: Clock,
        report: &mut Report,
    ) -> Result<bool, RetentionError> {
        let Some(horizon) = self.settings.trim_after else {
            return Ok(true);
        };
        let batch = self.settings.batch_size;
        let mut cursor = None;
        loop {
            if clock.expired() {
                return Ok(false);
            }
            let trimmed = session
                .run(|c, _| Box::pin(store::trim_batch(c, horizon, cursor, batch)))
                .await?;
            report.trimmed += trimmed.count;
            if trimmed.count < batch as u64 {
                return Ok(true);
            }
            cursor = trimmed.cursor;
        }
    }

    /// Counts what a run would find now (with `purge_after` as the purge horizon).
    async fn backlog(
        &self,
        session: &mut Session<'_>,
        purge_after: Duration,
    ) -> Result<Backlog, DbError> {
        let reclaim = session
            .run(|c, _| Box::pin(store::count_reclaimable(c)))
            .await?;
        let purge = session
            .run(|c, _| Box::pin(store::count_purgeable(c, purge_after)))
            .await?;
        let trim = match self.settings.trim_after {
            Some(trim_after) => {
                session
                    .run(|c, _| Box::pin(store::count_trimmable(c, trim_after, purge_after)))
                    .await?
            }
            None => 0,
        };
        Ok(Backlog {
            reclaim,
            purge,
            trim,
        })
    }

    /// What is left after a run. A phase that ran out of work leaves nothing (rows a concurrent
    /// claim held are picked up next time) and is not counted again; a phase the clock stopped
    /// is counted. Counting must not outlive the invocation: if it cannot finish before the
    /// deadline, the report says `null` rather than losing the whole report to a timeout.
    async fn remaining(
        &self,
        session: &mut Session<'_>,
        clock: Clock,
        purge_after: Duration,
        purge_finished: bool,
        trim_finished: bool,
    ) -> Option<Backlog> {
        let budget = clock.until_deadline().saturating_sub(REPORT_RESERVE);
        let count = async {
            let reclaim = session
                .run(|c, _| Box::pin(store::count_reclaimable(c)))
                .await?;
            let purge = if purge_finished {
                0
            } else {
                session
                    .run(|c, _| Box::pin(store::count_purgeable(c, purge_after)))
                    .await?
            };
            let trim = match self.settings.trim_after {
                Some(trim_after) if !trim_finished => {
                    session
                        .run(|c, _| Box::pin(store::count_trimmable(c, trim_after, purge_after)))
                        .await?
                }
                _ => 0,
            };
            Ok::<_, DbError>(Backlog {
                reclaim,
                purge,
                trim,
            })
        };
        match tokio::time::timeout(budget, count).await {
            Ok(Ok(backlog)) => Some(backlog),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not count the remaining work");
                None
            }
            Err(_) => {
                // A statement may still be running on the connection; start afresh next time.
                session.discard();
                tracing::warn!("no time left to count the remaining work");
                None
            }
        }
    }

    async fn replay(
        &self,
        session: &mut Session<'_>,
        source: &str,
        delivery_id: &str,
        force: bool,
        clock: Clock,
        report: &mut Report,
    ) -> Result<(), RetentionError> {
        let owner = owner_token();
        let claimant = Claimant {
            owner: &owner,
            lease: clock.until_deadline() + self.lease_margin,
        };
        let taken = session
            .run(|c, _| {
                Box::pin(store::take_for_replay(
                    c,
                    source,
                    delivery_id,
                    claimant,
                    force,
                ))
            })
            .await?;
        let Some(stored) = taken else {
            let state = session
                .run(|c, _| Box::pin(store::state(c, source, delivery_id)))
                .await?;
            return Err(refusal(source, delivery_id, state));
        };
        report.reclaimed += 1;
        let settled = self.redrive(session, &stored, &owner).await?;
        log_redrive(&stored, &settled);
        report.record(&stored, &settled);
        let (outcome, error, retry_in_secs) = match settled {
            Settled::Done => ("done", None, None),
            Settled::Failed { error, retry_in } => {
                ("failed", Some(error), Some(retry_in.as_secs_f64()))
            }
            Settled::Dead { error } => ("dead", Some(error), None),
            Settled::Fenced => ("fenced", None, None),
        };
        report.replay = Some(ReplayReport {
            source: stored.source,
            delivery_id: stored.delivery_id,
            attempt: stored.attempt,
            outcome,
            error,
            retry_in_secs,
        });
        Ok(())
    }

    async fn migrate(
        &self,
        session: &mut Session<'_>,
        report: &mut Report,
    ) -> Result<(), RetentionError> {
        let client = session.client().await?;
        let applied = schema::migrate(client).await.map_err(classify)?;
        let version = schema::current_version(&**client).await.map_err(classify)?;
        if !applied.is_empty() {
            tracing::info!(versions = ?applied, "schema migrations applied");
        }
        report.migrations = Some(MigrateReport { applied, version });
        self.prepare_in(session).await?;
        Ok(())
    }
}

/// Why a replay could not take the delivery, from its current state.
fn refusal(source: &str, delivery_id: &str, state: Option<store::DeliveryState>) -> RetentionError {
    let key = format!("{source}/{delivery_id}");
    let Some(state) = state else {
        return RetentionError::NotFound(format!("no delivery {key}"));
    };
    let why = if !state.has_payload {
        "its payload was trimmed, so there is nothing to run".to_string()
    } else if state.status == "done" {
        "it is already done; send \"force\": true to run it again".to_string()
    } else if state.status == "processing" {
        "an invocation holds its lease; try again after the lease ends".to_string()
    } else {
        format!("its status is {}", state.status)
    };
    RetentionError::ReplayRefused(format!("{key}: {why}"))
}

/// The processor's view of a stored delivery; `None` when its payload was trimmed.
pub fn delivery_of(stored: &StoredDelivery) -> Option<Delivery> {
    Some(Delivery {
        source: stored.source.clone(),
        delivery_id: stored.delivery_id.clone(),
        event_type: stored.event_type.clone(),
        payload: stored.payload.clone()?,
        headers: stored.headers.clone(),
        attempt: stored.attempt,
    })
}

fn log_redrive(stored: &StoredDelivery, settled: &Settled) {
    let (outcome, error) = match settled {
        Settled::Done => ("done", None),
        Settled::Failed { error, .. } => ("failed", Some(error.as_str())),
        Settled::Dead { error } => ("dead", Some(error.as_str())),
        Settled::Fenced => ("fenced", None),
    };
    tracing::info!(
        source = %stored.source,
        delivery_id = %stored.delivery_id,
        attempt = stored.attempt,
        outcome,
        error,
        "re-driven"
    );
}

fn owner_token() -> String {
    format!("retention-{:032x}", fastrand::u128(..))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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

    #[test]
    fn errors_map_to_lambda_diagnostics_with_their_kind() {
        let d: lambda_runtime::Diagnostic = RetentionError::BadCommand("x".into()).into();
        assert_eq!(d.error_type, "hookclaim.BadCommand");
        assert_eq!(d.error_message, "bad command: x");
        let cases = [
            (RetentionError::NotFound("a/b".into()), "hookclaim.NotFound"),
            (
                RetentionError::ReplayRefused("a/b".into()),
                "hookclaim.ReplayRefused",
            ),
            (
                RetentionError::Database(DbError::Timeout),
                "hookclaim.DatabaseUnavailable",
            ),
            (
                RetentionError::Database(DbError::Connect("refused".into())),
                "hookclaim.DatabaseUnavailable",
            ),
            (
                RetentionError::Database(DbError::Tls("bad CA".into())),
                "hookclaim.DatabaseError",
            ),
        ];
        for (e, want) in cases {
            let d: lambda_runtime::Diagnostic = e.into();
            assert_eq!(d.error_type, want);
        }
    }

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
        let v = report_line(&report, None, std::time::UNIX_EPOCH);
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
        };
        for _ in 0..MAX_DEAD_LISTED + 5 {
            report.record_dead(&stored, "boom".into());
        }
        assert_eq!(report.dead.len(), MAX_DEAD_LISTED);
        assert_eq!(report.dead_not_listed, 5);
        assert_eq!(report.redriven.dead, MAX_DEAD_LISTED as u64 + 5);
    }

    #[test]
    fn a_trimmed_delivery_has_no_processor_view() {
        let mut stored = StoredDelivery {
            source: "s".into(),
            delivery_id: "d".into(),
            attempt: 2,
            event_type: Some("t".into()),
            payload: None,
            headers: BTreeMap::from([("h".into(), "v".into())]),
            last_error: None,
        };
        assert!(delivery_of(&stored).is_none());
        stored.payload = Some(b"{}".to_vec());
        let d = delivery_of(&stored).unwrap();
        assert_eq!((d.attempt, d.payload.as_slice()), (2, &b"{}"[..]));
    }
}
