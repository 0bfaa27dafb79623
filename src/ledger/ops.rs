//! The ledger as the functions use it: one method per operation on the environment's
//! connection, each under the statement deadline with its one reconnect
//! ([`Session::run`]), so no caller writes the retry or names a connection.

use std::time::{Duration, SystemTime};

use tokio_postgres::types::Type;

use super::{
    claim, finish, purge, reclaim, replay, stats, Again, Attempt, Claim, Claimant, DeliveryState, Finish,
    LedgerStats, NewDelivery, ReclaimCursor, Reclaimed, ReplayCursor, ReplayFilter, Recorded, StoredDelivery, Trimmed, Waiting,
};
use crate::db::{Database, DbError, Session};

/// The environment's connection, lent to one invocation, with the ledger's operations on it.
pub struct Ledger<'a> {
    session: Session<'a>,
}

impl<'a> Ledger<'a> {
    /// Borrows `db`'s connection for one invocation (waiting for another one's to end).
    pub async fn open(db: &'a Database) -> Self {
        Ledger {
            session: db.session().await,
        }
    }

    /// The connection itself: for the processing transaction, the migrations, and a reconnect
    /// after a failure part-way through a transaction.
    pub fn session(&mut self) -> &mut Session<'a> {
        &mut self.session
    }

    /// Claims `new` for `claimant` ([`claim::claim`]).
    pub async fn claim(
        &mut self,
        new: &NewDelivery<'_>,
        claimant: &Claimant<'_>,
        store_only: bool,
    ) -> Result<Claim, DbError> {
        self.session
            .run(|c, _| Box::pin(claim::claim(c, new, claimant, store_only)))
            .await
    }

    /// The stored delivery `at` holds ([`claim::held`]).
    pub async fn held(&mut self, at: &Attempt<'_>) -> Result<Option<StoredDelivery>, DbError> {
        self.session
            .run(|c, _| Box::pin(claim::held(c, at)))
            .await
    }

    /// Records the failed attempt `at` as `again` says: due again, or dead when out of attempts
    /// or past its age bound ([`finish::finish_again`]). `None` when fenced.
    pub async fn finish_again(
        &mut self,
        at: &Attempt<'_>,
        error: &str,
        again: Again,
    ) -> Result<Option<Recorded>, DbError> {
        self.session
            .run(|c, _| Box::pin(finish::finish_again(c, at, error, again)))
            .await
    }

    /// Records `at` dead, unless fenced.
    pub async fn finish_dead(&mut self, at: &Attempt<'_>, error: &str) -> Result<Finish, DbError> {
        self.session
            .run(|c, _| Box::pin(finish::finish_dead(c, at, error)))
            .await
    }

    /// Looks at the next expired lease or due retry after `after` and takes it over
    /// ([`reclaim::reclaim_next`]).
    pub async fn reclaim_next(
        &mut self,
        claimant: &Claimant<'_>,
        after: &ReclaimCursor,
    ) -> Result<Option<Reclaimed>, DbError> {
        self.session
            .run(|c, _| Box::pin(reclaim::reclaim_next(c, claimant, after)))
            .await
    }

    /// How many rows a reclaim could take over now.
    pub async fn count_reclaimable(&mut self) -> Result<u64, DbError> {
        self.session
            .run(|c, _| Box::pin(reclaim::count_reclaimable(c)))
            .await
    }

    /// Takes one delivery for an operator's replay ([`replay::take_for_replay`]).
    pub async fn take_for_replay(
        &mut self,
        source: &str,
        delivery_id: &str,
        claimant: &Claimant<'_>,
        force: bool,
    ) -> Result<Option<StoredDelivery>, DbError> {
        self.session
            .run(|c, _| {
                Box::pin(replay::take_for_replay(
                    c,
                    source,
                    delivery_id,
                    claimant,
                    force,
                ))
            })
            .await
    }

    /// The next page of a bulk replay's keys ([`replay::replay_page`]).
    pub async fn replay_page(
        &mut self,
        filter: &ReplayFilter<'_>,
        cursor: &ReplayCursor,
        limit: i64,
    ) -> Result<(Vec<String>, ReplayCursor), DbError> {
        self.session
            .run(|c, _| Box::pin(replay::replay_page(c, filter, cursor, limit)))
            .await
    }

    /// How many deliveries a bulk replay matches, and how many of them cannot be replayed.
    pub async fn count_replayable(
        &mut self,
        filter: &ReplayFilter<'_>,
    ) -> Result<(u64, u64), DbError> {
        self.session
            .run(|c, _| Box::pin(replay::count_replayable(c, filter)))
            .await
    }

    /// Deletes one batch of finished rows past `older_than` ([`purge::purge_batch`]).
    pub async fn purge_batch(
        &mut self,
        long_key_retention: bool,
        older_than: Duration,
        limit: i64,
    ) -> Result<u64, DbError> {
        self.session
            .run(|c, _| {
                Box::pin(purge::purge_batch(c, long_key_retention, older_than, limit))
            })
            .await
    }

    /// How many finished rows a purge would delete.
    pub async fn count_purgeable(
        &mut self,
        long_key_retention: bool,
        older_than: Duration,
    ) -> Result<u64, DbError> {
        self.session
            .run(|c, _| Box::pin(purge::count_purgeable(c, long_key_retention, older_than)))
            .await
    }

    /// Drops the payloads of one batch of old `done` rows ([`purge::trim_batch`]).
    pub async fn trim_batch(
        &mut self,
        long_key_retention: bool,
        older_than: Duration,
        cursor: Option<SystemTime>,
        limit: i64,
    ) -> Result<Trimmed, DbError> {
        self.session
            .run(|c, _| {
                Box::pin(purge::trim_batch(
                    c,
                    long_key_retention,
                    older_than,
                    cursor,
                    limit,
                ))
            })
            .await
    }

    /// How many `done` rows a trim would drop the payload of.
    pub async fn count_trimmable(
        &mut self,
        long_key_retention: bool,
        older_than: Duration,
        purge_after: Duration,
    ) -> Result<u64, DbError> {
        self.session
            .run(|c, _| {
                Box::pin(purge::count_trimmable(
                    c,
                    long_key_retention,
                    older_than,
                    purge_after,
                ))
            })
            .await
    }

    /// Drops the payloads of one batch of old `dead` rows ([`purge::trim_dead_batch`]).
    pub async fn trim_dead_batch(
        &mut self,
        older_than: Option<Duration>,
        long_key_after: Duration,
        limit: i64,
    ) -> Result<u64, DbError> {
        self.session
            .run(|c, _| {
                Box::pin(purge::trim_dead_batch(c, older_than, long_key_after, limit))
            })
            .await
    }

    /// How many `dead` rows a dead trim would drop the payload of.
    pub async fn count_dead_trimmable(
        &mut self,
        older_than: Option<Duration>,
        long_key_after: Duration,
    ) -> Result<u64, DbError> {
        self.session
            .run(|c, _| Box::pin(purge::count_dead_trimmable(c, older_than, long_key_after)))
            .await
    }

    /// One delivery's state, for an operator's replay that was refused.
    pub async fn state(
        &mut self,
        source: &str,
        delivery_id: &str,
    ) -> Result<Option<DeliveryState>, DbError> {
        self.session
            .run(|c, _| Box::pin(stats::state(c, source, delivery_id)))
            .await
    }

    /// Counts by source and status, and the oldest waiting rows.
    pub async fn stats(&mut self) -> Result<LedgerStats, DbError> {
        self.session.run(|c, _| Box::pin(stats::stats(c))).await
    }

    /// How long the oldest expired lease and due retry have waited.
    pub async fn waiting(&mut self) -> Result<Waiting, DbError> {
        self.session.run(|c, _| Box::pin(stats::waiting(c))).await
    }

    /// Makes one delivery failed and due now, whatever its state: the test harness's re-drive,
    /// which runs a delivery again as if its finish had been lost.
    pub async fn make_due(&mut self, source: &str, delivery_id: &str) -> Result<u64, DbError> {
        self.session
            .run(|c, _| {
                Box::pin(async move {
                    c.execute_typed(
                        include_str!("make_due.sql"),
                        &[(&source, Type::TEXT), (&delivery_id, Type::TEXT)],
                    )
                    .await
                })
            })
            .await
    }
}
