//! The retention function: re-drives deliveries whose processing died or failed, purges finished
//! rows past their retention, trims old payloads, and answers operators' commands.
//!
//! A scheduled run (any payload without a `"command"` key: the EventBridge "Scheduled Event", or
//! the Scheduler's `{}`) works in three phases, each in bounded steps that stop at the
//! invocation's deadline minus a margin: reclaim and re-drive, purge, trim. What is left is
//! reported and picked up by the next run. Operators invoke the function directly with a JSON
//! command (see [`Command`] and `events/retention-*.json`).


mod command;
mod progress;
mod report;
mod run;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use lambda_runtime::{Diagnostic, LambdaEvent, Service};

use serde_json::Value;

pub use command::{parse_command, payload_from_args, Command};
pub use progress::Progress;
pub use report::{
    report_line, Backlog, BulkReplayReport, DeadDelivery, MigrateReport, PhaseError, Redriven,
    ReplayReport, Report,
};
#[cfg(feature = "internals")]
pub use {
    command::{Timestamp, MAX_OLDER_THAN_DAYS, MIN_PURGE_DAYS},
    report::MAX_DEAD_LISTED,
    run::TRIMMED_PAYLOAD_ERROR,
};

use crate::config::{Config, RetentionSettings, RetryPolicy};
use run::Horizons;
use crate::db::{Database, DbError};
use crate::environment::Environment;
use crate::error::StartupError;
use crate::observe::Telemetry;
use crate::processor::Processor;
use crate::readiness::Readiness;
use crate::ledger::{Ledger, ReplayFilter};
use run::Clock;

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
            RetentionError::Database(DbError::SchemaBehind { .. }) => "hookclaim.SchemaBehind",
            RetentionError::Database(DbError::ServerTooOld { .. }) => "hookclaim.ServerTooOld",
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

/// The retention function as a value: everything one execution environment needs to run
/// retention, built once at cold start, and [`Retention::invoke`] to answer one invocation
/// (a scheduled run or an operator's command). A [`tower::Service`](lambda_runtime::Service)
/// by reference, for `lambda_runtime::run(&retention)`; [`crate::run_retention`] is that, and
/// the same commands from a terminal.
pub struct Retention<P> {
    db: Database,
    processor: P,
    settings: RetentionSettings,
    retry: RetryPolicy,
    lease_margin: Duration,
    ready: Readiness,
    telemetry: Telemetry,
    progress: Progress,
}

impl<P: Processor> Retention<P> {
    /// The retention function's cold start as [`crate::run_retention`] makes it, with the
    /// configuration from the environment: the database (migrated now if it can be). A bad
    /// setting is an error that names it. `processor` must be the webhook function's. Installs
    /// no logging.
    pub async fn from_env(processor: P) -> Result<Self, StartupError> {
        let config =
            Config::from_env().inspect_err(|e| tracing::error!(error = %e, "bad configuration"))?;
        Self::from_config(&config, processor).await
    }

    /// The same from `config`.
    pub async fn from_config(config: &Config, processor: P) -> Result<Self, StartupError> {
        Self::assemble(config, processor)
            .await
            .inspect_err(|e| tracing::error!(error = %e, "cold start failed"))
    }

    /// Builds the environment's database and the state from it. Tries to connect, bring the
    /// schema up to date and run the processor's setup now (as the owner, when its login is
    /// configured); if the database is not reachable yet, that is logged and left to the first
    /// invocation.
    async fn assemble(config: &Config, processor: P) -> Result<Self, StartupError> {
        let environment = Environment::new();
        let db = environment.database(config).await?;
        let owner = environment.owner(config).await?;
        processor.start().await;
        let retention = Self::with_parts(config, db, processor).with_owner(owner);
        if let Err(e) = retention.ensure_ready().await {
            tracing::warn!(error = %e, "database not ready at cold start; will retry on first invocation");
        }
        Ok(retention)
    }

    /// Answers one invocation within its deadline: the report as JSON, or the error as Lambda
    /// reports it (`errorType` `hookclaim.BadCommand`, `hookclaim.DatabaseUnavailable`…).
    pub async fn invoke(&self, event: LambdaEvent<Value>) -> Result<Value, Diagnostic> {
        let deadline = crate::invocation::deadline(Some(&event.context));
        let report = self.handle(event.payload, deadline).await?;
        serde_json::to_value(report).map_err(|e| Diagnostic {
            error_type: "hookclaim.Report".into(),
            error_message: e.to_string(),
        })
    }

    /// Builds the state from its parts.
    #[doc(hidden)]
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
            telemetry: Telemetry::default(),
            progress: Progress::Off,
        }
    }

    /// Builds the state from the configuration.
    pub(crate) fn with_parts(config: &Config, db: Database, processor: P) -> Self {
        let mut retention = Self::new(
            db,
            processor,
            config.retention,
            config.retry,
            config.lease_margin,
        );
        retention.ready = Readiness::new(config.database.migrate);
        retention.telemetry = Telemetry::new(&config.metrics_namespace);
        retention
    }

    #[doc(hidden)]
    /// Writes the report's line as `telemetry` says (on stderr for a command run from a
    /// terminal, in memory for tests).
    pub fn with_telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = telemetry;
        self
    }

    #[doc(hidden)]
    /// The same, applying the migrations and the processor's setup (at cold start and with the
    /// `migrate` command) as the schema owner's `owner` database when it is `Some`; everything
    /// else runs on the application role's.
    pub fn with_owner(mut self, owner: Option<Database>) -> Self {
        self.ready = self.ready.with_owner(owner);
        self
    }

    /// The same, showing a long command's progress on stderr (`Progress::Off` in Lambda).
    pub(crate) fn with_progress(mut self, progress: Progress) -> Self {
        self.progress = progress;
        self
    }

    #[cfg(feature = "internals")]
    /// The environment's database, for tools and tests.
    pub fn database(&self) -> &Database {
        &self.db
    }

    #[doc(hidden)]
    /// Connects, brings the schema up to date and runs the processor's setup, as the webhook
    /// function does. Done once per environment; until it succeeds, every invocation tries it.
    pub async fn ensure_ready(&self) -> Result<(), DbError> {
        let mut ledger = Ledger::open(&self.db).await;
        self.ready.ensure(ledger.session(), &self.processor).await
    }

    #[doc(hidden)]
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
        self.telemetry.emit(&report_line(
            &report,
            result.as_ref().err(),
            self.telemetry.namespace(),
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
        let mut ledger = Ledger::open(&self.db).await;
        // `migrate` applies the schema itself and reports what it applied.
        if !matches!(command, Command::Migrate {}) {
            self.ready.ensure(ledger.session(), &self.processor).await?;
        }
        match command {
            Command::Migrate {} => self.migrate(&mut ledger, report).await,
            Command::Run {} => self.run(&mut ledger, clock, report).await,
            Command::DryRun {} => {
                let horizons = Horizons::of(&self.settings);
                report.would = Some(self.backlog(&mut ledger, horizons).await?);
                Ok(())
            }
            Command::Purge {
                older_than_days, ..
            } => {
                let horizon = Duration::from_secs(u64::from(*older_than_days) * 86_400);
                let horizons = Horizons::all(horizon);
                let finished = self.purge(&mut ledger, horizons, clock, report).await?;
                report.stopped_early = !finished;
                report.remaining = self
                    .remaining(&mut ledger, clock, horizons, finished, true)
                    .await;
                Ok(())
            }
            Command::Replay {
                source,
                delivery_id,
                force,
            } => {
                self.replay(&mut ledger, source, delivery_id, *force, clock, report)
                    .await
            }
            Command::ReplayAll {
                source,
                event_type,
                received_after,
                received_before,
                dry_run,
            } => {
                let filter = ReplayFilter {
                    source,
                    event_type: event_type.as_deref(),
                    received_after: received_after.as_ref().map(|t| t.at),
                    received_before: received_before.as_ref().map(|t| t.at),
                };
                let mut bulk = BulkReplayReport {
                    source: source.clone(),
                    event_type: event_type.clone(),
                    received_after: received_after.as_ref().map(|t| t.text.clone()),
                    received_before: received_before.as_ref().map(|t| t.text.clone()),
                    dry_run: *dry_run,
                    matched: 0,
                    unreplayable: 0,
                    skipped: 0,
                    remaining: None,
                };
                let result = self
                    .replay_all(&mut ledger, &filter, *dry_run, clock, report, &mut bulk)
                    .await;
                // Reported even when the database failed part-way: what was replayed stays.
                report.bulk_replay = Some(bulk);
                result
            }
            Command::Stats {} => {
                let stats = ledger.stats().await?;
                report.stats = Some(stats);
                Ok(())
            }
        }
    }
}

/// One invocation, answered by [`Retention::invoke`].
impl<'a, P: Processor> Service<LambdaEvent<Value>> for &'a Retention<P> {
    type Response = Value;
    type Error = Diagnostic;
    type Future = Pin<Box<dyn Future<Output = Result<Value, Diagnostic>> + Send + 'a>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Diagnostic>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, event: LambdaEvent<Value>) -> Self::Future {
        let retention = *self;
        Box::pin(async move { retention.invoke(event).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
