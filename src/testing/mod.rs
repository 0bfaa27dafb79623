//! A test harness for your own processor: runs it against a real PostgreSQL through the same
//! claim, transaction and fenced finish the webhook function uses, configured per source as the
//! function is, so a test proves the processor's effects happen once.
//!
//! - **Isolation.** Each [`Harness`] works in a schema of its own, created when it connects and
//!   dropped when it is dropped (or at [`Harness::cleanup`]): hookclaim's tables, and the
//!   tables your processor's [`Processor::setup`] creates, live there. Tests running in
//!   parallel on one database never see each other's rows, so they need no unique ids.
//! - **A clock the test moves.** [`Harness::advance`] moves the harness's time forward: a
//!   failed delivery is refused until its next attempt is due, then taken, a lease ends, a
//!   finished row ages past the retention horizons.
//! - **Both functions.** [`Harness::deliver`] runs a delivery built in memory as the webhook
//!   function runs a request that carries it (call it again for the sender's redelivery);
//!   [`Harness::webhook`] is the real [`Webhook`] over the same ledger, and, with the `testing`
//!   feature, [`Harness::request`] signs requests for it as each source's sender does;
//!   [`Harness::retention_pass`] runs the retention function's scheduled run and returns its
//!   [`Report`].
//! - **The row.** Each run answers the pipeline's [`Outcome`] (the value the webhook function
//!   answers from) and the delivery's ledger row as it stands after: status, attempt, last
//!   error, next attempt time.
//!
//! ```no_run
//! # use hookclaim::{Delivery, ProcessError, Processor, Work};
//! # struct Orders;
//! # impl Processor for Orders {
//! #     fn name(&self) -> &'static str { "orders" }
//! #     async fn process(&self, _: &Delivery, _: &mut Work<'_>) -> Result<(), ProcessError> { Ok(()) }
//! # }
//! use hookclaim::testing::{Happened, Harness};
//!
//! # async fn test() -> Result<(), Box<dyn std::error::Error>> {
//! let harness = Harness::builder(Orders)
//!     .sources(r#"{"stripe":{"kind":"stripe"}}"#)
//!     .connect("postgres://postgres@localhost/test")
//!     .await?;
//! let paid = Delivery::new("stripe", "evt_1", r#"{"type":"checkout.session.completed"}"#)
//!     .with_event_type("checkout.session.completed");
//! assert_eq!(harness.deliver(&paid).await?.outcome.happened, Happened::Done);
//! // The sender's redelivery:
//! assert_eq!(harness.deliver(&paid).await?.outcome.happened, Happened::Duplicate);
//! // Run again: still one effect?
//! assert_eq!(harness.redrive(&paid).await?.outcome.happened, Happened::Done);
//! // …then read your own tables, in the harness's schema.
//! let orders = harness.client().query("SELECT order_id FROM orders", &[]).await?;
//! # Ok(()) }
//! ```
//!
//! # The clock
//!
//! The ledger compares its stored times with the database's `now()`: a failed row is due once
//! its next attempt time has passed, a lease has ended once its end has, a finished row is
//! purged once its completion is older than the horizon. [`Harness::advance`] moves every time
//! stored in the harness's ledger (lease ends, next attempts, receipts, completions, updates,
//! payload trims, destination steps) back by the duration, which for every one of those
//! comparisons is the same as moving `now()` forward; nothing on the function's path reads
//! another clock. So the times a [`LedgerRow`] shows are on the real clock: a next attempt still
//! in the future is not due yet. Your processor's own tables are not moved.

#[cfg(feature = "testing")]
mod request;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sha2::{Digest as _, Sha256};
use tokio_postgres::types::Type;
use tokio_postgres::NoTls;

use crate::config::{Config, ConfigError, RetryPolicy, Source};
use crate::db::{Database, DbError};
use crate::environment::Environment;
use crate::error::StartupError;
pub use crate::ledger::Waiting;
use crate::ledger::{owner_token, Claimant, Ledger};
use crate::pipeline::{self, Keying};
pub use crate::pipeline::{Happened, Outcome};
use crate::processor::{Delivery, Processor};
use crate::readiness::Readiness;
pub use crate::retention::{Backlog, DeadDelivery, PhaseError, Redriven, Report};
use crate::retention::{Retention, RetentionError};
use crate::secret::SecretsDocument;
/// A key to sign with, for [`RequestBuilder::signing_key`]: hookclaim-verify's.
#[cfg(feature = "testing")]
pub use crate::verify::SigningKey;
use crate::verify::{IdOrigin, Scheme};
use crate::webhook::Webhook;
#[cfg(feature = "testing")]
pub use request::RequestBuilder;

/// How long a harness run may take, as an invocation's remaining time.
const RUN_TIME: Duration = Duration::from_secs(30);

/// The prefix of every harness schema's name.
const SCHEMA_PREFIX: &str = "hookclaim_test_";

/// Why the harness could not run a delivery (not the processor's failures: those are an
/// [`Outcome`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The database URL or a setting is not usable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database could not be reached or migrated, or a statement failed.
    #[error(transparent)]
    Database(#[from] DbError),
    /// The harness's own statement (its schema, its clock, a row read) failed.
    #[error("harness statement failed: {0}")]
    Statement(#[from] tokio_postgres::Error),
    /// The delivery's source is not configured (the webhook function answers 404).
    #[error("source {0:?} is not configured in HOOKCLAIM_SOURCES")]
    UnknownSource(String),
    /// The retention pass failed.
    #[error("retention pass failed: {0}")]
    Retention(String),
    /// A request could not be signed: no secret configured for its source, or one the
    /// source's scheme cannot sign with.
    #[error("cannot sign for source {name:?}: {problem}")]
    Sign {
        /// The source's name.
        name: String,
        /// What is missing or wrong.
        problem: String,
    },
}

impl From<StartupError> for HarnessError {
    fn from(e: StartupError) -> Self {
        match e {
            StartupError::Config(e) => HarnessError::Config(e),
            StartupError::Database(e) => HarnessError::Database(e),
            // The harness's database comes from its URL alone: no secret, no processor made.
            other => HarnessError::Config(ConfigError {
                setting: "DATABASE_URL",
                problem: other.to_string(),
            }),
        }
    }
}

impl From<RetentionError> for HarnessError {
    fn from(e: RetentionError) -> Self {
        match e {
            RetentionError::Database(e) => HarnessError::Database(e),
            other => HarnessError::Retention(other.to_string()),
        }
    }
}

/// A delivery's state in the ledger, as its row's `status` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Held by an attempt under a lease.
    Processing,
    /// Failed, due again at its next attempt time.
    Failed,
    /// Processed; a redelivery is a duplicate.
    Done,
    /// Given up on; kept for an operator's replay.
    Dead,
}

impl Status {
    fn parse(status: &str) -> Self {
        match status {
            "processing" => Status::Processing,
            "failed" => Status::Failed,
            "done" => Status::Done,
            // The row's CHECK allows no other value.
            _ => Status::Dead,
        }
    }
}

/// One delivery's ledger row, read after a run. Its times are on the real clock (see the
/// module's documentation): a `next_attempt_at` still in the future is not due.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LedgerRow {
    /// Where the delivery stands.
    pub status: Status,
    /// Its attempt number: 1 at the first claim, one more at each takeover.
    pub attempt: i32,
    /// The error its last failed attempt recorded.
    pub last_error: Option<String>,
    /// When a failed delivery is due again.
    pub next_attempt_at: Option<SystemTime>,
    /// When the lease of a delivery being processed ends.
    pub lease_until: Option<SystemTime>,
    /// When it was done or made dead.
    pub completed_at: Option<SystemTime>,
    /// When it was first stored.
    pub received_at: SystemTime,
    /// Whether its payload is still stored (a trim drops it).
    pub payload_kept: bool,
    /// Its event type, where known.
    pub event_type: Option<String>,
}

/// What one run of a delivery came to: the pipeline's outcome and the row it left.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivered {
    /// What happened, as the webhook function answers from it.
    pub outcome: Outcome,
    /// The delivery's row after the run (`None` only if there is none: a replay-guarded body
    /// answered from another delivery's row).
    pub row: Option<LedgerRow>,
}

/// How a harness is set up: the function's settings, by the names it reads them under.
/// Made by [`Harness::builder`]; [`HarnessBuilder::connect`] makes the harness.
pub struct HarnessBuilder<P> {
    processor: P,
    settings: BTreeMap<String, String>,
}

impl<P: Processor> HarnessBuilder<P> {
    /// The sources, as `HOOKCLAIM_SOURCES` gives them to the function (a JSON object of source
    /// name to settings: `{"stripe":{"kind":"stripe"}}`). Each source's kind decides, as in
    /// the function, where its delivery id comes from, whether its bodies are replay-guarded
    /// and how long its keys are kept. Required.
    pub fn sources(self, sources: &str) -> Self {
        self.setting("HOOKCLAIM_SOURCES", sources)
    }

    /// The webhook secrets, as `HOOKCLAIM_SECRETS` gives them (`{"stripe":"whsec_…"}`): what
    /// [`Harness::webhook`] verifies with and the `testing` feature's requests are signed
    /// with. None by default: the webhook then answers 401.
    pub fn secrets(self, secrets: &str) -> Self {
        self.setting("HOOKCLAIM_SECRETS", secrets)
    }

    /// Any other setting the functions read, by its environment variable's name
    /// (`MAX_ATTEMPTS`, `RETRY_BASE_SECS`, `RETENTION_DAYS`, `LEASE_MARGIN_SECS`…). The database
    /// settings are the harness's own: its URL and schema.
    pub fn setting(mut self, name: &str, value: &str) -> Self {
        self.settings.insert(name.to_owned(), value.to_owned());
        self
    }

    /// Connects to `database_url` (a test database the harness may create a schema in; no
    /// TLS), creates the harness's schema, applies hookclaim's migrations there, and runs the
    /// processor's [`Processor::start`] and [`Processor::setup`] (whose tables land in the
    /// schema too). The harness's sessions are given the schema as their `search_path` through
    /// the URL's `options`, which replaces any the URL has.
    pub async fn connect(self, database_url: &str) -> Result<Harness<P>, HarnessError> {
        let HarnessBuilder {
            processor,
            mut settings,
        } = self;
        let schema = format!("{SCHEMA_PREFIX}{:016x}", fastrand::u64(..));
        let url = with_search_path(database_url, &schema);
        settings.insert("DATABASE_URL".into(), url.clone());
        settings
            .entry("DATABASE_TLS".into())
            .or_insert_with(|| "disable".into());
        settings
            .entry("HOOKCLAIM_SECRETS".into())
            .or_insert_with(|| "{}".into());
        let config = Config::from_lookup(|name| settings.get(name).cloned())?;
        let pg: tokio_postgres::Config = url.parse().map_err(|e| ConfigError {
            setting: "DATABASE_URL",
            problem: format!("{e}"),
        })?;
        let client = connect_plain(&pg).await?;
        // The search path already names the schema: the statement creates what it names.
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await?;
        // From here on, a failure drops the schema again.
        let schema_guard = SchemaGuard {
            pg: pg.clone(),
            schema: schema.clone(),
            armed: true,
        };

        let processor = Arc::new(processor);
        let environment = Environment::new();
        processor.start().await;
        let db = environment.database(&config).await?;
        Readiness::default()
            .ensure(Ledger::open(&db).await.session(), &processor)
            .await?;
        let keys = environment.keys(&config)?;
        let webhook_db = environment.database(&config).await?;
        let webhook = Webhook::new(&config, keys, webhook_db, Arc::clone(&processor), None);
        let retention_db = environment.database(&config).await?;
        let retention = Retention::with_parts(&config, retention_db, Arc::clone(&processor));
        let document = settings
            .get("HOOKCLAIM_SECRETS")
            .map_or("{}", String::as_str);
        let secrets = SecretsDocument::parse(document).map_err(|e| ConfigError {
            setting: "HOOKCLAIM_SECRETS",
            problem: e.to_string(),
        })?;
        Ok(Harness {
            retry: config.retry,
            config,
            processor,
            db,
            webhook,
            retention,
            client,
            secrets,
            schema: schema_guard,
        })
    }
}

/// A processor, an isolated ledger, and the webhook and retention functions' ways of running
/// one on the other. Made by [`Harness::builder`]; drops its schema when dropped.
pub struct Harness<P> {
    config: Config,
    processor: Arc<P>,
    retry: RetryPolicy,
    /// The connection [`Harness::deliver`] runs on, as one webhook environment's.
    db: Database,
    webhook: Webhook<Arc<P>>,
    retention: Retention<Arc<P>>,
    /// The harness's own statements, and the test's reads.
    client: tokio_postgres::Client,
    /// The secrets document, which requests are signed from.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    secrets: SecretsDocument,
    schema: SchemaGuard,
}

impl<P: Processor> Harness<P> {
    /// A harness for `processor`, to be configured and connected.
    pub fn builder(processor: P) -> HarnessBuilder<P> {
        HarnessBuilder {
            processor,
            settings: BTreeMap::new(),
        }
    }

    /// Delivers `delivery` as the webhook function does a verified request that carries it,
    /// keyed as its source's kind says: the claim decides (a new delivery, or a failed one that
    /// is due, runs; a done one is a duplicate; a replay-guarded body under a new id is a
    /// duplicate of the delivery that brought it), then the processor runs and its work commits
    /// with "done", or the failure is recorded. Call it again with the same delivery for the
    /// sender's redelivery.
    pub async fn deliver(&self, delivery: &Delivery) -> Result<Delivered, HarnessError> {
        let source = self.source(&delivery.source)?;
        let keying = Keying {
            id_origin: id_origin(&source.scheme, delivery),
            long_key_retention: source.long_key_retention,
            replay_guard: source.replay_guard,
        };
        let mut ledger = Ledger::open(&self.db).await;
        let owner = owner_token();
        let claimant = Claimant {
            owner: &owner,
            lease: RUN_TIME + self.config.lease_margin,
            max_attempts: self.retry.max_attempts,
        };
        let deadline = SystemTime::now() + RUN_TIME;
        let outcome = pipeline::claim_and_run(
            &mut ledger,
            &*self.processor,
            delivery.clone(),
            keying,
            &claimant,
            &self.retry,
            deadline,
        )
        .await?;
        drop(ledger);
        let row = self.row(&delivery.source, &delivery.delivery_id).await?;
        Ok(Delivered { outcome, row })
    }

    /// Runs `delivery` again as the retention function's re-drive does, as the next attempt,
    /// whatever its row says: even after a run that was done, which a real re-drive never
    /// repeats. It is the run that follows an attempt whose work succeeded but whose finish was
    /// lost (work at another service, a step recorded, a crash before "done"), so a processor
    /// that passes it has effects that stand any repeat. To see the retention function take a
    /// failed delivery when it is due, [`advance`](Self::advance) the clock and run
    /// [`retention_pass`](Self::retention_pass).
    pub async fn redrive(&self, delivery: &Delivery) -> Result<Delivered, HarnessError> {
        Ledger::open(&self.db)
            .await
            .make_due(&delivery.source, &delivery.delivery_id)
            .await?;
        self.deliver(delivery).await
    }

    /// Runs the retention function's scheduled run on the harness's ledger, in process: the
    /// same reclaim and re-drive of expired leases and due retries, purge and trim that the
    /// deployed function runs, with the processor under test; returns its report.
    pub async fn retention_pass(&self) -> Result<Report, HarnessError> {
        let deadline = SystemTime::now() + RUN_TIME;
        Ok(self
            .retention
            .handle(serde_json::json!({}), deadline)
            .await?)
    }

    /// Moves the harness's clock forward by `by`: every time stored in its ledger moves back by
    /// as much, so leases end, retries fall due and finished rows age as they would have after
    /// `by` (see the module's documentation).
    pub async fn advance(&self, by: Duration) -> Result<(), HarnessError> {
        self.client
            .execute_typed(
                include_str!("sql/advance.sql"),
                &[(&by.as_secs_f64(), Type::FLOAT8)],
            )
            .await?;
        Ok(())
    }

    /// Delivery `source`/`delivery_id`'s ledger row, if there is one.
    pub async fn row(
        &self,
        source: &str,
        delivery_id: &str,
    ) -> Result<Option<LedgerRow>, HarnessError> {
        let row = self
            .client
            .query_typed_opt(
                include_str!("sql/row.sql"),
                &[(&source, Type::TEXT), (&delivery_id, Type::TEXT)],
            )
            .await?;
        Ok(row.map(|r| LedgerRow {
            status: Status::parse(r.get("status")),
            attempt: r.get("attempt"),
            last_error: r.get("last_error"),
            next_attempt_at: r.get("next_attempt_at"),
            lease_until: r.get("lease_until"),
            completed_at: r.get("completed_at"),
            received_at: r.get("received_at"),
            payload_kept: r.get("payload_kept"),
            event_type: r.get("event_type"),
        }))
    }

    /// The webhook function as a value over the harness's ledger, with the harness's sources,
    /// secrets and processor: [`Webhook::handle`] answers a request as the deployed function
    /// does (status, body, `Retry-After`).
    pub fn webhook(&self) -> &Webhook<Arc<P>> {
        &self.webhook
    }

    /// A connection on the harness's schema (its search path), for the test's own reads and
    /// writes: the processor's tables are there.
    pub fn client(&self) -> &tokio_postgres::Client {
        &self.client
    }

    /// The name of the harness's schema.
    pub fn schema(&self) -> &str {
        &self.schema.schema
    }

    /// The processor under test.
    pub fn processor(&self) -> &P {
        &self.processor
    }

    /// Drops the harness's schema and everything in it now, reporting a failure; dropping the
    /// harness does the same, reporting a failure on stderr.
    pub async fn cleanup(mut self) -> Result<(), HarnessError> {
        self.schema.armed = false;
        self.client
            .batch_execute(&drop_schema(&self.schema.schema))
            .await?;
        Ok(())
    }

    /// The configured source `name`.
    fn source(&self, name: &str) -> Result<&Source, HarnessError> {
        self.config
            .sources
            .get(name)
            .ok_or_else(|| HarnessError::UnknownSource(name.to_owned()))
    }
}

/// Where a delivery built in memory has its id from, as a request of its source's kind would
/// record it: the body's hash when the id is that hash (a sender that sends no id), else where
/// the source's scheme reads ids.
fn id_origin(scheme: &Scheme, delivery: &Delivery) -> IdOrigin {
    if delivery.delivery_id == hex::encode(Sha256::digest(&delivery.payload)) {
        return IdOrigin::BodySha256;
    }
    let location = match scheme {
        Scheme::Stripe { .. } => return IdOrigin::Body,
        Scheme::Hmac(s) => &s.id,
        Scheme::Signed(s) => &s.id,
        Scheme::Ed25519(s) => &s.id,
        Scheme::Token(s) => &s.id,
        Scheme::Twilio(s) => &s.id,
        _ => return IdOrigin::Header,
    };
    if location.is_in_body() {
        IdOrigin::Body
    } else {
        IdOrigin::Header
    }
}

/// `url` with its sessions' search path set to `schema` alone, so that hookclaim's unqualified
/// tables and functions, and the processor's, are made and found there.
fn with_search_path(url: &str, schema: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}options=-c%20search_path%3D{schema}")
    } else {
        format!("{url} options='-c search_path={schema}'")
    }
}

/// A connection of the harness's own, its driver spawned.
async fn connect_plain(
    pg: &tokio_postgres::Config,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = pg.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "harness connection ended");
        }
    });
    Ok(client)
}

fn drop_schema(schema: &str) -> String {
    format!("DROP SCHEMA IF EXISTS {schema} CASCADE")
}

/// Drops the harness's schema when the harness goes, unless [`Harness::cleanup`] did.
struct SchemaGuard {
    pg: tokio_postgres::Config,
    schema: String,
    armed: bool,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // A drop cannot wait on the test's runtime: a thread with a runtime of its own does
        // the work, on a connection of its own, and is waited for.
        let mut pg = self.pg.clone();
        // Never wait long for a lock: a connection still in a transaction on the schema would
        // hold the drop forever.
        pg.options("-c lock_timeout=5000");
        let sql = drop_schema(&self.schema);
        let done = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let client = connect_plain(&pg).await.map_err(|e| e.to_string())?;
                client.batch_execute(&sql).await.map_err(|e| e.to_string())
            })
        })
        .join();
        let failed = match done {
            Ok(result) => result.err(),
            Err(_) => Some("the cleanup thread panicked".to_owned()),
        };
        if let Some(e) = failed {
            eprintln!(
                "hookclaim::testing: could not drop schema {}: {e}",
                self.schema
            );
        }
    }
}
