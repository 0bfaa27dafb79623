//! Scale-out behind a transaction pooler: the webhook and retention functions through PgBouncer
//! in `pool_mode = transaction`, with 64 simulated execution environments sharing 4 server
//! connections.
//!
//! Proves: every delivery answered, the exactly-once effect kept while the pooler's server
//! connections are terminated mid-run, no named prepared statement on the server, concurrent
//! cold starts migrating an empty database once through the pooler, the retention run's reclaim
//! and purge through it, the startup-options problem and what pooled mode does instead, and a
//! statement stuck past the client deadline cancelled on the server. Measures deliveries per
//! second through the pooler against direct connections (printed; run with `--nocapture` and
//! look for `[pooler]` lines).
//!
//! The tests start their own PostgreSQL (statement logging needs the server log) and their own
//! PgBouncer per test; they take turns, so the throughput figures are not disturbed by the
//! other tests of this binary.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::support::licences::Licences;
use hookclaim::db::DbError;
use hookclaim::processor::{Processor, StoreOnly};
use hookclaim::webhook::Webhook;
use serde_json::json;
use support::ledger::licence_count;
use support::pgbouncer::{server_cpu_time, PgBouncer, PoolerSettings};
use support::{answer, count, github_request, Format, PgServer};
use tokio_postgres::Client;

/// Simulated execution environments (each with its one connection).
const ENVIRONMENTS: usize = 64;
/// Server connections the pooler keeps per database.
const POOL_SIZE: u32 = 4;
/// Marks the tests' own direct connections, which the fault injection leaves alone.
const ADMIN_APP: &str = "pooler-test-admin";

/// The tests of this binary run one at a time (see the module comment).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------------
// Harness: a private server, a fresh database per test, environments over a URL.

static SERVER: Mutex<Option<Arc<PgServer>>> = Mutex::new(None);

extern "C" {
    fn atexit(cb: extern "C" fn()) -> std::os::raw::c_int;
}

extern "C" fn stop_server() {
    // Dropping the last reference stops the server and removes its directory.
    if let Ok(mut s) = SERVER.lock() {
        s.take();
    }
}

/// This binary's PostgreSQL: the statement log lines carry the database name, so a test can read
/// what its own database ran.
fn server() -> Arc<PgServer> {
    let mut slot = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = slot.as_ref() {
        return s.clone();
    }
    let started = Arc::new(PgServer::start_with(&["log_line_prefix = '%m [%p] %d '"]));
    // The test harness exits through exit(), which runs atexit handlers.
    unsafe {
        atexit(stop_server);
    }
    *slot = Some(started.clone());
    started
}

/// A fresh database on [`server`].
struct Db {
    server: Arc<PgServer>,
    name: String,
}

impl Db {
    async fn empty() -> Db {
        let server = tokio::task::spawn_blocking(server).await.expect("harness");
        let name = format!("p_{:016x}", fastrand::u64(..));
        support::connect(&server.url("postgres"))
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create test database");
        Db { server, name }
    }

    async fn migrated() -> Db {
        let db = Self::empty().await;
        let mut c = support::connect(&db.direct_url()).await;
        let tx = c.transaction().await.expect("begin");
        hookclaim::schema::migrate_in(&tx).await.expect("migrate");
        Licences.setup(&tx).await.expect("licence table");
        tx.commit().await.expect("commit");
        db
    }

    fn direct_url(&self) -> String {
        self.server.url(&self.name)
    }

    /// A direct connection for the test's own checks, marked so fault injection spares it.
    async fn admin(&self) -> Client {
        support::connect(&format!(
            "{}?application_name={ADMIN_APP}",
            self.direct_url()
        ))
        .await
    }

    fn pooler(&self, settings: PoolerSettings) -> PgBouncer {
        PgBouncer::start(self.server.port, settings)
    }
}

/// Settings every environment in these tests uses behind the pooler: pooled mode, a failed
/// attempt due again at once, a short lease margin so a lost claim is retaken within seconds.
/// `DATABASE_POOLED=true` is what the template's RDS Proxy option sets, together with
/// `DATABASE_HOST`/`DATABASE_PORT` at the proxy, which here is PgBouncer: each environment's URL
/// names it (scripts/check-template.py checks both sides of this).
const POOLED: &[(&str, &str)] = &[
    ("DATABASE_POOLED", "true"),
    ("RETRY_BASE_SECS", "0"),
    ("LEASE_MARGIN_SECS", "1"),
];

const DIRECT: &[(&str, &str)] = &[("RETRY_BASE_SECS", "0"), ("LEASE_MARGIN_SECS", "1")];

/// `n` execution environments over `url`, cold-started one after another.
async fn environments<P: Processor + Copy>(
    url: &str,
    overrides: &[(&str, &str)],
    processor: P,
    n: usize,
) -> Vec<Arc<Webhook<P>>> {
    let mut envs = Vec::with_capacity(n);
    for _ in 0..n {
        envs.push(Arc::new(support::webhook(url, overrides, processor).await));
    }
    envs
}

/// A GitHub delivery of an order event, with a Lambda deadline 10 s away (so a lease lost to a
/// fault is retaken within seconds, not the default minute).
fn delivery(id: &str, order: &str) -> lambda_http::Request {
    let body = json!({"order_id": order, "action": "paid"}).to_string();
    support::with_deadline(
        github_request(Format::HttpApiV2, id, body.as_bytes(), false),
        Duration::from_secs(10),
    )
}

/// (status, outcome) of one answer.
type Outcome = (u16, String);

/// Runs each environment's share of `work` (delivery id, order) one at a time, as Lambda sends
/// an environment one invocation at a time, all environments at once. Returns the answers in
/// `work`'s order.
async fn drive<P: Processor>(
    envs: &[Arc<Webhook<P>>],
    work: &[(String, String)],
) -> Vec<(String, Outcome)> {
    let mut tasks = Vec::new();
    for (e, env) in envs.iter().enumerate() {
        let mine: Vec<(usize, String, String)> = work
            .iter()
            .enumerate()
            .filter(|(i, _)| i % envs.len() == e)
            .map(|(i, (id, order))| (i, id.clone(), order.clone()))
            .collect();
        let env = env.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(mine.len());
            for (i, id, order) in mine {
                let (status, json) = answer(&env.handle(delivery(&id, &order)).await);
                let outcome = json["status"].as_str().unwrap_or("?").to_string();
                out.push((i, id, (status, outcome)));
            }
            out
        }));
    }
    let mut all = Vec::with_capacity(work.len());
    for t in tasks {
        all.extend(t.await.expect("worker"));
    }
    all.sort_by_key(|(i, _, _)| *i);
    all.into_iter().map(|(_, id, o)| (id, o)).collect()
}

fn tally(answers: &[(String, Outcome)]) -> BTreeMap<Outcome, usize> {
    let mut t = BTreeMap::new();
    for (_, o) in answers {
        *t.entry(o.clone()).or_insert(0) += 1;
    }
    t
}

fn outcome(status: u16, name: &str) -> Outcome {
    (status, name.to_string())
}

/// Client backends on `db` other than the tests' own: behind the pooler, its server connections.
const APP_BACKENDS: &str = "SELECT count(*) FROM pg_stat_activity
  WHERE datname = current_database() AND backend_type = 'client backend'
    AND application_name <> 'pooler-test-admin'";

/// Samples [`APP_BACKENDS`] until stopped; the largest count seen.
fn sample_backends(c: Arc<Client>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<i64> {
    tokio::spawn(async move {
        let mut max = 0;
        while !stop.load(Ordering::Relaxed) {
            if let Ok(row) = c.query_one(APP_BACKENDS, &[]).await {
                max = max.max(row.get::<_, i64>(0));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        max
    })
}

/// What the server's statement log says `db` ran: (statements, named prepared statements). A
/// named statement shows as `execute <name>:` (the unnamed one as `execute <unnamed>:`); SQL-level
/// PREPARE/EXECUTE as such statements.
fn statement_log(server: &PgServer, db: &str) -> (usize, Vec<String>) {
    let marker = format!("] {db} LOG:  ");
    let mut statements = 0;
    let mut named = Vec::new();
    for line in server.log().lines() {
        let Some(at) = line.find(&marker) else {
            continue;
        };
        let entry = &line[at + marker.len()..];
        if let Some(rest) = entry.strip_prefix("execute ") {
            statements += 1;
            if !rest.starts_with("<unnamed>:") {
                named.push(entry.to_string());
            }
        } else if let Some(sql) = entry.strip_prefix("statement: ") {
            statements += 1;
            let head = sql.trim_start().to_ascii_uppercase();
            if head.starts_with("PREPARE") || head.starts_with("EXECUTE") {
                named.push(entry.to_string());
            }
        }
    }
    (statements, named)
}

// ---------------------------------------------------------------------------------------------
// The webhook path.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_environments_over_four_server_connections_issue_exactly_one_licence_per_order_through_server_resets(
) {
    let _turn = SERIAL.lock().await;
    let db = Db::migrated().await;
    // Opened before logging is switched on: the tests' own statements stay out of the log.
    let admin = Arc::new(db.admin().await);
    // Every statement the pooled run sends is logged (sessions opened from now on), so the named
    // ones can be counted.
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {} SET log_statement = 'all'",
            db.name
        ))
        .await
        .unwrap();
    let bouncer = db.pooler(PoolerSettings::transaction(POOL_SIZE));
    // Exactly what the template's proxy option sets: DATABASE_HOST and DATABASE_PORT at the
    // pooler (winning over the host and port of the login) and DATABASE_POOLED=true. The URL
    // names the server itself, so a setting that did not win would bypass the pooler.
    let port = bouncer.port.to_string();
    let mut proxy = vec![
        ("DATABASE_HOST", "127.0.0.1"),
        ("DATABASE_PORT", port.as_str()),
    ];
    proxy.extend_from_slice(POOLED);
    let envs = environments(&db.direct_url(), &proxy, Licences, ENVIRONMENTS).await;
    let server_side = support::count(
        &admin,
        &format!(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = '{}' AND backend_type = 'client backend'
                AND application_name <> 'pooler-test-admin'",
            db.name
        ),
    )
    .await;
    assert!(
        server_side <= POOL_SIZE as i64,
        "{server_side} server connections for {ENVIRONMENTS} environments: they bypassed the pooler"
    );

    // 256 orders, each delivered three times (the sender's retries), shuffled so copies of one
    // order race each other in different environments.
    const ORDERS: usize = 256;
    let mut work: Vec<(String, String)> = (0..ORDERS)
        .flat_map(|k| (0..3).map(move |_| (format!("gh-{k}"), format!("order-{k}"))))
        .collect();
    fastrand::shuffle(&mut work);

    // Mid-run, the server connections the pooler holds are terminated, round after round.
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicU64::new(0));
    let killer = tokio::spawn({
        let (admin, stop, killed) = (admin.clone(), stop.clone(), killed.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) && rounds < 8 {
                let n: i64 = admin
                    .query_one(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                          WHERE datname = current_database() AND backend_type = 'client backend'
                            AND application_name <> 'pooler-test-admin'",
                        &[],
                    )
                    .await
                    .map(|r| r.get(0))
                    .unwrap_or(0);
                killed.fetch_add(n as u64, Ordering::Relaxed);
                rounds += 1;
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            rounds
        }
    });
    let started = Instant::now();
    let answers = drive(&envs, &work).await;
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let rounds = killer.await.unwrap();
    let killed = killed.load(Ordering::Relaxed);

    let outcomes = tally(&answers);
    println!(
        "[pooler] {} deliveries of {ORDERS} orders from {ENVIRONMENTS} environments over \
         {POOL_SIZE} server connections in {:.2} s; {killed} server connections terminated in \
         {rounds} rounds; answers {outcomes:?}",
        work.len(),
        elapsed.as_secs_f64()
    );
    assert!(killed > 0, "the fault injection must have hit something");
    let normal = [
        outcome(200, "processed"),
        outcome(200, "duplicate"),
        outcome(202, "in_progress"),
    ];
    let disturbed: usize = outcomes
        .iter()
        .filter(|(o, _)| !normal.contains(o))
        .map(|(o, n)| {
            assert!(
                [
                    outcome(503, "failed"),
                    outcome(503, "retry_later"),
                    outcome(503, "unavailable")
                ]
                .contains(o),
                "unexpected answer {o:?}"
            );
            *n
        })
        .sum();
    // A terminated server connection can cost at most the one transaction running on it; the
    // claim itself is retried on a new connection.
    assert!(
        disturbed as u64 <= killed,
        "{disturbed} deliveries answered 503 for {killed} terminated connections"
    );

    // The senders keep redelivering what was not acknowledged: every order ends processed once.
    let mut pending: BTreeSet<usize> = (0..ORDERS).collect();
    let end = Instant::now() + Duration::from_secs(40);
    while !pending.is_empty() && Instant::now() < end {
        let round: Vec<(String, String)> = pending
            .iter()
            .map(|k| (format!("gh-{k}"), format!("order-{k}")))
            .collect();
        for (id, (status, _)) in drive(&envs, &round).await {
            if status == 200 {
                let k: usize = id.trim_start_matches("gh-").parse().unwrap();
                pending.remove(&k);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(pending.is_empty(), "orders never acknowledged: {pending:?}");

    assert_eq!(
        licence_count(&admin).await,
        ORDERS as i64,
        "exactly one licence per order"
    );
    assert_eq!(
        count(
            &admin,
            "SELECT count(*) FROM hookclaim_deliveries WHERE status = 'done'"
        )
        .await,
        ORDERS as i64
    );
    assert_eq!(
        count(&admin, "SELECT count(*) FROM hookclaim_deliveries").await,
        ORDERS as i64
    );

    // No named prepared statement reached the server, and none was missing.
    let (statements, named) = statement_log(&db.server, &db.name);
    println!(
        "[pooler] server statement log for the pooled run: {statements} statements, {} named \
         prepared statements",
        named.len()
    );
    assert!(
        statements > work.len(),
        "the statement log must have seen the run"
    );
    assert!(named.is_empty(), "named prepared statements: {named:#?}");
    let log = db.server.log();
    assert!(
        !log.lines()
            .any(|l| l.contains(&db.name) && l.contains("prepared statement")),
        "prepared-statement errors in the server log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_cold_starts_through_the_pooler_migrate_an_empty_database_exactly_once() {
    let _turn = SERIAL.lock().await;
    let db = Db::empty().await;
    let bouncer = db.pooler(PoolerSettings::transaction(POOL_SIZE));
    let url = bouncer.url(&db.name);

    // 64 environments start at once on a database hookclaim has never seen: each runs the
    // migrations and the licence table's setup, serialised by a transaction-level advisory lock,
    // which a transaction pooler carries because it ends with the transaction.
    let barrier = Arc::new(tokio::sync::Barrier::new(ENVIRONMENTS));
    let mut starts = Vec::new();
    for _ in 0..ENVIRONMENTS {
        let (url, barrier) = (url.clone(), barrier.clone());
        starts.push(tokio::spawn(async move {
            barrier.wait().await;
            support::webhook(&url, POOLED, Licences).await
        }));
    }
    let mut envs = Vec::new();
    for s in starts {
        envs.push(Arc::new(s.await.expect("cold start")));
    }

    let work: Vec<(String, String)> = (0..ENVIRONMENTS)
        .map(|k| (format!("cold-{k}"), format!("cold-order-{k}")))
        .collect();
    let answers = drive(&envs, &work).await;
    assert!(
        answers.iter().all(|(_, o)| *o == outcome(200, "processed")),
        "{:?}",
        tally(&answers)
    );

    let admin = db.admin().await;
    let versions: Vec<i32> = admin
        .query(
            "SELECT version FROM hookclaim_schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let expected: Vec<i32> = hookclaim::schema::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(versions, expected, "each migration applied once");
    assert_eq!(licence_count(&admin).await, ENVIRONMENTS as i64);
    for env in &envs {
        assert_eq!(
            env.database().connect_count(),
            1,
            "one connection per environment"
        );
    }
    println!(
        "[pooler] {ENVIRONMENTS} concurrent cold starts through {POOL_SIZE} server connections \
         migrated an empty database to version {}",
        hookclaim::schema::latest_version()
    );
}

// ---------------------------------------------------------------------------------------------
// The retention path.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_runs_through_the_pooler_redrive_each_stale_delivery_once_and_purge_in_batches() {
    let _turn = SERIAL.lock().await;
    let db = Db::migrated().await;
    let admin = db.admin().await;
    // Left behind by environments that died (expired leases) or failed (due retries), with
    // payloads the licence example can run; and old finished rows past the retention.
    admin
        .batch_execute(
            "INSERT INTO hookclaim_deliveries
                 (source, delivery_id, status, attempt, lease_owner, lease_until, next_attempt_at,
                  payload, payload_sha256, completed_at)
             SELECT 'github', 'stale-' || i,
                    CASE WHEN i % 4 = 0 THEN 'failed' ELSE 'processing' END, 1, 'dead-env',
                    CASE WHEN i % 4 = 0 THEN NULL ELSE now() - interval '1 minute' END,
                    CASE WHEN i % 4 = 0 THEN now() - interval '1 second' END,
                    convert_to('{\"order_id\":\"stale-order-' || i || '\"}', 'UTF8'),
                    sha256(convert_to('stale-' || i, 'UTF8')), NULL
               FROM generate_series(1, 200) AS i;
             INSERT INTO hookclaim_deliveries
                 (source, delivery_id, status, payload, payload_sha256, received_at,
                  completed_at)
             SELECT 'github', 'old-' || i, 'done', convert_to('{}', 'UTF8'),
                    sha256(convert_to('old-' || i, 'UTF8')),
                    now() - interval '40 days', now() - interval '40 days'
               FROM generate_series(1, 2000) AS i;",
        )
        .await
        .unwrap();
    let bouncer = db.pooler(PoolerSettings::transaction(POOL_SIZE));
    let url = bouncer.url(&db.name);

    // Four retention environments run at once, with 60 webhook environments taking new
    // deliveries through the same four server connections.
    let mut overrides = POOLED.to_vec();
    overrides.push(("PURGE_BATCH_SIZE", "100"));
    let mut runs = Vec::new();
    for _ in 0..4 {
        let r = support::retention(&url, &overrides, Licences).await;
        runs.push(tokio::spawn(async move {
            r.handle(json!({}), SystemTime::now() + Duration::from_secs(60))
                .await
                .expect("retention run")
        }));
    }
    let envs = environments(&url, POOLED, Licences, ENVIRONMENTS - 4).await;
    let work: Vec<(String, String)> = (0..300)
        .map(|k| (format!("live-{k}"), format!("live-order-{k}")))
        .collect();
    let answers = drive(&envs, &work).await;
    let mut reports = Vec::new();
    for r in runs {
        reports.push(r.await.unwrap());
    }

    assert!(
        answers.iter().all(|(_, o)| *o == outcome(200, "processed")),
        "{:?}",
        tally(&answers)
    );
    let reclaimed: u64 = reports.iter().map(|r| r.reclaimed).sum();
    let redriven_ok: u64 = reports.iter().map(|r| r.redriven.ok).sum();
    let purged: u64 = reports.iter().map(|r| r.purged).sum();
    println!(
        "[pooler] 4 retention runs beside 60 webhook environments over {POOL_SIZE} server \
         connections: reclaimed {reclaimed}, re-driven ok {redriven_ok}, purged {purged}, \
         per run {:?}",
        reports
            .iter()
            .map(|r| (r.reclaimed, r.purged, r.elapsed_ms))
            .collect::<Vec<_>>()
    );
    assert_eq!(reclaimed, 200, "each stale delivery reclaimed by one run");
    assert_eq!(redriven_ok, 200);
    assert_eq!(purged, 2000);
    assert_eq!(
        count(
            &admin,
            "SELECT count(*) FROM hookclaim_example_licences WHERE order_id LIKE 'stale-order-%'"
        )
        .await,
        200,
        "one licence per re-driven order"
    );
    assert_eq!(
        count(
            &admin,
            "SELECT count(*) FROM hookclaim_example_licences WHERE order_id LIKE 'live-order-%'"
        )
        .await,
        300
    );
    assert_eq!(
        count(
            &admin,
            "SELECT count(*) FROM hookclaim_deliveries WHERE status <> 'done'"
        )
        .await,
        0
    );
    assert!(reports.iter().all(|r| !r.stopped_early));
}

// ---------------------------------------------------------------------------------------------
// Startup options, server-side timeouts and the client deadline behind a pooler.

/// Reads one setting over an environment's connection, as the product's statements run.
async fn show(db: &hookclaim::db::Database, setting: &'static str) -> Result<String, DbError> {
    let mut session = db.session().await;
    session
        .run(|c, _| {
            Box::pin(async move {
                let row = c
                    .query_typed_one(&format!("SELECT current_setting('{setting}')"), &[])
                    .await?;
                Ok(row.get::<_, String>(0))
            })
        })
        .await
}

#[tokio::test]
async fn the_pooler_refuses_startup_options_so_pooled_mode_sends_none() {
    let _turn = SERIAL.lock().await;
    let db = Db::migrated().await;
    let bouncer = db.pooler(PoolerSettings::transaction(POOL_SIZE));
    let url = bouncer.url(&db.name);

    // A direct-mode environment sends the server-side timeouts as startup options: PgBouncer
    // refuses the connection, and the error names the setting that fixes it.
    let direct_mode = support::config(&url, &[]);
    let database = hookclaim::environment::database(&direct_mode)
        .await
        .unwrap();
    let err = show(&database, "statement_timeout")
        .await
        .expect_err("PgBouncer refuses startup options");
    let message = err.to_string();
    assert!(
        message.contains("unsupported startup parameter: options")
            && message.contains("DATABASE_POOLED=true"),
        "{message}"
    );
    let refused = support::webhook(&url, &[], StoreOnly).await;
    let (status, _) = answer(&refused.handle(delivery("opt-1", "o-1")).await);
    assert_eq!(status, 503, "every delivery would be refused");

    // Pooled mode sends none and works.
    let pooled = support::webhook(&url, POOLED, StoreOnly).await;
    let (status, json) = answer(&pooled.handle(delivery("opt-1", "o-1")).await);
    assert_eq!((status, json["status"].as_str()), (200, Some("processed")));

    // Told to ignore the parameter, PgBouncer accepts it and drops it: the connection works but
    // the server-side timeout silently does not apply. That is why pooled mode does not rely on
    // startup options at all.
    let mut ignoring = PoolerSettings::transaction(POOL_SIZE);
    ignoring.ignore_startup_parameters = vec!["options"];
    let lenient = db.pooler(ignoring);
    let dropped = hookclaim::environment::database(&support::config(&lenient.url(&db.name), &[]))
        .await
        .unwrap();
    let direct = hookclaim::environment::database(&support::config(&db.direct_url(), &[]))
        .await
        .unwrap();
    assert_eq!(show(&direct, "statement_timeout").await.unwrap(), "5s");
    assert_eq!(show(&dropped, "statement_timeout").await.unwrap(), "0");
}

#[tokio::test]
async fn pooled_mode_takes_its_server_side_timeouts_from_the_role() {
    let _turn = SERIAL.lock().await;
    let db = Db::migrated().await;
    let admin = db.admin().await;
    // What docs/scaling.md tells operators to run for pooled mode (scoped to this database here, so
    // the other tests' databases are untouched). Every server connection the pooler opens logs
    // in with these.
    admin
        .batch_execute(&format!(
            "ALTER ROLE postgres IN DATABASE {0} SET statement_timeout = '750ms';
             ALTER ROLE postgres IN DATABASE {0} SET idle_in_transaction_session_timeout = '3s'",
            db.name
        ))
        .await
        .unwrap();
    let bouncer = db.pooler(PoolerSettings::transaction(POOL_SIZE));
    let mut overrides = POOLED.to_vec();
    overrides.push(("DATABASE_STATEMENT_TIMEOUT_MS", "5000"));
    let config = support::config(&bouncer.url(&db.name), &overrides);
    let database = hookclaim::environment::database(&config).await.unwrap();

    assert_eq!(show(&database, "statement_timeout").await.unwrap(), "750ms");
    assert_eq!(
        show(&database, "idle_in_transaction_session_timeout")
            .await
            .unwrap(),
        "3s"
    );
    // A runaway statement is ended by the server, well before the client's 5.5 s deadline.
    let started = Instant::now();
    let mut session = database.session().await;
    let err = session
        .run(|c, _| Box::pin(async move { c.batch_execute("SELECT pg_sleep(10)").await }))
        .await
        .expect_err("the server's statement timeout ends it");
    assert!(
        matches!(&err, DbError::Query(e) if e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED)),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_stuck_past_the_client_deadline_is_cancelled_on_the_server_behind_the_pooler() {
    let _turn = SERIAL.lock().await;
    let db = Db::migrated().await;
    let mut admin = db.admin().await;
    // No server-side timeout (a role nobody configured): only the client deadline (1 s + 500 ms
    // slack) bounds a statement. Not shorter: every statement of this test runs under it, and on
    // a loaded 2-core machine a fresh server connection's first statements can take a while.
    let bouncer = db.pooler(PoolerSettings::transaction(POOL_SIZE));
    let mut overrides = POOLED.to_vec();
    overrides.push(("DATABASE_STATEMENT_TIMEOUT_MS", "1000"));
    let hook = support::webhook(&bouncer.url(&db.name), &overrides, StoreOnly).await;
    let (status, json) = answer(&hook.handle(delivery("locked", "o")).await);
    assert_eq!(status, 200, "first delivery: {json}\n{}", bouncer.log());

    // Something else holds a lock that a new delivery's claim needs: a non-concurrent CREATE
    // INDEX takes this table lock, which the claim's INSERT conflicts with. A duplicate of a done
    // row only reads, so it is still answered; the new delivery's claim waits.
    let tx = admin.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE hookclaim_deliveries IN SHARE MODE")
        .await
        .unwrap();
    let (status, json) = answer(&hook.handle(delivery("locked", "o")).await);
    assert_eq!(
        (status, json["status"].as_str()),
        (200, Some("duplicate")),
        "duplicate under the lock: {json}\n{}",
        bouncer.log()
    );
    let started = Instant::now();
    let (status, json) = answer(&hook.handle(delivery("stuck", "o3")).await);
    let waited = started.elapsed();
    assert_eq!(
        (status, json["status"].as_str()),
        (503, Some("unavailable")),
        "claim stuck on the lock, after {waited:?}: {json}\n{}",
        bouncer.log()
    );

    // The claims the client gave up on were cancelled on the server, not left waiting on the
    // lock with a server connection (and, once the pooler drops it, a backend) each.
    let waiting = "SELECT count(*) FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'
        AND application_name <> 'pooler-test-admin'";
    let check = db.admin().await;
    let cleared = support::eventually(Duration::from_secs(5), async || {
        count(&check, waiting).await == 0
    })
    .await;
    println!(
        "[pooler] claim stuck on a lock answered 503 after {:.2} s; server-side waiters \
         cleared: {cleared}",
        waited.as_secs_f64()
    );
    assert!(
        cleared,
        "statements abandoned by the client still wait on the server: {:#?}\n{}",
        check
            .query(
                "SELECT pid, state, wait_event_type, left(query, 60) FROM pg_stat_activity
                  WHERE datname = current_database()",
                &[]
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (
                r.get::<_, i32>(0),
                r.get::<_, Option<String>>(1),
                r.get::<_, Option<String>>(2),
                r.get::<_, Option<String>>(3)
            ))
            .collect::<Vec<_>>(),
        bouncer.log()
    );
    tx.rollback().await.unwrap();

    // Once the lock is gone the sender's retry is claimed: nothing of the cancelled try stayed.
    let (status, json) = answer(&hook.handle(delivery("stuck", "o3")).await);
    assert_eq!(
        (status, json["status"].as_str()),
        (200, Some("processed")),
        "the retry once the lock is gone: {json}\n{}",
        bouncer.log()
    );
    let (status, json) = answer(&hook.handle(delivery("after", "o2")).await);
    assert_eq!(
        status,
        200,
        "a new delivery after it: {json}\n{}",
        bouncer.log()
    );
}

// ---------------------------------------------------------------------------------------------
// Throughput.

/// One measured run.
struct Measured {
    deliveries: usize,
    secs: f64,
    max_server_connections: i64,
    db_cpu: Duration,
    pooler_cpu: Duration,
    client_cpu: Duration,
}

impl Measured {
    fn per_sec(&self) -> f64 {
        self.deliveries as f64 / self.secs
    }

    fn ms_each(d: Duration, n: usize) -> f64 {
        d.as_secs_f64() * 1000.0 / n as f64
    }
}

async fn postmaster_pid(c: &Client) -> u32 {
    let dir: String = c
        .query_one("SELECT current_setting('data_directory')", &[])
        .await
        .unwrap()
        .get(0);
    let pid = std::fs::read_to_string(format!("{dir}/postmaster.pid")).expect("postmaster.pid");
    pid.lines().next().unwrap().trim().parse().unwrap()
}

/// Sends `work` through `envs`, timing it and watching the server connections and CPU.
async fn measure<P: Processor>(
    envs: &[Arc<Webhook<P>>],
    work: &[(String, String)],
    admin: &Arc<Client>,
    bouncer: Option<&PgBouncer>,
    expect: &Outcome,
) -> Measured {
    let postmaster = postmaster_pid(admin).await;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_backends(admin.clone(), stop.clone());
    let pooler_cpu = || {
        bouncer
            .and_then(|b| support::pgbouncer::cpu_time(b.pid()))
            .unwrap_or_default()
    };
    let client_cpu = || support::pgbouncer::cpu_time(std::process::id()).unwrap_or_default();
    let before = (server_cpu_time(postmaster), pooler_cpu(), client_cpu());
    let started = Instant::now();
    let answers = drive(envs, work).await;
    let secs = started.elapsed().as_secs_f64();
    let after = (server_cpu_time(postmaster), pooler_cpu(), client_cpu());
    stop.store(true, Ordering::Relaxed);
    let max_server_connections = sampler.await.unwrap();
    assert!(
        answers.iter().all(|(_, o)| o == expect),
        "{:?}",
        tally(&answers)
    );
    Measured {
        deliveries: work.len(),
        secs,
        max_server_connections,
        db_cpu: after.0.saturating_sub(before.0),
        pooler_cpu: after.1.saturating_sub(before.1),
        client_cpu: after.2.saturating_sub(before.2),
    }
}

/// [`measure`]s `work` sent as new deliveries, then the same again as duplicates.
async fn new_then_duplicate<P: Processor>(
    envs: &[Arc<Webhook<P>>],
    work: &[(String, String)],
    admin: &Arc<Client>,
    bouncer: Option<&PgBouncer>,
) -> [Measured; 2] {
    let new = measure(envs, work, admin, bouncer, &outcome(200, "processed")).await;
    let dup = measure(envs, work, admin, bouncer, &outcome(200, "duplicate")).await;
    [new, dup]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_per_second_through_the_pooler_and_direct_with_the_same_sixty_four_environments()
{
    let _turn = SERIAL.lock().await;
    const PER_ENV: usize = 16;
    let work: Vec<(String, String)> = (0..ENVIRONMENTS * PER_ENV)
        .map(|k| (format!("tp-{k}"), format!("tp-order-{k}")))
        .collect();
    println!(
        "[pooler] throughput: DEBUG build (a ratio, not a capacity figure), client and server \
         sharing this machine's {} cores; {ENVIRONMENTS} environments, {} deliveries each way",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        work.len()
    );
    println!(
        "[pooler] {:<7} {:<8} {:<10} {:>8} {:>9} {:>12} {:>14} {:>15} {:>18}",
        "path",
        "proc",
        "kind",
        "secs",
        "per_sec",
        "server_conns",
        "db_cpu_ms_each",
        "pgb_cpu_ms_each",
        "client_cpu_ms_each"
    );
    let mut rates: BTreeMap<(&str, &str, &str), f64> = BTreeMap::new();
    for processor in ["licence", "store"] {
        for path in ["direct", "pooled"] {
            let db = Db::migrated().await;
            let admin = Arc::new(db.admin().await);
            let bouncer =
                (path == "pooled").then(|| db.pooler(PoolerSettings::transaction(POOL_SIZE)));
            let (url, overrides) = match &bouncer {
                Some(b) => (b.url(&db.name), POOLED),
                None => (db.direct_url(), DIRECT),
            };
            let runs = match processor {
                "licence" => {
                    let envs = environments(&url, overrides, Licences, ENVIRONMENTS).await;
                    let runs = new_then_duplicate(&envs, &work, &admin, bouncer.as_ref()).await;
                    assert_eq!(licence_count(&admin).await, work.len() as i64);
                    runs
                }
                _ => {
                    let envs = environments(&url, overrides, StoreOnly, ENVIRONMENTS).await;
                    new_then_duplicate(&envs, &work, &admin, bouncer.as_ref()).await
                }
            };
            for (kind, m) in ["new", "duplicate"].into_iter().zip(runs) {
                println!(
                    "[pooler] {path:<7} {processor:<8} {kind:<10} {:>8.2} {:>9.0} {:>12} {:>14.3} {:>15.3} {:>18.3}",
                    m.secs,
                    m.per_sec(),
                    m.max_server_connections,
                    Measured::ms_each(m.db_cpu, m.deliveries),
                    Measured::ms_each(m.pooler_cpu, m.deliveries),
                    Measured::ms_each(m.client_cpu, m.deliveries),
                );
                if path == "pooled" {
                    assert!(
                        m.max_server_connections <= i64::from(POOL_SIZE),
                        "{} server connections behind a pool of {POOL_SIZE}",
                        m.max_server_connections
                    );
                } else {
                    assert_eq!(m.max_server_connections, ENVIRONMENTS as i64);
                }
                rates.insert((processor, kind, path), m.per_sec());
            }
        }
    }
    for processor in ["licence", "store"] {
        for kind in ["new", "duplicate"] {
            println!(
                "[pooler] {processor} {kind}: pooled/direct = {:.2}",
                rates[&(processor, kind, "pooled")] / rates[&(processor, kind, "direct")]
            );
        }
    }
}
