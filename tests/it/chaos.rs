//! The chaos run: thousands of deliveries from retrying senders while the database is stopped
//! in immediate mode and restarted, fails over (every warm connection's node turns read-only),
//! the processor crashes after its effect, and a few poisoned deliveries panic on every attempt.
//! Afterwards the retention function runs until nothing is due. Every order must have exactly
//! one licence, every poisoned delivery must be dead and every other delivery done.
//!
//! 10,000 sends over 2,000 orders by default (bounded: it fits the test command);
//! `HOOKCLAIM_CHAOS_SCALE=N` multiplies the sizes for a longer run by hand.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::support::licences::Licences;
use hookclaim::processor::{Delivery, ProcessError, Processor};
use hookclaim::work::Work;
use support::ledger::{assert_rows_well_formed, licence_count};
use support::{answer, github_request, Format, PgServer};
use tokio::sync::Mutex;
use tokio_postgres::Transaction;

/// The licence example, but on 5% of first attempts the invocation dies after issuing the
/// licence and before the delivery is finished, as an out-of-memory kill would: processing
/// never returns, and the sender's side gives up on it (below). Poisoned deliveries panic on
/// every attempt, before any effect.
struct CrashAfterEffect;

/// Attempts before a failing delivery is dead: enough that a normal delivery survives its crash,
/// the restarts and the failover, few enough that the poisoned ones end within the run.
const MAX_ATTEMPTS: &str = "8";

fn crashes(delivery_id: &str) -> bool {
    // A fixed 5% of deliveries, chosen by id so the choice is the same in every environment.
    let h = delivery_id
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    h % 20 == 0
}

fn poisoned(n: usize) -> bool {
    // About 0.1%, spread over orders that also have other deliveries (997 is prime, so it
    // shares no factor with the order count).
    n % 997 == 3
}

fn delivery_number(delivery_id: &str) -> usize {
    delivery_id
        .strip_prefix("delivery-")
        .and_then(|n| n.parse().ok())
        .expect("a chaos delivery id")
}

impl Processor for CrashAfterEffect {
    fn name(&self) -> &'static str {
        "crash-after-effect"
    }

    async fn setup(&self, tx: &Transaction<'_>) -> Result<(), tokio_postgres::Error> {
        Licences.setup(tx).await
    }

    async fn process(&self, d: &Delivery, work: &mut Work<'_>) -> Result<(), ProcessError> {
        if poisoned(delivery_number(&d.delivery_id)) {
            panic!("poisoned delivery {}", d.delivery_id);
        }
        Licences.process(d, work).await?;
        if d.attempt == 1 && crashes(&d.delivery_id) {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

/// What one sender saw for one delivery.
struct Sent {
    id: String,
    answers: Vec<u16>,
    slowest: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deliveries_survive_database_restarts_and_crashes_with_exactly_one_licence_per_order() {
    let scale: usize = std::env::var("HOOKCLAIM_CHAOS_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let (orders, unique, sends) = (2000 * scale, 7000 * scale, 10_000 * scale);
    let server = Arc::new(PgServer::start());
    let url = server.url("postgres");
    let overrides = [
        ("LEASE_MARGIN_SECS", "1"),
        ("DATABASE_CONNECT_TIMEOUT_MS", "1000"),
        ("DATABASE_STATEMENT_TIMEOUT_MS", "2000"),
        ("RETRY_BASE_SECS", "1"),
        ("RETRY_MAX_SECS", "2"),
        ("MAX_ATTEMPTS", MAX_ATTEMPTS),
    ];
    let mut envs = Vec::new();
    for _ in 0..16 {
        envs.push(Arc::new(
            support::webhook(&url, &overrides, CrashAfterEffect).await,
        ));
    }

    // 70% distinct deliveries, 30% redeliveries of them, shuffled; each delivery names an order.
    let mut plan: Vec<usize> = (0..unique)
        .chain((0..sends - unique).map(|i| i % unique))
        .collect();
    fastrand::shuffle(&mut plan);
    let queue = Arc::new(Mutex::new(plan));
    let sent = Arc::new(Mutex::new(Vec::<Sent>::new()));
    let handled = Arc::new(AtomicU64::new(0));
    let started = Instant::now();

    // The database goes down twice while the senders run, then fails over.
    let chaos = tokio::spawn({
        let (server, handled) = (server.clone(), handled.clone());
        let url = url.clone();
        async move {
            let wait_for = async |threshold: u64| {
                while handled.load(Ordering::Relaxed) < threshold {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            for threshold in [sends as u64 / 4, sends as u64 / 2] {
                wait_for(threshold).await;
                let s = server.clone();
                tokio::task::spawn_blocking(move || s.stop_immediate())
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(800)).await;
                let s = server.clone();
                tokio::task::spawn_blocking(move || s.start_existing())
                    .await
                    .unwrap();
            }
            wait_for(sends as u64 * 3 / 4).await;
            fail_over(&url).await;
        }
    });

    let mut senders = Vec::new();
    for env in &envs {
        let (env, queue, sent, handled) =
            (env.clone(), queue.clone(), sent.clone(), handled.clone());
        senders.push(tokio::spawn(async move {
            loop {
                let Some(n) = queue.lock().await.pop() else {
                    break;
                };
                let id = format!("delivery-{n}");
                let body = format!(r#"{{"order_id":"order-{}","n":{n}}}"#, n % orders);
                let mut answers = Vec::new();
                let mut slowest = Duration::ZERO;
                let mut backoff = Duration::from_millis(50);
                // The sender retries every non-2xx answer with backoff, as providers do.
                for _ in 0..40 {
                    // A 2-second function timeout: a crashed attempt's lease ends 3 s later.
                    let req = support::with_deadline(
                        github_request(Format::HttpApiV2, &id, body.as_bytes(), false),
                        Duration::from_secs(2),
                    );
                    let t = Instant::now();
                    // An invocation still running after 800 ms has died (the process is gone
                    // before hookclaim's own deadline handling at 1.5 s): the sender sees a 502
                    // from API Gateway, and the claim is held until its lease ends.
                    let status = tokio::time::timeout(Duration::from_millis(800), env.handle(req))
                        .await
                        .map_or(502, |resp| answer(&resp).0);
                    slowest = slowest.max(t.elapsed());
                    answers.push(status);
                    if (200..300).contains(&status) {
                        break;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(800));
                }
                handled.fetch_add(1, Ordering::Relaxed);
                sent.lock().await.push(Sent {
                    id,
                    answers,
                    slowest,
                });
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    chaos.await.unwrap();
    let senders_done = started.elapsed();

    // Then the scheduled retention function runs until nothing is due.
    let retention = support::retention(&url, &overrides, CrashAfterEffect).await;
    let c = support::connect(&url).await;
    let mut runs = 0;
    let mut redriven_ok = 0;
    loop {
        let pending = support::count(
            &c,
            "SELECT count(*) FROM hookclaim_deliveries WHERE status NOT IN ('done', 'dead')",
        )
        .await;
        if pending == 0 || runs >= 40 {
            break;
        }
        let report = retention
            .handle(
                serde_json::json!({}),
                SystemTime::now() + Duration::from_secs(30),
            )
            .await
            .expect("retention run");
        redriven_ok += report.redriven.ok;
        runs += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let sent = sent.lock().await;
    let mut by_status: BTreeMap<u16, u64> = BTreeMap::new();
    for s in sent.iter() {
        for a in &s.answers {
            *by_status.entry(*a).or_default() += 1;
        }
    }
    let never_2xx: Vec<&str> = sent
        .iter()
        .filter(|s| !s.answers.iter().any(|a| (200..300).contains(a)))
        .filter(|s| !poisoned(delivery_number(&s.id)))
        .map(|s| s.id.as_str())
        .collect();
    let poison: Vec<usize> = (0..unique).filter(|n| poisoned(*n)).collect();
    // Orders whose every delivery is poisoned can never get a licence.
    let licensable = (0..orders)
        .filter(|o| (0..unique).any(|n| n % orders == *o && !poisoned(n)))
        .count() as i64;
    let dead_poison = support::count(
        &c,
        "SELECT count(*) FROM hookclaim_deliveries
          WHERE status = 'dead' AND last_error LIKE '%processor panicked: poisoned delivery%'",
    )
    .await;
    let read_only_errors = server.log().matches("in a read-only transaction").count();
    let slowest = sent.iter().map(|s| s.slowest).max().unwrap_or_default();
    let licences = licence_count(&c).await;
    let licenced_orders = support::count(
        &c,
        "SELECT count(DISTINCT order_id) FROM hookclaim_example_licences",
    )
    .await;
    let statuses: BTreeMap<String, i64> = c
        .query(
            "SELECT status, count(*) FROM hookclaim_deliveries GROUP BY status",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let crashed = (0..unique)
        .filter(|n| crashes(&format!("delivery-{n}")))
        .count();
    println!(
        "chaos: {sends} sends, {unique} deliveries, {orders} orders, {crashed} crashing first attempts, \
         {} poisoned deliveries, 2 database restarts and a failover ({read_only_errors} writes \
         refused read-only); senders done in {senders_done:?}; answers by status {by_status:?}; \
         other deliveries never answered 2xx {}; slowest answer {slowest:?}; retention runs \
         {runs} (re-driven ok {redriven_ok}); rows by status {statuses:?}; licences {licences}",
        poison.len(),
        never_2xx.len()
    );
    // A 2xx was answered for every delivery eventually (nothing was given up by the senders)…
    assert!(never_2xx.is_empty(), "never answered 2xx: {never_2xx:?}");
    // …every delivery ended done, so nothing answered 2xx was lost, but the poisoned ones,
    // which ended dead after their attempts with the panic recorded…
    assert_eq!(
        statuses.get("done").copied(),
        Some((unique - poison.len()) as i64),
        "{statuses:?}"
    );
    assert_eq!(statuses.get("dead").copied(), Some(poison.len() as i64));
    assert_eq!(dead_poison, poison.len() as i64);
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert_rows_well_formed(&c).await;
    // …and every order got exactly one licence.
    assert_eq!(licences, licensable);
    assert_eq!(licenced_orders, licensable);
    assert!(read_only_errors > 0, "the failover was seen");
    // No answer waited past the connect timeout plus two statement deadlines (and slack).
    assert!(
        slowest < Duration::from_secs(8),
        "slowest answer {slowest:?}"
    );
    assert!(
        by_status.contains_key(&503),
        "the restarts were seen: {by_status:?}"
    );
    assert!(
        by_status.contains_key(&502),
        "the crashes were seen: {by_status:?}"
    );
}

/// A failover: the node every warm connection is on turns read-only (as a demoted primary does),
/// while a new connection reaches a writable one (as the endpoint's DNS does after it).
async fn fail_over(url: &str) {
    let admin = support::connect(url).await;
    // One statement at a time: a multi-statement string is one transaction, which ALTER SYSTEM
    // refuses.
    for sql in [
        "ALTER DATABASE postgres SET default_transaction_read_only = off",
        "ALTER SYSTEM SET default_transaction_read_only = on",
        "SELECT pg_reload_conf()",
    ] {
        admin.batch_execute(sql).await.expect("fail over");
    }
}
