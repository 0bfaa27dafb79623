//! The webhook handler against the database's own limit.
//!
//! Starts a throwaway PostgreSQL (the test harness's), then measures, each against a baseline in
//! the same run:
//! - `counts`: statements (pg_stat_statements) and round trips (a counting proxy) per new
//!   delivery and per duplicate, for the store-only and the licence processors. The proxy also
//!   captures the handler's exact SQL, which the pgbench scripts below are written from.
//! - `throughput`: deliveries per second and p50/p99 latency through `Webhook::handle` (API
//!   Gateway v2 events, GitHub signatures verified) at 1, 4 and 16 simulated execution
//!   environments, each its own `Webhook` with its own connection, versus pgbench running the
//!   same statements with the same number of clients. Rounds alternate pgbench and handler.
//! - `statements`: the store-only claim statement against the floor of deduplication, a bare
//!   `INSERT … ON CONFLICT DO NOTHING` of the key and the same payload, both through pgbench in
//!   alternating rounds at 1, 4 and 16 clients, for new and duplicate deliveries; and the WAL
//!   bytes and buffers dirtied per statement.
//! - `instructions`: the same two statements (and a plain read of the key, the floor of any
//!   statement that answers) in instructions the server executes per statement, counted by
//!   callgrind on a second server: ratios that do not move with the machine's load.
//! - `purge`: the retention purge of 1,000,000 finished rows alone, then the p99 of concurrent
//!   claims without and with a purge running.
//!
//! - `pinned`: the throughput comparison again with the benchmark process on CPU 0 and the
//!   server on CPU 1, so that client and server do not share a core.
//!
//! `HOOKCLAIM_BENCH_SECTIONS=counts,statements,instructions,throughput,pinned,purge` picks sections
//! (default: all);
//! `HOOKCLAIM_BENCH_SECTIONS=profile` instead runs one environment through a short loop of new
//! deliveries, for `valgrind --tool=callgrind`. Results go to `target/bench/handler.json`.
//! Run through `scripts/bench`.

#[path = "../tests/it/support/mod.rs"]
mod support;

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hookclaim::processor::{Processor, StoreOnly};
use hookclaim::webhook::Webhook;
use hookclaim::Licences;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio_postgres::types::Type;

use common::proxy::Proxy;
use common::{CpuSnap, CpuUse};

/// Simulated execution environments (each one `Webhook`, one connection) per configuration.
const CONCURRENCY: [usize; 3] = [1, 4, 16];

/// Deliveries sent per case when counting statements and round trips.
const COUNTED: usize = 200;

/// Concurrent claimants while the purge runs.
const PURGE_CLAIMANTS: usize = 4;
/// Each claimant's pace during the purge comparison: 500 deliveries/s, 2,000/s in all, a steady
/// load that leaves the database CPU to spare, as senders' traffic does, so the comparison shows
/// what the purge does to claims rather than two loads that each want every core.
const PURGE_CLAIM_EVERY: Duration = Duration::from_millis(2);

struct Ctx {
    server: support::PgServer,
    admin: tokio_postgres::Client,
    postmaster: u32,
    /// Seconds per measured run.
    secs: f64,
    /// pgbench/handler pairs per configuration.
    rounds: usize,
    pgbench: PathBuf,
}

fn main() {
    common::silence_stdout();
    let sections = std::env::var("HOOKCLAIM_BENCH_SECTIONS")
        .unwrap_or_else(|_| "counts,statements,instructions,throughput,pinned,purge".into());
    // Single-threaded like the function's own binary: with two workers, tokio-postgres's
    // connection task could write the first request of a pipelined batch before the rest were
    // queued, and the proxy would count a round trip the function does not make. The measured
    // environments run on threads of their own (`handler_run`).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let server = support::PgServer::start();
        let admin = support::connect(&server.url("postgres")).await;
        let postmaster = common::postmaster_pid(&admin).await;
        let ctx = Ctx {
            server,
            admin,
            postmaster,
            secs: common::env_or("HOOKCLAIM_BENCH_SECS", 2.0),
            rounds: common::env_or("HOOKCLAIM_BENCH_ROUNDS", 3),
            pgbench: common::pg_tool("pgbench"),
        };
        if sections == "profile" {
            profile(&ctx).await;
            return;
        }
        let started = Instant::now();
        let mut out = json!({
            "postgres": server_version(&ctx).await,
            "server_settings": "test harness cluster: fsync=off, full_page_writes=off, synchronous_commit=on, shared_buffers=128MB",
            "body_bytes": common::BODY_BYTES,
            "secs_per_run": ctx.secs,
            "rounds": ctx.rounds,
            "environment_threads": 2,
        });
        let mut sql = None;
        if ["counts", "statements", "instructions", "throughput", "pinned"]
            .iter()
            .any(|s| sections.contains(s))
        {
            let (counts, captured) = counts(&ctx).await;
            out["counts"] = counts;
            sql = Some(captured);
        }
        if sections.contains("statements") {
            let sql = sql.as_ref().expect("captured SQL");
            out["statements"] = statements(&ctx, sql).await;
        }
        if sections.contains("instructions") {
            let sql = sql.as_ref().expect("captured SQL");
            out["instructions"] = instructions(&ctx, sql).await;
        }
        if sections.contains("throughput") || sections.contains("pinned") {
            let sql = sql.as_ref().expect("captured SQL");
            let url = throughput_database(&ctx).await;
            if sections.contains("throughput") {
                out["client_side"] = client_side_costs();
                out["throughput"] = throughput(&ctx, sql, &url).await;
            }
            if sections.contains("pinned") {
                out["throughput_pinned"] = throughput_pinned(&ctx, sql, &url).await;
            }
        }
        if sections.contains("purge") {
            out["purge"] = purge(&ctx).await;
        }
        out["bench_seconds"] = json!(started.elapsed().as_secs_f64().round());
        common::write_json("handler", &out);
    });
}

async fn server_version(ctx: &Ctx) -> String {
    ctx.admin
        .query_one("SELECT version()", &[])
        .await
        .expect("version")
        .get(0)
}

/// A fresh database with the schema applied; returns its URL.
async fn create_db(ctx: &Ctx, name: &str) -> String {
    ctx.admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    let url = ctx.server.url(name);
    let mut client = support::connect(&url).await;
    hookclaim::schema::migrate(&mut client)
        .await
        .expect("migrate");
    url
}

/// How the environments reach the database, and the pgbench mode that sends the same
/// statements the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Connection {
    /// Straight to PostgreSQL: the hot statements are prepared once per connection
    /// (`pgbench -M prepared`).
    Direct,
    /// `DATABASE_POOLED=true`, as behind a transaction pooler: every statement unnamed, parsed
    /// and planned each time (`pgbench -M extended`).
    Pooled,
}

impl Connection {
    fn name(self) -> &'static str {
        match self {
            Connection::Direct => "direct",
            Connection::Pooled => "pooled",
        }
    }

    fn pgbench_mode(self) -> &'static str {
        match self {
            Connection::Direct => "prepared",
            Connection::Pooled => "extended",
        }
    }

    fn overrides(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Connection::Direct => &[],
            Connection::Pooled => &[("DATABASE_POOLED", "true")],
        }
    }
}

/// `n` simulated execution environments over `url`, each connected and ready.
async fn environments<P: Processor + Copy>(
    url: &str,
    n: usize,
    p: P,
    connection: Connection,
) -> Vec<Arc<Webhook<P>>> {
    let mut envs = Vec::with_capacity(n);
    for _ in 0..n {
        envs.push(Arc::new(
            support::webhook(url, connection.overrides(), p).await,
        ));
    }
    envs
}

/// What a delivery answered, checked against the expected outcome.
fn answered(resp: &lambda_http::Response<lambda_http::Body>, outcome: &str) -> bool {
    let body: &[u8] = resp.body().as_ref();
    let want = format!("\"status\":\"{outcome}\"");
    resp.status() == 200 && body.windows(want.len()).any(|w| w == want.as_bytes())
}

/// One delivery as the function process handles it: the runtime's event parse, then the handler.
async fn deliver<P: Processor>(
    wh: &Webhook<P>,
    event: &str,
) -> lambda_http::Response<lambda_http::Body> {
    let req = lambda_http::request::from_str(event).expect("the event parses");
    wh.handle(req).await
}

// ---------------------------------------------------------------------------------------------
// Statements and round trips

/// The handler's own SQL, as captured on the wire.
struct Sql {
    claim: String,
    finish_done: String,
    issue_licence: String,
}

async fn counts(ctx: &Ctx) -> (Value, Sql) {
    eprintln!("== counts: statements and round trips per delivery");
    create_db(ctx, "counts").await;
    let proxy = Proxy::start(ctx.server.port).await;
    let url = format!("postgres://postgres@127.0.0.1:{}/counts", proxy.port);
    ctx.admin
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .expect("pg_stat_statements (shared_preload_libraries in the harness)");
    let mut texts = Vec::new();
    let store = count_processor(ctx, &proxy, &url, StoreOnly, &mut texts).await;
    let licence = count_processor(ctx, &proxy, &url, Licences, &mut texts).await;
    let find = |what: &str, pred: &dyn Fn(&str) -> bool| {
        texts
            .iter()
            .find(|t| pred(t))
            .cloned()
            .unwrap_or_else(|| panic!("the handler sent no {what} statement"))
    };
    let sql = Sql {
        claim: find("claim", &|t| t.contains("hookclaim_claim_unanswered(")),
        finish_done: find("finish", &|t| {
            t.starts_with("WITH finished AS") && t.contains("status = 'done'")
        }),
        issue_licence: find("licence", &|t| {
            t.contains("INSERT INTO hookclaim_example_licences")
        }),
    };
    (
        json!({"deliveries_per_case": COUNTED, "store": store, "licence": licence}),
        sql,
    )
}

async fn count_processor<P: Processor + Copy>(
    ctx: &Ctx,
    proxy: &Proxy,
    url: &str,
    p: P,
    texts: &mut Vec<String>,
) -> Value {
    let wh = support::webhook(url, &[], p).await;
    // The connection's first delivery also prepares the hot statements (one more round trip,
    // once per connection); the counts are for every delivery after it.
    let warm_up = deliver(&wh, &common::github_event(common::new_id())).await;
    assert!(answered(&warm_up, "processed"), "{warm_up:?}");
    // Prepared statements show their text only here, when they are prepared.
    for t in proxy.seen().statements {
        if !texts.contains(&t) {
            texts.push(t);
        }
    }
    let ids: Vec<u64> = (0..COUNTED).map(|_| common::new_id()).collect();
    let new = count_case(ctx, proxy, &wh, &ids, "processed", texts).await;
    let dup = count_case(ctx, proxy, &wh, &ids, "duplicate", texts).await;
    json!({"new": new, "duplicate": dup})
}

async fn count_case<P: Processor>(
    ctx: &Ctx,
    proxy: &Proxy,
    wh: &Webhook<P>,
    ids: &[u64],
    outcome: &str,
    texts: &mut Vec<String>,
) -> Value {
    ctx.admin
        .batch_execute("SELECT pg_stat_statements_reset()")
        .await
        .expect("reset pg_stat_statements");
    proxy.reset();
    for &id in ids {
        let resp = deliver(wh, &common::github_event(id)).await;
        assert!(answered(&resp, outcome), "expected {outcome}: {resp:?}");
    }
    let seen = proxy.seen();
    for t in &seen.statements {
        if !texts.contains(t) {
            texts.push(t.clone());
        }
    }
    let rows = ctx
        .admin
        .query(
            "SELECT query, calls, total_exec_time FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'counts') AND toplevel
              ORDER BY calls DESC, query",
            &[],
        )
        .await
        .expect("read pg_stat_statements");
    let n = ids.len() as f64;
    let mut total = 0i64;
    let statements: Vec<Value> = rows
        .iter()
        .map(|r| {
            let query: String = r.get(0);
            let calls: i64 = r.get(1);
            let ms: f64 = r.get(2);
            total += calls;
            let first = query.split_whitespace().collect::<Vec<_>>().join(" ");
            json!({
                "statement": first.chars().take(72).collect::<String>(),
                "per_delivery": calls as f64 / n,
                "mean_exec_us": if calls > 0 { ms * 1e3 / calls as f64 } else { 0.0 },
            })
        })
        .collect();
    json!({
        "statements_per_delivery": total as f64 / n,
        "round_trips_per_delivery": seen.round_trips as f64 / n,
        "sync_or_query_messages_per_delivery": seen.requests as f64 / n,
        "statements": statements,
    })
}

// ---------------------------------------------------------------------------------------------
// Throughput and latency

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    New,
    Duplicate,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::New => "new",
            Kind::Duplicate => "duplicate",
        }
    }

    fn outcome(self) -> &'static str {
        match self {
            Kind::New => "processed",
            Kind::Duplicate => "duplicate",
        }
    }

    /// The event of one delivery of this kind. A duplicate carries the body every redelivered
    /// row was stored with, as pgbench's duplicates do (pgbench sends one payload for every
    /// id), so that both sides' duplicates match their stored payload.
    fn event(self) -> String {
        match self {
            Kind::New => common::github_event(common::new_id()),
            Kind::Duplicate => common::github_event_with_body(common::dup_id(), DUP_BODY),
        }
    }
}

/// The order id in the body of every redelivered row (the body pgbench's scripts send).
const DUP_BODY: u64 = 1;

/// One measured run of either side.
struct Run {
    deliveries: u64,
    secs: f64,
    latencies_ns: Vec<u64>,
    cpu: CpuUse,
    bad: u64,
}

/// Per-delivery costs on the client side that are not the handler's: building the signed event
/// (the sender and API Gateway's work, done here in the benchmark process) and parsing it (the
/// Lambda runtime's work, included in every handler latency below).
fn client_side_costs() -> Value {
    let n = 20_000;
    let t = Instant::now();
    let events: Vec<String> = (0..n)
        .map(|_| common::github_event(common::new_id()))
        .collect();
    let build = t.elapsed().as_secs_f64() / n as f64;
    let t = Instant::now();
    for e in &events {
        std::hint::black_box(lambda_http::request::from_str(e).expect("parses"));
    }
    let parse = t.elapsed().as_secs_f64() / n as f64;
    json!({
        "event_bytes": events[0].len(),
        "build_signed_event_us": build * 1e6,
        "runtime_event_parse_us": parse * 1e6,
    })
}

/// The throughput database: the redelivered set and the licence table in place.
async fn throughput_database(ctx: &Ctx) -> String {
    let url = create_db(ctx, "tp").await;
    // The redelivered set: DUP_COUNT deliveries through the handler itself (also a warm-up),
    // all with the body pgbench's scripts send.
    {
        let envs = environments(&url, 4, StoreOnly, Connection::Direct).await;
        let mut tasks = Vec::new();
        for (i, wh) in envs.into_iter().enumerate() {
            tasks.push(tokio::spawn(async move {
                let mut id = common::DUP_BASE + 1 + i as u64;
                while id <= common::DUP_BASE + common::DUP_COUNT {
                    let event = common::github_event_with_body(id, DUP_BODY);
                    let resp = deliver(&wh, &event).await;
                    assert!(answered(&resp, "processed"), "{resp:?}");
                    id += 4;
                }
            }));
        }
        for t in tasks {
            t.await.expect("prepopulate");
        }
    }
    // The licence table, for pgbench's licence scripts (the processor's setup creates it).
    drop(support::webhook(&url, &[], Licences).await);
    url
}

async fn throughput(ctx: &Ctx, sql: &Sql, url: &str) -> Value {
    eprintln!("== throughput: handler versus pgbench");
    let scripts = Scripts::write(sql);
    let mut rows = Vec::new();
    for connection in [Connection::Direct, Connection::Pooled] {
        rows.extend(processor_rows(ctx, url, StoreOnly, "store", &scripts, connection).await);
        rows.extend(processor_rows(ctx, url, Licences, "licence", &scripts, connection).await);
    }
    json!({
        "rows": rows,
        "pgbench_scripts": scripts.dir,
    })
}

/// The same comparison with the benchmark process (environments, pgbench) on CPU 0 and the
/// PostgreSQL cluster on CPU 1: client and server no longer compete for the same core, as when
/// the functions run in Lambda and the database on its own host.
async fn throughput_pinned(ctx: &Ctx, sql: &Sql, url: &str) -> Value {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return json!({"skipped": "needs two CPUs"});
    }
    eprintln!("== throughput with the client on CPU 0 and the server on CPU 1");
    let scripts = Scripts::write(sql);
    pin_apart(ctx);
    let mut rows = Vec::new();
    let direct = Connection::Direct;
    rows.extend(processor_rows(ctx, url, StoreOnly, "store", &scripts, direct).await);
    rows.extend(processor_rows(ctx, url, Licences, "licence", &scripts, direct).await);
    unpin(ctx);
    json!({"rows": rows})
}

/// The cluster (postmaster and backends; new backends inherit it) on CPU 1, this process and
/// what it starts on CPU 0.
fn pin_apart(ctx: &Ctx) {
    for pid in server_pids(ctx) {
        common::pin(pid, "1");
    }
    common::pin(std::process::id(), "0");
}

/// Undoes [`pin_apart`].
fn unpin(ctx: &Ctx) {
    common::pin(std::process::id(), "0-1");
    for pid in server_pids(ctx) {
        common::pin(pid, "0-1");
    }
}

fn server_pids(ctx: &Ctx) -> Vec<u32> {
    let mut pids = common::children_of(ctx.postmaster);
    pids.push(ctx.postmaster);
    pids
}

async fn processor_rows<P: Processor + Copy>(
    ctx: &Ctx,
    url: &str,
    p: P,
    name: &str,
    scripts: &Scripts,
    connection: Connection,
) -> Vec<Value> {
    let mut rows = Vec::new();
    for &c in &CONCURRENCY {
        for kind in [Kind::New, Kind::Duplicate] {
            let script = scripts.for_case(name, kind);
            let mut handler_runs = Vec::new();
            let mut pgbench_runs = Vec::new();
            for _ in 0..ctx.rounds {
                let mode = connection.pgbench_mode();
                let length = Length::Secs(ctx.secs);
                pgbench_runs.push(pgbench(ctx, "tp", script, c, mode, length).await);
                let run = Stop::After(common::secs(ctx.secs));
                let load = Load {
                    clients: c,
                    kind,
                    every: None,
                };
                handler_runs.push(handler_run(ctx, url, p, connection, load, run).await);
            }
            let h = side(&handler_runs);
            let b = side(&pgbench_runs);
            let ratio = h["deliveries_per_s"].as_f64().unwrap_or(0.0)
                / b["deliveries_per_s"].as_f64().unwrap_or(f64::NAN);
            eprintln!(
                "  {:6} {name:8} {:9} c={c:2}: handler {:7.0}/s p50 {:6.0} µs p99 {:6.0} µs | pgbench {:7.0}/s p50 {:6.0} µs p99 {:6.0} µs | ratio {ratio:.2}",
                connection.name(),
                kind.name(),
                h["deliveries_per_s"].as_f64().unwrap_or(0.0),
                h["latency"]["p50_us"].as_f64().unwrap_or(0.0),
                h["latency"]["p99_us"].as_f64().unwrap_or(0.0),
                b["deliveries_per_s"].as_f64().unwrap_or(0.0),
                b["latency"]["p50_us"].as_f64().unwrap_or(0.0),
                b["latency"]["p99_us"].as_f64().unwrap_or(0.0),
            );
            rows.push(json!({
                "connection": connection.name(),
                "pgbench_mode": connection.pgbench_mode(),
                "processor": name,
                "kind": kind.name(),
                "clients": c,
                "handler": h,
                "pgbench": b,
                "ratio": ratio,
            }));
        }
    }
    rows
}

/// What the environments send: how many environments, which deliveries, and how fast.
#[derive(Clone, Copy)]
struct Load {
    clients: usize,
    kind: Kind,
    /// One delivery per environment at most this often; back to back when `None`.
    every: Option<Duration>,
}

/// When a measured run ends.
enum Stop {
    /// After this long.
    After(Duration),
    /// When the flag is raised.
    When(Arc<AtomicBool>),
}

/// `load.clients` simulated execution environments, each sending deliveries of `load.kind` (back
/// to back, or at `load.every`) until `stop`. Like a Lambda environment, each runs on a single-threaded runtime with its own
/// connection; the environments share two threads (as pgbench's clients share `-j 2`). They
/// connect and send one warm-up delivery (which prepares the statements) before the measured
/// window opens; CPU is read at its opening and closing.
async fn handler_run<P: Processor + Copy>(
    ctx: &Ctx,
    url: &str,
    p: P,
    connection: Connection,
    load: Load,
    stop: Stop,
) -> Run {
    let Load {
        clients,
        kind,
        every,
    } = load;
    let threads = clients.clamp(1, 2);
    let ready = Arc::new(std::sync::Barrier::new(threads + 1));
    let measured = Arc::new(std::sync::Barrier::new(threads + 1));
    let flag = match &stop {
        Stop::After(_) => Arc::new(AtomicBool::new(false)),
        Stop::When(flag) => flag.clone(),
    };
    let (results, collected) = std::sync::mpsc::channel::<(Vec<u64>, u64)>();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let n = clients / threads + usize::from(t < clients % threads);
            let (url, ready, measured, flag, results) = (
                url.to_string(),
                ready.clone(),
                measured.clone(),
                flag.clone(),
                results.clone(),
            );
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("environment runtime");
                runtime.block_on(async move {
                    let mut envs = Vec::with_capacity(n);
                    for _ in 0..n {
                        let wh = Arc::new(support::webhook(&url, connection.overrides(), p).await);
                        let warm = deliver(&wh, &common::github_event(common::new_id())).await;
                        assert!(answered(&warm, "processed"), "{warm:?}");
                        envs.push(wh);
                    }
                    ready.wait();
                    let tasks: Vec<_> = envs
                        .iter()
                        .cloned()
                        .map(|wh| {
                            let flag = flag.clone();
                            tokio::spawn(async move {
                                let mut latencies = Vec::with_capacity(16_384);
                                let mut bad = 0u64;
                                let mut pace = every.map(|d| {
                                    let mut pace = tokio::time::interval(d);
                                    pace.set_missed_tick_behavior(
                                        tokio::time::MissedTickBehavior::Delay,
                                    );
                                    pace
                                });
                                while !flag.load(Ordering::Relaxed) {
                                    if let Some(pace) = pace.as_mut() {
                                        pace.tick().await;
                                    }
                                    let event = kind.event();
                                    let t = Instant::now();
                                    let resp = deliver(&wh, &event).await;
                                    latencies.push(t.elapsed().as_nanos() as u64);
                                    if !answered(&resp, kind.outcome()) {
                                        bad += 1;
                                    }
                                }
                                (latencies, bad)
                            })
                        })
                        .collect();
                    for task in tasks {
                        results
                            .send(task.await.expect("environment task"))
                            .expect("collector");
                    }
                    // The environments (and their connections) end after the window closes.
                    measured.wait();
                });
            })
        })
        .collect();
    drop(results);
    let postmaster = ctx.postmaster;
    tokio::task::spawn_blocking(move || {
        ready.wait();
        let before = CpuSnap::take(postmaster);
        let started = Instant::now();
        if let Stop::After(d) = stop {
            std::thread::sleep(d);
            flag.store(true, Ordering::SeqCst);
        }
        let mut latencies_ns = Vec::new();
        let mut bad = 0;
        for (l, b) in collected.iter().take(clients) {
            latencies_ns.extend(l);
            bad += b;
        }
        let secs = started.elapsed().as_secs_f64();
        let cpu = before.until(&CpuSnap::take(postmaster));
        measured.wait();
        for w in workers {
            w.join().expect("environment thread");
        }
        if bad > 0 {
            eprintln!("  !! {bad} deliveries did not answer {}", kind.outcome());
        }
        Run {
            deliveries: latencies_ns.len() as u64,
            secs,
            latencies_ns,
            cpu,
            bad,
        }
    })
    .await
    .expect("run")
}

/// One side of a comparison, over its rounds.
fn side(runs: &[Run]) -> Value {
    let deliveries: u64 = runs.iter().map(|r| r.deliveries).sum();
    let secs: f64 = runs.iter().map(|r| r.secs).sum();
    let all: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.latencies_ns.iter().copied())
        .collect();
    let per = |f: fn(&CpuUse) -> f64| {
        runs.iter().map(|r| f(&r.cpu) * r.cpu.wall_s).sum::<f64>() / deliveries.max(1) as f64 * 1e6
    };
    let share = |f: fn(&CpuUse) -> f64| {
        runs.iter().map(|r| f(&r.cpu) * r.cpu.wall_s).sum::<f64>()
            / runs.iter().map(|r| r.cpu.wall_s).sum::<f64>()
    };
    json!({
        "deliveries_per_s": deliveries as f64 / secs,
        "rounds_per_s": runs.iter().map(|r| r.deliveries as f64 / r.secs).collect::<Vec<_>>(),
        "deliveries": deliveries,
        "latency": common::latency(all),
        "cpu_us_per_delivery": {
            "client": per(|c| c.bench_process + c.pgbench),
            "server": per(|c| c.server),
        },
        "cpu_cores": {
            "benchmark_process": share(|c| c.bench_process),
            "pgbench": share(|c| c.pgbench),
            "server": share(|c| c.server),
            "whole_machine": share(|c| c.machine),
        },
        "bad_answers": runs.iter().map(|r| r.bad).sum::<u64>(),
    })
}

/// The pgbench scripts, written from the captured statements.
struct Scripts {
    dir: PathBuf,
    store_new: PathBuf,
    store_dup: PathBuf,
    licence_new: PathBuf,
    licence_dup: PathBuf,
}

/// Replaces `$1..$n` in `sql` by pgbench variables `vars[0..n]` (highest first, so `$1` does not
/// eat the start of `$10`).
fn with_vars(sql: &str, vars: &[&str]) -> String {
    let mut out = sql.to_string();
    for (i, var) in vars.iter().enumerate().rev() {
        out = out.replace(&format!("${}", i + 1), &format!(":{var}"));
    }
    assert!(
        !out.contains(';'),
        "a statement for pgbench holds a semicolon"
    );
    out + ";\n"
}

impl Scripts {
    fn write(sql: &Sql) -> Scripts {
        let dir = common::out_dir().join("pgbench");
        std::fs::create_dir_all(&dir).expect("pgbench script dir");
        // The first try's claim parameters: source, delivery id, payload, and the rest (owner,
        // hash and a new row's values) as one `hookclaim_new_claim` literal (store-only or
        // in-transaction).
        let claim = |new_row: &str| with_vars(&sql.claim, &["source", "id", "payload", new_row]);
        let issue = with_vars(&sql.issue_licence, &["id", "key", "source", "id"]);
        let finish = with_vars(&sql.finish_done, &["source", "id", "attempt", "owner"]);
        let new_id = "\\set id random(1, 9223372036854775806)\n";
        let key = "\\set key random(1, 9223372036854775806)\n";
        let dup_id = format!(
            "\\set id {} + random(1, {})\n",
            common::DUP_BASE,
            common::DUP_COUNT
        );
        let header = |what: &str| {
            format!(
                "-- hookclaim benchmark: {what}.\n-- Statements captured from the handler's own \
                 connection; :name are pgbench variables.\n"
            )
        };
        let files = [
            ("store_new.sql", format!("{}{new_id}{}", header("a new delivery, store-only processor"), claim("row_store"))),
            ("store_dup.sql", format!("{}{dup_id}{}", header("a duplicate, store-only processor"), claim("row_store"))),
            (
                "licence_new.sql",
                format!(
                    "{}{new_id}{key}{}\\startpipeline\nBEGIN;\n{issue}{finish}COMMIT;\n\\endpipeline\n",
                    header("a new delivery, licence processor: the claim, then BEGIN, the insert, the fenced finish and COMMIT in one pipelined batch"),
                    claim("row_tx")
                ),
            ),
            ("licence_dup.sql", format!("{}{dup_id}{}", header("a duplicate, licence processor"), claim("row_tx"))),
        ];
        for (name, text) in &files {
            std::fs::write(dir.join(name), text).expect("write pgbench script");
        }
        Scripts {
            store_new: dir.join("store_new.sql"),
            store_dup: dir.join("store_dup.sql"),
            licence_new: dir.join("licence_new.sql"),
            licence_dup: dir.join("licence_dup.sql"),
            dir,
        }
    }

    fn for_case(&self, processor: &str, kind: Kind) -> &Path {
        match (processor, kind) {
            ("store", Kind::New) => &self.store_new,
            ("store", Kind::Duplicate) => &self.store_dup,
            (_, Kind::New) => &self.licence_new,
            (_, Kind::Duplicate) => &self.licence_dup,
        }
    }
}

/// How long a pgbench run lasts.
#[derive(Debug, Clone, Copy)]
enum Length {
    /// About this many seconds (rounded up: pgbench takes whole seconds).
    Secs(f64),
    /// Exactly this many transactions per client.
    Transactions(u64),
}

/// The values of the pgbench scripts' variables: the same delivery the handler claims (GitHub,
/// a 1 KB body), a random owner token.
fn pgbench_defines() -> Vec<(&'static str, String)> {
    let sample = common::body(DUP_BODY);
    // The claim carries its owner inside the new-row literal; the fenced finish binds it again.
    let owner = format!("{:032x}", fastrand::u128(..));
    vec![
        ("source", "github".to_string()),
        ("owner", owner.clone()),
        ("payload", format!("\\x{}", hex::encode(sample.as_bytes()))),
        ("sha", common::sha256_bytea(sample.as_bytes())),
        ("row_store", common::new_row(true, &owner)),
        ("row_tx", common::new_row(false, &owner)),
        ("attempt", "1".to_string()),
    ]
}

/// pgbench with `clients` connections (and up to two threads, like the handler's two tokio
/// workers) running `script` against database `db` for `length`; latencies from its
/// per-transaction log.
async fn pgbench(
    ctx: &Ctx,
    db: &str,
    script: &Path,
    clients: usize,
    mode: &str,
    length: Length,
) -> Run {
    let logs = common::out_dir().join("pgbench-log");
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).expect("pgbench log dir");
    let defines = pgbench_defines();
    let threads = clients.min(2);
    let mut cmd = tokio::process::Command::new(&ctx.pgbench);
    cmd.args(["-n", "-M", mode, "-h", "127.0.0.1", "-U", "postgres"])
        .arg("-p")
        .arg(ctx.server.port.to_string())
        .arg("-c")
        .arg(clients.to_string())
        .arg("-j")
        .arg(threads.to_string())
        .args(match length {
            Length::Secs(secs) => ["-T".to_string(), format!("{}", secs.ceil() as u64)],
            Length::Transactions(n) => ["-t".to_string(), n.to_string()],
        })
        .arg("-f")
        .arg(script)
        .arg("-l")
        .arg(format!("--log-prefix={}", logs.join("tx").display()));
    for (k, v) in &defines {
        cmd.arg("-D").arg(format!("{k}={v}"));
    }
    cmd.arg(db);
    let before = CpuSnap::take(ctx.postmaster);
    let out = cmd.output().await.expect("run pgbench");
    // Let the server reap pgbench's backends, so their CPU is counted.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cpu = before.until(&CpuSnap::take(ctx.postmaster));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pgbench {} failed: {stdout}\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |prefix: &str| -> f64 {
        stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            // "2000/2000" when the run is a number of transactions.
            .and_then(|rest| {
                rest.split(|c: char| c.is_whitespace() || c == '/')
                    .find(|v| !v.is_empty())
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no `{prefix}` in pgbench output:\n{stdout}"))
    };
    let tps = field("tps =");
    let processed = field("number of transactions actually processed:") as u64;
    let failed = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("number of failed transactions:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0u64);
    let mut latencies_ns = Vec::with_capacity(processed as usize);
    for entry in std::fs::read_dir(&logs).expect("pgbench logs").flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            // client_id transaction_no time(µs) script_no time_epoch time_us
            if let Some(us) = line
                .split_whitespace()
                .nth(2)
                .and_then(|v| v.parse::<u64>().ok())
            {
                latencies_ns.push(us * 1000);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&logs);
    Run {
        deliveries: processed,
        // tps excludes connection set-up; express it as deliveries over an equivalent duration.
        secs: processed as f64 / tps.max(1e-9),
        latencies_ns,
        cpu,
        bad: failed,
    }
}

// ---------------------------------------------------------------------------------------------
// The claim statement against the bare dedupe insert

/// The floor of deduplication: a table with nothing but the unique key and the payload.
const BARE_TABLE: &str = "CREATE TABLE bench_bare (
    source      text  NOT NULL,
    delivery_id text  NOT NULL,
    payload     bytea NOT NULL,
    PRIMARY KEY (source, delivery_id))";

/// One unique-index insert of the key and the payload; a duplicate inserts nothing.
const BARE_INSERT: &str =
    "INSERT INTO bench_bare (source, delivery_id, payload) VALUES ($1, $2, $3)
    ON CONFLICT DO NOTHING";

/// A read of one key by the ledger's unique index that binds the payload as the bare insert does:
/// less than any claim can cost, since every claim reads the key and binds the payload.
const PLAIN_READ: &str = "SELECT status FROM hookclaim_deliveries
    WHERE source = $1 AND delivery_id = $2 AND $3::bytea IS NOT NULL";

/// The claim's read of the stored answer alone, binding the claim's four values: what the claim
/// would cost a duplicate if it needed no fallback for a key it cannot answer.
const ANSWER_READ: &str = "SELECT f.answer FROM hookclaim_deliveries AS f
    WHERE f.source = $1 AND f.delivery_id = $2 AND f.completed_at IS NOT NULL
      AND $3::bytea IS NOT NULL AND $4::text IS NOT NULL";

/// The same read as the scalar subquery the claim puts it in, beside the other two values but
/// with no function call: what the subquery costs, apart from the fallback it makes room for.
const ANSWER_SUBQUERY: &str = "SELECT (SELECT f.answer FROM hookclaim_deliveries AS f
    WHERE f.source = $1 AND f.delivery_id = $2 AND f.completed_at IS NOT NULL),
    $3::bytea IS NOT NULL, $4::text IS NOT NULL";

/// The redelivered set, `DUP_COUNT` rows from id `$1 + 1`, in the bare table.
const SEED_BARE: &str = "INSERT INTO bench_bare (source, delivery_id, payload)
    SELECT 'github', ($1::int8 + g)::text, $2 FROM generate_series(1, $3::int8) AS g";

/// The same set in `hookclaim_deliveries`, as the store-only claim leaves it: `done`, with the
/// payload, its hash (and so its answer) and the kept headers.
const SEED_CLAIM: &str = "INSERT INTO hookclaim_deliveries (source, delivery_id, id_origin,
        status, attempt, lease_owner, event_type, payload, payload_sha256, headers, completed_at,
        answer)
    SELECT 'github', ($1::int8 + g)::text, 'header', 'done', 1, 'seed', 'push', $2, $4,
           $5::jsonb, now(), $4
      FROM generate_series(1, $3::int8) AS g";

/// What the WAL and buffer counts are taken over: one client running the statement this many
/// times, so the WAL position's difference divided by it is the WAL per delivery.
const WAL_DELIVERIES: u64 = 2_000;

/// Prepares database `db` for the claim-versus-bare comparisons: the bare table beside the
/// ledger, the redelivered set in both, no autovacuum (so that no vacuum's WAL falls into a
/// measured window; both tables are vacuumed once after seeding instead, as autovacuum would
/// have).
async fn seed_statement_db(db: &tokio_postgres::Client) {
    db.batch_execute(&format!(
        "{BARE_TABLE};
         ALTER TABLE bench_bare SET (autovacuum_enabled = off);
         ALTER TABLE hookclaim_deliveries SET (autovacuum_enabled = off);
         CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
    ))
    .await
    .expect("bare table");
    let payload = common::body(DUP_BODY).into_bytes();
    let sha = Sha256::digest(&payload).to_vec();
    let headers = common::kept_headers_json(1);
    let (base, count) = (common::DUP_BASE as i64, common::DUP_COUNT as i64);
    db.execute_typed(
        SEED_BARE,
        &[
            (&base, Type::INT8),
            (&payload, Type::BYTEA),
            (&count, Type::INT8),
        ],
    )
    .await
    .expect("seed the bare table");
    db.execute_typed(
        SEED_CLAIM,
        &[
            (&base, Type::INT8),
            (&payload, Type::BYTEA),
            (&count, Type::INT8),
            (&sha, Type::BYTEA),
            (&headers, Type::TEXT),
        ],
    )
    .await
    .expect("seed the ledger");
    db.batch_execute("VACUUM ANALYZE bench_bare, hookclaim_deliveries")
        .await
        .expect("vacuum");
}

/// The pgbench scripts of the comparison: the bare insert and the store-only claim, each for a
/// new delivery and a duplicate, and a plain read of the key with the payload bound, the floor
/// of any statement that answers.
struct StatementScripts {
    bare_new: PathBuf,
    bare_dup: PathBuf,
    read_dup: PathBuf,
    /// [`ANSWER_READ`] and [`ANSWER_SUBQUERY`], on duplicates.
    answer_read: PathBuf,
    answer_subquery: PathBuf,
    scripts: Scripts,
}

impl StatementScripts {
    fn write(sql: &Sql) -> StatementScripts {
        let scripts = Scripts::write(sql);
        let new_id = "\\set id random(1, 9223372036854775806)\n";
        let dup_id = format!(
            "\\set id {} + random(1, {})\n",
            common::DUP_BASE,
            common::DUP_COUNT
        );
        let write = |name: &str, what: &str, id: &str, sql: &str, vars: &[&str]| {
            let path = scripts.dir.join(name);
            let text = format!(
                "-- hookclaim benchmark: {what}.\n{id}{}",
                with_vars(sql, vars)
            );
            std::fs::write(&path, text).expect("write script");
            path
        };
        let floor = "the bare dedupe insert, the floor the claim is held to";
        let bare = ["source", "id", "payload"];
        let claim = ["source", "id", "payload", "row_store"];
        StatementScripts {
            bare_new: write("bare_new.sql", floor, new_id, BARE_INSERT, &bare),
            bare_dup: write("bare_dup.sql", floor, &dup_id, BARE_INSERT, &bare),
            read_dup: write(
                "read_dup.sql",
                "a read of the key with the payload bound, what any answer costs at least",
                &dup_id,
                PLAIN_READ,
                &bare,
            ),
            answer_read: write(
                "answer_read.sql",
                "the claim's read of the stored answer alone, with the claim's four values bound",
                &dup_id,
                ANSWER_READ,
                &claim,
            ),
            answer_subquery: write(
                "answer_subquery.sql",
                "that read as the claim's scalar subquery, without the function behind it",
                &dup_id,
                ANSWER_SUBQUERY,
                &claim,
            ),
            scripts,
        }
    }

    fn script(&self, side: &str, kind: Kind) -> &Path {
        match (side, kind) {
            ("bare", Kind::New) => &self.bare_new,
            ("bare", Kind::Duplicate) => &self.bare_dup,
            (_, Kind::New) => &self.scripts.store_new,
            (_, Kind::Duplicate) => &self.scripts.store_dup,
        }
    }
}

async fn statements(ctx: &Ctx, sql: &Sql) -> Value {
    eprintln!("== statements: the claim versus the bare dedupe insert (pgbench -M prepared)");
    let url = create_db(ctx, "stmt").await;
    let db = support::connect(&url).await;
    seed_statement_db(&db).await;
    let written = StatementScripts::write(sql);
    let dir = written.scripts.dir.clone();
    let script = |side: &str, kind: Kind| written.script(side, kind);

    // WAL and buffers first, while every duplicate row is as vacuum left it.
    let mut costs = Vec::new();
    for kind in [Kind::New, Kind::Duplicate] {
        for side in ["bare", "claim"] {
            costs.push(statement_costs(ctx, &db, side, kind, script(side, kind)).await);
        }
    }

    // Twice: with pgbench and the server sharing both cores, and with the server alone on one
    // core (pgbench on the other), where the rate is the database's capacity for the statement
    // and pgbench's own cost per parameter no longer counts.
    let pin_possible = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let mut rows = Vec::new();
    for pinned in [false, true] {
        if pinned && !pin_possible {
            continue;
        }
        let placement = if pinned {
            "server on its own core"
        } else {
            "cores shared"
        };
        eprintln!("  -- {placement}");
        if pinned {
            pin_apart(ctx);
        }
        for &c in &CONCURRENCY {
            for kind in [Kind::New, Kind::Duplicate] {
                let (mut bare_runs, mut claim_runs) = (Vec::new(), Vec::new());
                let length = Length::Secs(ctx.secs);
                for _ in 0..ctx.rounds {
                    let bare = script("bare", kind);
                    bare_runs.push(pgbench(ctx, "stmt", bare, c, "prepared", length).await);
                    let claim = script("claim", kind);
                    claim_runs.push(pgbench(ctx, "stmt", claim, c, "prepared", length).await);
                }
                rows.push(statement_row(kind, c, placement, &bare_runs, &claim_runs));
            }
        }
        if pinned {
            unpin(ctx);
        }
    }
    json!({
        "bare_insert": BARE_INSERT,
        "scripts": dir,
        "wal_deliveries": WAL_DELIVERIES,
        "costs": costs,
        "rows": rows,
    })
}

/// The claim versus the bare insert in instructions per statement: the server runs under
/// callgrind, which counts what each backend executes, so the ratio is the server's work and
/// does not move with the machine's load. One connection; see `common::callgrind`.
async fn instructions(ctx: &Ctx, sql: &Sql) -> Value {
    eprintln!("== instructions: server instructions per statement (callgrind), claim versus bare");
    let counter = common::callgrind::Counter::new(
        &common::out_dir(),
        &support::PgServer::postgres_binary(),
        support::is_root().then_some("postgres"),
    );
    // No autovacuum: no worker's exit is mistaken for a backend's.
    let server = support::PgServer::start_wrapped(&["autovacuum = off"], &counter.wrapper());
    let admin = support::connect(&server.url("postgres")).await;
    admin
        .batch_execute("CREATE DATABASE counted")
        .await
        .expect("create database");
    let url = server.url("counted");
    let mut db = support::connect(&url).await;
    hookclaim::schema::migrate(&mut db).await.expect("migrate");
    seed_statement_db(&db).await;
    let written = StatementScripts::write(sql);
    let mut args: Vec<String> = ["-h", "127.0.0.1", "-U", "postgres", "-p"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    args.push(server.port.to_string());
    for (k, v) in pgbench_defines() {
        args.push("-D".into());
        args.push(format!("{k}={v}"));
    }
    args.push("counted".into());
    let count = |script: &Path| counter.per_statement(&ctx.pgbench, &args, script);
    let mut rows = Vec::new();
    for kind in [Kind::New, Kind::Duplicate] {
        let bare = count(written.script("bare", kind));
        let claim = count(written.script("claim", kind));
        eprintln!(
            "  {:9}: bare insert {bare:8.0} | claim {claim:8.0} instructions per statement ({:.3}×)",
            kind.name(),
            claim / bare
        );
        let mut row = json!({
            "kind": kind.name(),
            "bare": bare,
            "claim": claim,
            "claim_over_bare": claim / bare,
        });
        if kind == Kind::Duplicate {
            let read = count(&written.read_dup);
            eprintln!(
                "  {:9}: a plain read of the key with the payload bound {read:8.0} ({:.3}×)",
                "",
                read / bare
            );
            row["plain_read"] = json!(read);
            row["plain_read_over_bare"] = json!(read / bare);
            for (name, script, what) in [
                (
                    "answer_read",
                    &written.answer_read,
                    "the stored answer's read alone",
                ),
                (
                    "answer_subquery",
                    &written.answer_subquery,
                    "that read as a subquery, no function",
                ),
            ] {
                let n = count(script);
                eprintln!("  {:9}: {what} {n:8.0} ({:.3}×)", "", n / bare);
                row[name] = json!(n);
                row[format!("{name}_over_bare")] = json!(n / bare);
            }
        }
        rows.push(row);
    }
    let driver = driver_instructions(&counter, &url).await;
    json!({
        "connections": 1,
        "driver": driver,
        "plain_read": PLAIN_READ,
        "answer_read": ANSWER_READ,
        "answer_subquery": ANSWER_SUBQUERY,
        "rows": rows,
    })
}

/// The claim and the bare insert in instructions per statement as tokio-postgres sends them:
/// each prepared once, parameters and results in binary, each value bound once. The claim is
/// `store::claim` on a connection that prepared the handler's statements, exactly as the handler
/// runs it (store-only, first try); the bare insert is what a careful dedupe of one's own would
/// send. pgbench, above, binds every value as text (the 1 KB payload as 2 KB of hex) and each
/// occurrence of a variable again.
async fn driver_instructions(counter: &common::callgrind::Counter, url: &str) -> Value {
    use hookclaim::store::{self, Owner};
    let payload = common::body(DUP_BODY).into_bytes();
    let sha = Sha256::digest(&payload).to_vec();
    let headers = common::kept_headers(1);
    let owner = format!("{:032x}", fastrand::u128(..));
    let (payload, sha, headers, owner) = (&payload, &sha, &headers, &owner);
    let mut rows = Vec::new();
    for kind in [Kind::New, Kind::Duplicate] {
        let id = move || match kind {
            Kind::New => common::new_id(),
            Kind::Duplicate => common::dup_id(),
        };
        let bare = counter
            .per_statement_of(|n| async move {
                let c = support::connect(url).await;
                let types = [Type::TEXT, Type::TEXT, Type::BYTEA];
                let insert = c.prepare_typed(BARE_INSERT, &types).await.expect("prepare");
                for _ in 0..n {
                    let key = id().to_string();
                    let inserted = c
                        .execute(&insert, &[&"github", &key, payload])
                        .await
                        .expect("bare insert");
                    assert_eq!(inserted == 1, kind == Kind::New, "bare insert of {key}");
                }
            })
            .await;
        let claim = counter
            .per_statement_of(|n| async move {
                let mut conn = hookclaim::connection::Conn::new(support::connect(url).await, true);
                conn.prepare(store::HOT).await.expect("prepare");
                for _ in 0..n {
                    let key = id().to_string();
                    let delivery = common::github_delivery(&key, payload, sha, headers);
                    let claimant = common::claimant(owner);
                    let answer = store::claim(&conn, &delivery, claimant, true, Owner::New)
                        .await
                        .expect("claim");
                    let duplicate = answer == store::Claim::Done { same_payload: true };
                    assert_eq!(duplicate, kind == Kind::Duplicate, "{key}: {answer:?}");
                }
            })
            .await;
        eprintln!(
            "  {:9}: as the driver sends them: bare insert {bare:8.0} | claim {claim:8.0} ({:.3}×)",
            kind.name(),
            claim / bare
        );
        rows.push(json!({
            "kind": kind.name(),
            "bare": bare,
            "claim": claim,
            "claim_over_bare": claim / bare,
        }));
    }
    json!(rows)
}

/// One line of the claim-versus-bare table, printed and returned.
fn statement_row(kind: Kind, c: usize, placement: &str, bare: &[Run], claim: &[Run]) -> Value {
    let (b, k) = (side(bare), side(claim));
    let ratio = k["deliveries_per_s"].as_f64().unwrap_or(0.0)
        / b["deliveries_per_s"].as_f64().unwrap_or(f64::NAN);
    let server_us = |v: &Value| v["cpu_us_per_delivery"]["server"].as_f64().unwrap_or(0.0);
    eprintln!(
        "  {:9} c={c:2}: bare insert {:7.0}/s | claim {:7.0}/s | claim/bare {ratio:.2} | server CPU per delivery: bare {:5.1} µs, claim {:5.1} µs ({:.2}×)",
        kind.name(),
        b["deliveries_per_s"].as_f64().unwrap_or(0.0),
        k["deliveries_per_s"].as_f64().unwrap_or(0.0),
        server_us(&b),
        server_us(&k),
        server_us(&k) / server_us(&b),
    );
    json!({
        "kind": kind.name(),
        "clients": c,
        "placement": placement,
        "bare": b,
        "claim": k,
        "ratio": ratio,
    })
}

/// One client runs `script` `WAL_DELIVERIES` times; the WAL position's difference, and what
/// pg_stat_statements counted for the statement, per delivery.
async fn statement_costs(
    ctx: &Ctx,
    db: &tokio_postgres::Client,
    side: &str,
    kind: Kind,
    script: &Path,
) -> Value {
    let lsn = "SELECT pg_current_wal_insert_lsn()::text";
    // A checkpoint first writes every dirty buffer out, so that a statement that dirties a page
    // is counted even when an earlier writer (the seeding, vacuum, the previous run) had left
    // that page dirty.
    db.batch_execute("CHECKPOINT; SELECT pg_stat_statements_reset()")
        .await
        .expect("checkpoint, reset pg_stat_statements");
    let before: String = db.query_one(lsn, &[]).await.expect("lsn").get(0);
    let length = Length::Transactions(WAL_DELIVERIES);
    let run = pgbench(ctx, "stmt", script, 1, "prepared", length).await;
    let wal: f64 = db
        .query_one(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::text::pg_lsn)::float8",
            &[&before],
        )
        .await
        .expect("lsn diff")
        .get(0);
    // The statement as the client sent it: the bare insert, or the call of the claim function
    // (whose counters include the statements it runs).
    let pattern = if side == "bare" {
        "%INSERT INTO bench_bare %"
    } else {
        "%hookclaim_claim_unanswered(%"
    };
    let row = db
        .query_one(
            "SELECT coalesce(sum(calls), 0)::float8, coalesce(sum(wal_bytes), 0)::float8,
                    coalesce(sum(wal_records), 0)::float8,
                    coalesce(sum(shared_blks_dirtied), 0)::float8,
                    coalesce(sum(shared_blks_hit + shared_blks_read), 0)::float8,
                    coalesce(sum(total_exec_time), 0)::float8
               FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND toplevel AND query LIKE $1",
            &[&pattern],
        )
        .await
        .expect("pg_stat_statements");
    let calls: f64 = row.get(0);
    let per = |i: usize| row.get::<_, f64>(i) / calls.max(1.0);
    let n = run.deliveries as f64;
    let out = json!({
        "side": side,
        "kind": kind.name(),
        "deliveries": run.deliveries,
        "wal_bytes_per_delivery": wal / n.max(1.0),
        "statement": {
            "calls": calls,
            "wal_bytes": per(1),
            "wal_records": per(2),
            "shared_blks_dirtied": per(3),
            "shared_blks_accessed": per(4),
            "exec_us": per(5) * 1e3,
        },
    });
    eprintln!(
        "  {side:5} {:9}: {:6.1} WAL bytes per delivery (position), statement: {:6.1} WAL bytes, {:.2} records, {:.3} buffers dirtied, {:.1} µs executing",
        kind.name(),
        wal / n.max(1.0),
        per(1),
        per(2),
        per(3),
        per(5) * 1e3
    );
    out
}

// ---------------------------------------------------------------------------------------------
// Retention purge against concurrent claims

async fn purge(ctx: &Ctx) -> Value {
    let rows: i64 = common::env_or("HOOKCLAIM_BENCH_PURGE_ROWS", 1_000_000);
    eprintln!("== purge: {rows} finished rows");
    let url = create_db(ctx, "purge").await;
    let config = support::config(&url, &[]);
    let retention = hookclaim::environment::retention(&config, StoreOnly)
        .await
        .expect("retention cold start");
    let admin = support::connect(&url).await;

    let fill_secs = fill_old(&admin, rows).await;
    let alone = run_purge(&retention).await;
    eprintln!(
        "  purge alone: {} rows in {:.1} s = {:.0} rows/s (fill took {fill_secs:.1} s)",
        alone.0,
        alone.1,
        alone.0 as f64 / alone.1
    );
    assert_eq!(alone.0, rows as u64, "the purge deleted every old row");
    admin
        .batch_execute("VACUUM hookclaim_deliveries")
        .await
        .expect("vacuum");

    fill_old(&admin, rows).await;
    let window = Stop::After(common::secs(alone.1.clamp(5.0, 20.0)));
    let direct = Connection::Direct;
    let load = Load {
        clients: PURGE_CLAIMANTS,
        kind: Kind::New,
        every: Some(PURGE_CLAIM_EVERY),
    };
    let baseline = handler_run(ctx, &url, StoreOnly, direct, load, window).await;

    let stop = Arc::new(AtomicBool::new(false));
    let during = {
        let until = Stop::When(stop.clone());
        let claims = handler_run(ctx, &url, StoreOnly, direct, load, until);
        let purge = async {
            let r = run_purge(&retention).await;
            stop.store(true, Ordering::SeqCst);
            r
        };
        tokio::join!(claims, purge)
    };
    let (claims_during, (purged_during, purge_secs_during)) = during;
    let base = common::latency(baseline.latencies_ns.clone());
    let with = common::latency(claims_during.latencies_ns.clone());
    eprintln!(
        "  claims (c={PURGE_CLAIMANTS}) p99 {:.0} µs without, {:.0} µs during the purge ({:.2}x); purge under load {:.0} rows/s",
        base.p99_us,
        with.p99_us,
        with.p99_us / base.p99_us,
        purged_during as f64 / purge_secs_during
    );
    json!({
        "rows": rows,
        "payload_bytes": common::BODY_BYTES,
        "batch_size": config.retention.batch_size,
        "fill_secs": fill_secs,
        "purge_alone": {"purged": alone.0, "secs": alone.1, "rows_per_s": alone.0 as f64 / alone.1},
        "claimants": PURGE_CLAIMANTS,
        "claims_per_s_offered": PURGE_CLAIMANTS as f64 / PURGE_CLAIM_EVERY.as_secs_f64(),
        "claims_without_purge": {
            "deliveries_per_s": baseline.deliveries as f64 / baseline.secs,
            "latency": base,
        },
        "claims_during_purge": {
            "deliveries_per_s": claims_during.deliveries as f64 / claims_during.secs,
            "latency": with,
        },
        "purge_during_claims": {
            "purged": purged_during,
            "secs": purge_secs_during,
            "rows_per_s": purged_during as f64 / purge_secs_during,
        },
        "p99_ratio": with.p99_us / base.p99_us,
    })
}

/// Inserts `rows` `done` rows completed 40 days ago (1 KB payloads, oldest first by
/// `completed_at`), then vacuums and analyses, as a table that has been in use would be.
async fn fill_old(admin: &tokio_postgres::Client, rows: i64) -> f64 {
    let started = Instant::now();
    let body = common::body(42);
    let sha = <sha2::Sha256 as sha2::Digest>::digest(body.as_bytes()).to_vec();
    let headers = common::kept_headers_json(42);
    let chunk = 100_000i64;
    let mut from = 1i64;
    while from <= rows {
        let to = (from + chunk - 1).min(rows);
        admin
            .execute_typed(
                "INSERT INTO hookclaim_deliveries
                   (source, delivery_id, id_origin, status, attempt, lease_owner, event_type,
                    payload, payload_sha256, headers, received_at, updated_at, completed_at,
                    answer)
                 SELECT 'github', 'old-' || g, 'header', 'done', 1, md5(g::text), 'push',
                        $1, $2, $3::text::jsonb, now() - interval '41 days',
                        now() - interval '40 days', now() - interval '40 days' - g * interval '1 ms',
                        $2
                   FROM generate_series($4::int8, $5::int8) AS g",
                &[
                    (&body.as_bytes(), Type::BYTEA),
                    (&sha, Type::BYTEA),
                    (&headers, Type::TEXT),
                    (&from, Type::INT8),
                    (&to, Type::INT8),
                ],
            )
            .await
            .expect("insert old rows");
        from = to + 1;
    }
    admin
        .batch_execute("VACUUM ANALYZE hookclaim_deliveries")
        .await
        .expect("vacuum analyze");
    started.elapsed().as_secs_f64()
}

/// The retention function's purge command with the default horizon (30 days); returns rows
/// purged and seconds taken.
async fn run_purge<P: Processor>(retention: &hookclaim::retention::Retention<P>) -> (u64, f64) {
    let started = Instant::now();
    let report = retention
        .handle(
            json!({"command": "purge", "older_than_days": 30}),
            SystemTime::now() + Duration::from_secs(900),
        )
        .await
        .expect("purge");
    assert!(
        !report.stopped_early,
        "the purge finished within its deadline"
    );
    (report.purged, started.elapsed().as_secs_f64())
}

// ---------------------------------------------------------------------------------------------
// Profile loop

/// One environment, new store-only deliveries back to back: the hot path, for callgrind.
async fn profile(ctx: &Ctx) {
    let n: usize = common::env_or("HOOKCLAIM_BENCH_PROFILE_DELIVERIES", 2_000);
    let url = create_db(ctx, "profile").await;
    let wh = support::webhook(&url, &[], StoreOnly).await;
    let events: Vec<String> = (0..n)
        .map(|_| common::github_event(common::new_id()))
        .collect();
    let started = Instant::now();
    for e in &events {
        let resp = deliver(&wh, e).await;
        assert!(answered(&resp, "processed"));
    }
    eprintln!(
        "profile: {n} deliveries in {:.2} s",
        started.elapsed().as_secs_f64()
    );
}
