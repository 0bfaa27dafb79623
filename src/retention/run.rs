//! A run's phases and the operator commands that change rows: reclaim and re-drive, purge, trim,
//! replay and migrate, each in bounded steps that stop at the invocation's deadline.

use std::time::{Duration, Instant, SystemTime};

use super::{
    Backlog, BulkReplayReport, MigrateReport, PhaseError, ReplayReport, Report, Retention,
    RetentionError,
};
use crate::db::{classify, DbError};
use crate::invocation;
use crate::pipeline::{self, Happened, Outcome};
use crate::processor::Processor;
use crate::schema;
use crate::config::RetentionSettings;
use crate::ledger::{
    self, Attempt, Claimant, Finish, Ledger, ReclaimCursor, Reclaimed, ReplayCursor,
    ReplayFilter, StoredDelivery,
};

/// The error recorded on a reclaimed row whose payload was already trimmed.
pub const TRIMMED_PAYLOAD_ERROR: &str =
    "payload was trimmed before the delivery finished; it cannot be re-driven";

/// Time kept back from the deadline for reporting after the work has stopped.
const REPORT_RESERVE: Duration = Duration::from_millis(250);

/// Keys a bulk replay lists per page; each delivery on it is then claimed and run on its own.
const REPLAY_PAGE_SIZE: i64 = 100;

/// How old a finished row must be for a purge to delete it, by its key retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Horizons {
    /// Rows whose key goes with the payload.
    with_payload: Duration,
    /// Rows with long key retention.
    long_key_retention: Duration,
}

impl Horizons {
    /// A normal run's: `RETENTION_DAYS` and `KEY_RETENTION_DAYS`.
    pub(super) fn of(settings: &RetentionSettings) -> Self {
        Horizons {
            with_payload: settings.retention,
            long_key_retention: settings.key_retention,
        }
    }

    /// An operator's purge: every finished row older than `horizon`, kept keys included.
    pub(super) fn all(horizon: Duration) -> Self {
        Horizons {
            with_payload: horizon,
            long_key_retention: horizon,
        }
    }

    /// Each key retention (`long_key_retention` false, then true) with its horizon.
    fn each(self) -> [(bool, Duration); 2] {
        [(false, self.with_payload), (true, self.long_key_retention)]
    }
}

/// Where the work must stop: the deadline minus the margin, as a monotonic instant.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    deadline: SystemTime,
    stop_at: Instant,
}

impl Clock {
    pub(super) fn new(deadline: SystemTime, margin: Duration) -> Self {
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

    /// A clock for one phase that may use `num/den` of the time left, so a backlog in one phase
    /// cannot starve the phases after it; time a phase leaves unused goes to the next.
    fn share(&self, num: u32, den: u32) -> Clock {
        let left = self.stop_at.saturating_duration_since(Instant::now());
        Clock {
            deadline: self.deadline,
            stop_at: Instant::now() + left * num / den,
        }
    }

    /// Time until the invocation itself ends.
    fn until_deadline(&self) -> Duration {
        self.deadline
            .duration_since(SystemTime::now())
            .unwrap_or_default()
    }

    /// The deadline of one delivery claimed now: `bound` from now, or the invocation's own
    /// deadline if that comes first. The delivery's lease follows from it, not from the run's
    /// deadline, so a long run (a terminal's `--deadline-secs 86400`) that dies mid-delivery
    /// leaves that delivery reclaimable within `bound` plus the lease margin.
    fn for_delivery(&self, bound: Duration) -> SystemTime {
        self.deadline.min(SystemTime::now() + bound)
    }
}

impl<P: Processor> Retention<P> {
    /// A normal run: reclaim and re-drive, then purge, then trim, each until done or its share
    /// of the time runs out (a half of what is left, two thirds of what is then left, the
    /// rest); then count what is left. A phase that fails is reported and the others still run;
    /// the run then fails with the first phase's error.
    pub(super) async fn run(
        &self,
        ledger: &mut Ledger<'_>,
        clock: Clock,
        report: &mut Report,
    ) -> Result<(), RetentionError> {
        let mut failed = None;
        let reclaim = self.reclaim(ledger, clock.share(1, 2), report).await;
        let reclaimed_all = phase_ended(report, &mut failed, "reclaim", reclaim);
        let horizons = Horizons::of(&self.settings);
        let purge = self
            .purge(ledger, horizons, clock.share(2, 3), report)
            .await;
        let purged_all = phase_ended(report, &mut failed, "purge", purge);
        let trim = self.trim(ledger, clock, report).await;
        let trimmed_all = phase_ended(report, &mut failed, "trim", trim);
        report.stopped_early = !(reclaimed_all && purged_all && trimmed_all);
        report.remaining = self
            .remaining(ledger, clock, horizons, purged_all, trimmed_all)
            .await;
        report.waiting = self.waiting(ledger, clock).await;
        failed.map_or(Ok(()), Err)
    }

    /// How long the oldest expired lease and due retry have waited, for the run's metrics; like
    /// [`Self::remaining`], never allowed to outlive the invocation.
    async fn waiting(&self, ledger: &mut Ledger<'_>, clock: Clock) -> Option<ledger::Waiting> {
        let budget = clock.until_deadline().saturating_sub(REPORT_RESERVE);
        let waiting = ledger.waiting();
        match tokio::time::timeout(budget, waiting).await {
            Ok(Ok(waiting)) => Some(waiting),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not measure the waiting work");
                None
            }
            Err(_) => {
                ledger.session().discard();
                tracing::warn!("no time left to measure the waiting work");
                None
            }
        }
    }

    /// Replays every delivery `filter` selects, page by page in the order received, each claimed
    /// on its own (as the single replay does) so that a concurrent replay, a redelivery or the
    /// scheduled run never runs it twice; stops at the deadline. A dry run only counts.
    pub(super) async fn replay_all(
        &self,
        ledger: &mut Ledger<'_>,
        filter: &ReplayFilter<'_>,
        dry_run: bool,
        clock: Clock,
        report: &mut Report,
        bulk: &mut BulkReplayReport,
    ) -> Result<(), RetentionError> {
        (bulk.matched, bulk.unreplayable) = ledger.count_replayable(filter)
            .await?;
        if dry_run {
            bulk.remaining = Some(bulk.matched);
            return Ok(());
        }
        let owner = owner_token();
        let mut cursor = ReplayCursor::default();
        let mut progress = self.progress.phase("replay", Some(bulk.matched));
        let finished = 'pages: loop {
            let (ids, next) = ledger.replay_page(filter, &cursor, REPLAY_PAGE_SIZE)
                .await?;
            if ids.is_empty() {
                break true;
            }
            for id in &ids {
                if clock.expired() {
                    break 'pages false;
                }
                let deadline = clock.for_delivery(self.settings.redrive_timeout);
                let claimant = self.claimant(&owner, deadline);
                let taken = ledger.take_for_replay(filter.source, id, &claimant, false)
                    .await?;
                progress.advance(1);
                let Some(stored) = taken else {
                    bulk.skipped += 1;
                    continue;
                };
                report.reclaimed += 1;
                let outcome = self.redrive(ledger, &stored, &owner, deadline).await?;
                log_redrive(&stored, &outcome);
                report.record(&stored, &outcome);
            }
            cursor = next;
        };
        report.stopped_early = !finished;
        let budget = clock.until_deadline().saturating_sub(REPORT_RESERVE);
        let left = ledger.count_replayable(filter);
        bulk.remaining = match tokio::time::timeout(budget, left).await {
            Ok(Ok((left, _))) => Some(left),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not count the deliveries left to replay");
                None
            }
            Err(_) => {
                ledger.session().discard();
                tracing::warn!("no time left to count the deliveries left to replay");
                None
            }
        };
        Ok(())
    }

    /// Takes over expired leases and due retries one at a time and runs each through the
    /// pipeline. Returns whether it ran out of work (rather than time).
    ///
    /// The whole run claims under one owner token, in due order from a cursor, and takes only
    /// what was due when it started, so each delivery is attempted at most once per run.
    async fn reclaim(
        &self,
        ledger: &mut Ledger<'_>,
        clock: Clock,
        report: &mut Report,
    ) -> Result<bool, RetentionError> {
        let owner = owner_token();
        let mut cursor = ReclaimCursor::default();
        let total = if self.progress.is_on() {
            Some(ledger.count_reclaimable().await?)
        } else {
            None
        };
        let mut progress = self.progress.phase("reclaim", total);
        loop {
            if clock.expired() {
                return Ok(false);
            }
            let deadline = clock.for_delivery(self.settings.redrive_timeout);
            let claimant = self.claimant(&owner, deadline);
            let next = ledger.reclaim_next(&claimant, &cursor)
                .await?;
            let Some(Reclaimed { cursor: at, taken }) = next else {
                return Ok(true);
            };
            cursor = at;
            let Some(stored) = taken else {
                continue;
            };
            if stored.gave_up {
                // Not run again: its attempts kept dying before they could record anything.
                let error = stored.last_error.clone().unwrap_or_default();
                log_redrive(&stored, &Outcome::dead(stored.attempt, error.clone()));
                report.record_dead(&stored, error);
                progress.advance(1);
                continue;
            }
            report.reclaimed += 1;
            let outcome = self.redrive(ledger, &stored, &owner, deadline).await?;
            log_redrive(&stored, &outcome);
            report.record(&stored, &outcome);
            progress.advance(1);
        }
    }

    /// The claimant of one re-drive or replay: `owner`, leased until the delivery's `deadline`
    /// ([`Clock::for_delivery`]) plus the lease margin, as a webhook invocation is leased until
    /// its own deadline plus the margin.
    fn claimant<'a>(&self, owner: &'a str, deadline: SystemTime) -> Claimant<'a> {
        Claimant {
            owner,
            lease: invocation::remaining(deadline) + self.lease_margin,
            max_attempts: self.retry.max_attempts,
        }
    }

    /// Runs a claimed stored delivery through the pipeline, to be finished by `deadline`; one
    /// without its payload is marked dead, since there is nothing to run.
    async fn redrive(
        &self,
        ledger: &mut Ledger<'_>,
        stored: &StoredDelivery,
        owner: &str,
        deadline: SystemTime,
    ) -> Result<Outcome, DbError> {
        let Some(delivery) = pipeline::delivery_of(stored) else {
            let at = Attempt {
                source: &stored.source,
                delivery_id: &stored.delivery_id,
                attempt: stored.attempt,
                owner,
            };
            let finish = ledger.finish_dead(&at, TRIMMED_PAYLOAD_ERROR)
                .await?;
            return Ok(match finish {
                Finish::Applied => Outcome::dead(stored.attempt, TRIMMED_PAYLOAD_ERROR.into()),
                Finish::Fenced => Outcome::fenced(stored.attempt),
            });
        };
        pipeline::run_claimed(
            ledger,
            &self.processor,
            &delivery,
            owner,
            &self.retry,
            deadline,
        )
        .await
    }

    /// Deletes finished rows past their kind's horizon in batches, each kind in turn. Returns
    /// whether it ran out of work.
    pub(super) async fn purge(
        &self,
        ledger: &mut Ledger<'_>,
        horizons: Horizons,
        clock: Clock,
        report: &mut Report,
    ) -> Result<bool, RetentionError> {
        let total = if self.progress.is_on() {
            Some(self.count_purgeable(ledger, horizons).await?)
        } else {
            None
        };
        let mut progress = self.progress.phase("purge", total);
        for (long_key_retention, horizon) in horizons.each() {
            let mut batch = self.settings.batch_size;
            loop {
                if clock.expired() {
                    return Ok(false);
                }
                let purged = ledger.purge_batch(long_key_retention, horizon, batch)
                    .await;
                match purged {
                    Ok(n) => {
                        report.purged += n;
                        progress.advance(n);
                        if n < batch as u64 {
                            break;
                        }
                    }
                    Err(e) => batch = smaller_batch(batch, e, "purge")?,
                }
            }
        }
        Ok(true)
    }

    /// When a done row loses its payload, by its key retention: where the key goes with the
    /// row, after `TRIM_PAYLOAD_AFTER_DAYS` if set; with long key retention, after that or
    /// `RETENTION_DAYS`, whichever comes first.
    fn trim_horizons(&self) -> [(bool, Option<Duration>); 2] {
        let s = &self.settings;
        let long = s.trim_after.map_or(s.retention, |t| t.min(s.retention));
        [(false, s.trim_after), (true, Some(long))]
    }

    /// When a dead row with a long key retention loses its payload: its kind's payload
    /// retention, or `TRIM_DEAD_PAYLOAD_AFTER_DAYS` if that is sooner.
    fn dead_long_horizon(&self) -> Duration {
        let s = &self.settings;
        s.trim_dead_after
            .map_or(s.retention, |t| t.min(s.retention))
    }

    /// Drops the payloads that are past their horizon (see [`Self::trim_horizons`] and
    /// [`Self::dead_long_horizon`]) in batches. Returns whether it ran out of work.
    async fn trim(
        &self,
        ledger: &mut Ledger<'_>,
        clock: Clock,
        report: &mut Report,
    ) -> Result<bool, RetentionError> {
        for (long_key_retention, horizon) in self.trim_horizons() {
            if let Some(horizon) = horizon {
                let trimmed_all = self
                    .trim_done(ledger, long_key_retention, horizon, clock, report)
                    .await?;
                if !trimmed_all {
                    return Ok(false);
                }
            }
        }
        let mut batch = self.settings.batch_size;
        let long = self.dead_long_horizon();
        loop {
            if clock.expired() {
                return Ok(false);
            }
            let dead_after = self.settings.trim_dead_after;
            let trimmed = ledger.trim_dead_batch(dead_after, long, batch)
                .await;
            match trimmed {
                Ok(n) => {
                    report.trimmed += n;
                    if n < batch as u64 {
                        return Ok(true);
                    }
                }
                Err(e) => batch = smaller_batch(batch, e, "trim")?,
            }
        }
    }

    /// Drops the payloads of done rows with `long_key_retention` older than `horizon`, walking
    /// from where the last trim stopped. Returns whether it ran out of work.
    async fn trim_done(
        &self,
        ledger: &mut Ledger<'_>,
        long_key_retention: bool,
        horizon: Duration,
        clock: Clock,
        report: &mut Report,
    ) -> Result<bool, RetentionError> {
        let mut batch = self.settings.batch_size;
        let mut cursor = None;
        loop {
            if clock.expired() {
                return Ok(false);
            }
            let trimmed = ledger.trim_batch(long_key_retention, horizon, cursor, batch)
                .await;
            let trimmed = match trimmed {
                Ok(trimmed) => trimmed,
                Err(e) => {
                    batch = smaller_batch(batch, e, "trim")?;
                    continue;
                }
            };
            report.trimmed += trimmed.count;
            if trimmed.count < batch as u64 {
                return Ok(true);
            }
            cursor = trimmed.cursor;
        }
    }

    /// Counts what a run would find now (with `purge_after` as the purge horizon).
    pub(super) async fn backlog(
        &self,
        ledger: &mut Ledger<'_>,
        horizons: Horizons,
    ) -> Result<Backlog, DbError> {
        Ok(Backlog {
            reclaim: ledger.count_reclaimable()
                .await?,
            purge: self.count_purgeable(ledger, horizons).await?,
            trim: self.count_trimmable(ledger, horizons).await?,
        })
    }

    async fn count_purgeable(
        &self,
        ledger: &mut Ledger<'_>,
        horizons: Horizons,
    ) -> Result<u64, DbError> {
        let mut n = 0;
        for (long_key_retention, horizon) in horizons.each() {
            n += ledger.count_purgeable(long_key_retention, horizon)
                .await?;
        }
        Ok(n)
    }

    async fn count_trimmable(
        &self,
        ledger: &mut Ledger<'_>,
        horizons: Horizons,
    ) -> Result<u64, DbError> {
        let mut n = 0;
        let horizons = self.trim_horizons().into_iter().zip(horizons.each());
        for ((long_key_retention, trim_after), (_, purge_after)) in horizons {
            if let Some(trim_after) = trim_after {
                n += ledger.count_trimmable(long_key_retention, trim_after, purge_after)
                    .await?;
            }
        }
        let dead_after = self.settings.trim_dead_after;
        let long = self.dead_long_horizon();
        n += ledger.count_dead_trimmable(dead_after, long)
            .await?;
        Ok(n)
    }

    /// What is left after a run. A phase that ran out of work leaves nothing (rows a concurrent
    /// claim held are picked up next time) and is not counted again; a phase the clock stopped
    /// is counted. Counting must not outlive the invocation: if it cannot finish before the
    /// deadline, the report says `null` rather than losing the whole report to a timeout.
    pub(super) async fn remaining(
        &self,
        ledger: &mut Ledger<'_>,
        clock: Clock,
        horizons: Horizons,
        purge_finished: bool,
        trim_finished: bool,
    ) -> Option<Backlog> {
        let budget = clock.until_deadline().saturating_sub(REPORT_RESERVE);
        let count = async {
            let reclaim = ledger.count_reclaimable()
                .await?;
            let purge = match purge_finished {
                true => 0,
                false => self.count_purgeable(ledger, horizons).await?,
            };
            let trim = match trim_finished {
                true => 0,
                false => self.count_trimmable(ledger, horizons).await?,
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
                ledger.session().discard();
                tracing::warn!("no time left to count the remaining work");
                None
            }
        }
    }

    pub(super) async fn replay(
        &self,
        ledger: &mut Ledger<'_>,
        source: &str,
        delivery_id: &str,
        force: bool,
        clock: Clock,
        report: &mut Report,
    ) -> Result<(), RetentionError> {
        let owner = owner_token();
        let deadline = clock.for_delivery(self.settings.redrive_timeout);
        let claimant = self.claimant(&owner, deadline);
        let taken = ledger.take_for_replay(source, delivery_id, &claimant, force)
            .await?;
        let Some(stored) = taken else {
            let state = ledger.state(source, delivery_id)
                .await?;
            return Err(refusal(source, delivery_id, state));
        };
        report.reclaimed += 1;
        let outcome = self.redrive(ledger, &stored, &owner, deadline).await?;
        log_redrive(&stored, &outcome);
        report.record(&stored, &outcome);
        report.replay = Some(ReplayReport {
            outcome: outcome.name(),
            error: outcome.reason.clone(),
            retry_in_secs: match outcome.happened {
                Happened::Failed(retry_in) | Happened::Deferred(retry_in) => {
                    Some(retry_in.as_secs_f64())
                }
                _ => None,
            },
            source: stored.source,
            delivery_id: stored.delivery_id,
            attempt: stored.attempt,
        });
        Ok(())
    }

    pub(super) async fn migrate(
        &self,
        ledger: &mut Ledger<'_>,
        report: &mut Report,
    ) -> Result<(), RetentionError> {
        let applied = self.ready.migrate(ledger.session(), &self.processor).await?;
        let client = ledger.session().client().await?;
        let version = schema::current_version(&*client).await.map_err(classify)?;
        report.migrations = Some(MigrateReport { applied, version });
        Ok(())
    }
}


/// Whether a phase ran out of work; a failed one is listed in the report, and the first failure
/// kept for the run's result.
fn phase_ended(
    report: &mut Report,
    failed: &mut Option<RetentionError>,
    phase: &'static str,
    result: Result<bool, RetentionError>,
) -> bool {
    match result {
        Ok(finished) => finished,
        Err(e) => {
            tracing::error!(phase, error = %e, "retention phase failed; the others still run");
            report.phase_errors.push(PhaseError {
                phase,
                error: e.to_string(),
            });
            failed.get_or_insert(e);
            false
        }
    }
}

/// After a batch failed with `e`: half the batch when it ran out of time (a cold cache or a slow
/// disk can make the configured size too large for the statement timeout), else the error.
fn smaller_batch(batch: i64, e: DbError, phase: &'static str) -> Result<i64, RetentionError> {
    if !e.is_timeout() || batch <= 1 {
        return Err(e.into());
    }
    let smaller = batch / 2;
    tracing::warn!(phase, batch = smaller, error = %e, "batch ran out of time; trying a smaller one");
    Ok(smaller)
}

/// Why a replay could not take the delivery, from its current state.
fn refusal(source: &str, delivery_id: &str, state: Option<ledger::DeliveryState>) -> RetentionError {
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

fn log_redrive(stored: &StoredDelivery, outcome: &Outcome) {
    tracing::info!(
        source = %stored.source,
        delivery_id = %stored.delivery_id,
        attempt = stored.attempt,
        outcome = outcome.name(),
        error = outcome.reason.as_deref(),
        "re-driven"
    );
}

/// A retention run's owner token: marked as the retention function's in the row it holds.
fn owner_token() -> String {
    format!("retention-{}", ledger::owner_token())
}
