//! Secrets and credentials from AWS, against moto's server (a local endpoint reached through
//! the standard `AWS_ENDPOINT_URL`) and a real PostgreSQL: webhook secrets loaded once and
//! rotated without a redeploy, forged floods that cannot become Secrets Manager floods, secrets
//! that cannot be read again refused past twice their maximum age, a rotated database password,
//! RDS IAM tokens, what a cold start costs in AWS calls, and a build without the AWS parts
//! refusing the settings that need them.
//!
//! Calls are counted on the server side, from moto's request recording, as well as by the
//! code's own counters.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials as AwsCredentials;
use hookclaim::aws::rds_iam::rds_auth_token;
use hookclaim::aws::{Aws, RdsIamAuth};
use hookclaim::db::Credentials;
use hookclaim::processor::StoreOnly;
use hookclaim::webhook::Webhook;
use support::moto::{self, GET_SECRET_VALUE};
use support::{answer, github_request, Format, PgServer, TestDb};

/// A GitHub delivery `id` signed with `secret`.
fn signed(secret: &str, id: &str) -> lambda_http::Request {
    let body = format!(r#"{{"zen":"Rotate your keys.","id":"{id}"}}"#);
    support::github_request_with_secret(secret, Format::HttpApiV2, id, body.as_bytes(), false)
}

async fn status(hook: &Webhook<StoreOnly>, req: lambda_http::Request) -> u16 {
    answer(&hook.handle(req).await).0
}

/// Sends `n` deliveries at once from parallel tasks; returns their statuses.
async fn concurrently(
    hook: &Arc<Webhook<StoreOnly>>,
    n: usize,
    make: impl Fn(usize) -> lambda_http::Request,
) -> Vec<u16> {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let hook = hook.clone();
        let req = make(i);
        tasks.spawn(async move { answer(&hook.handle(req).await).0 });
    }
    tasks.join_all().await
}

/// Lets the cached secrets (or login) grow older than a refresh interval of `secs`.
async fn outlive_interval(secs: u64) {
    tokio::time::sleep(Duration::from_millis(secs * 1000 + 100)).await;
}

#[tokio::test]
async fn a_rotated_webhook_secret_is_picked_up_by_the_first_delivery_signed_with_it() {
    let moto = moto::server();
    let name = moto::unique_name("rotate");
    let arn = moto::create_secret(&name, r#"{"github": "old-secret"}"#).await;
    let db = TestDb::migrated().await;
    let hook = support::webhook(
        &db.url,
        &[
            ("HOOKCLAIM_SECRETS_ARN", &arn),
            ("HOOKCLAIM_SECRETS_REFRESH_SECS", "1"),
        ],
        StoreOnly,
    )
    .await;
    assert_eq!(status(&hook, signed("old-secret", "r1")).await, 200);
    assert_eq!(moto.count(GET_SECRET_VALUE, &name), 1, "read once");

    // Rotation in Secrets Manager: the new secret first, the old one still accepted.
    moto::put_secret_value(&arn, r#"{"github": ["new-secret", "old-secret"]}"#).await;
    outlive_interval(1).await;
    assert_eq!(status(&hook, signed("old-secret", "r2")).await, 200);
    assert_eq!(moto.count(GET_SECRET_VALUE, &name), 1, "cache still serves");

    let first_new = status(&hook, signed("new-secret", "r3")).await;

    assert_eq!(
        first_new, 200,
        "the first delivery signed with the new secret"
    );
    assert_eq!(hook.keys().fetch_count(), 2);
    assert_eq!(moto.count(GET_SECRET_VALUE, &name), 2, "one refresh");
    // Both secrets now verify from the cache.
    assert_eq!(status(&hook, signed("new-secret", "r4")).await, 200);
    assert_eq!(status(&hook, signed("old-secret", "r5")).await, 200);
    assert_eq!(moto.count(GET_SECRET_VALUE, &name), 2);
}

#[tokio::test]
async fn a_revoked_secret_stops_verifying_once_the_cache_is_older_than_its_maximum_age() {
    let moto = moto::server();
    let name = moto::unique_name("revoke");
    let arn = moto::create_secret(&name, r#"{"github": ["kept", "leaked"]}"#).await;
    let db = TestDb::migrated().await;
    let hook = support::webhook(
        &db.url,
        &[
            ("HOOKCLAIM_SECRETS_ARN", &arn),
            ("HOOKCLAIM_SECRETS_REFRESH_SECS", "1"),
            ("HOOKCLAIM_SECRETS_MAX_AGE_SECS", "2"),
        ],
        StoreOnly,
    )
    .await;
    assert_eq!(status(&hook, signed("leaked", "v1")).await, 200);

    // The leaked secret is revoked; no delivery signed with it fails in the meantime, so only
    // the maximum age can make the environment read the secrets again.
    moto::put_secret_value(&arn, r#"{"github": ["kept"]}"#).await;
    outlive_interval(2).await;

    assert_eq!(status(&hook, signed("leaked", "v2")).await, 401);
    assert_eq!(status(&hook, signed("kept", "v3")).await, 200);
    assert_eq!(
        moto.count(GET_SECRET_VALUE, &name),
        2,
        "one read for the age"
    );
}

#[tokio::test]
async fn secrets_that_cannot_be_read_again_stop_verifying_at_twice_their_maximum_age() {
    let moto = moto::server();
    let name = moto::unique_name("stale");
    let arn = moto::create_secret(&name, r#"{"github": "cached-secret"}"#).await;
    let db = TestDb::migrated().await;
    let hook = support::webhook(
        &db.url,
        &[
            ("HOOKCLAIM_SECRETS_ARN", &arn),
            ("HOOKCLAIM_SECRETS_REFRESH_SECS", "1"),
            ("HOOKCLAIM_SECRETS_MAX_AGE_SECS", "2"),
        ],
        StoreOnly,
    )
    .await;
    // Read at the cold start.
    assert_eq!(status(&hook, signed("cached-secret", "stale-1")).await, 200);

    // From now on the secrets cannot be read again (deleted here; an outage or a revoked
    // permission looks the same to the function), and the cached one may have been revoked.
    moto::delete_secret(&arn).await;
    let reads_before = moto.count(GET_SECRET_VALUE, &name);

    // Past the maximum age, within the grace period as long again: the read fails, the cached
    // secret still serves.
    outlive_interval(2).await;
    let within_grace = status(&hook, signed("cached-secret", "stale-2")).await;
    // Past twice the maximum age: refused, and nothing is stored.
    outlive_interval(2).await;
    let past_grace = hook.handle(signed("cached-secret", "stale-3")).await;
    let reads = moto.count(GET_SECRET_VALUE, &name) - reads_before;

    println!(
        "[aws] secrets unreadable, max age 2 s: at 2 s {within_grace}, at 4 s {:?} \
         (Retry-After {:?}); {reads} failed reads",
        answer(&past_grace),
        past_grace.headers().get("retry-after"),
    );
    assert_eq!(within_grace, 200);
    assert_eq!(
        answer(&past_grace),
        (
            503,
            serde_json::json!({"status": "unavailable", "error": "temporarily unavailable"})
        )
    );
    assert_eq!(
        reads, 2,
        "one failed read past the maximum age, one past the grace"
    );
    let c = db.client().await;
    assert!(support::row(&c, "github", "stale-3").await.is_none());
    assert!(support::row(&c, "github", "stale-2").await.is_some());
}

#[test]
fn a_refresh_interval_above_the_maximum_age_stops_the_cold_start_naming_it() {
    let mut env = support::local_env();
    env.insert("DATABASE_URL".into(), "postgres://u@localhost/db".into());
    env.insert("HOOKCLAIM_SECRETS_ARN".into(), "arn:hooks".into());
    let read = |refresh: &str, max_age: &str| {
        let mut env = env.clone();
        env.insert("HOOKCLAIM_SECRETS_REFRESH_SECS".into(), refresh.into());
        env.insert("HOOKCLAIM_SECRETS_MAX_AGE_SECS".into(), max_age.into());
        hookclaim::Config::from_lookup(|k| env.get(k).cloned())
    };
    assert!(read("300", "300").is_ok(), "equal is allowed");
    assert!(read("60", "300").is_ok());
    let e = read("301", "300").unwrap_err();
    println!("[aws] refresh 301 s, max age 300 s: {e}");
    assert_eq!(e.setting, "HOOKCLAIM_SECRETS_REFRESH_SECS");
    assert!(e.problem.contains("HOOKCLAIM_SECRETS_MAX_AGE_SECS"), "{e}");
    // The default interval (60 s) with a shorter maximum age is refused too.
    let mut short = env.clone();
    short.insert("HOOKCLAIM_SECRETS_MAX_AGE_SECS".into(), "30".into());
    let e = hookclaim::Config::from_lookup(|k| short.get(k).cloned()).unwrap_err();
    assert_eq!(e.setting, "HOOKCLAIM_SECRETS_REFRESH_SECS", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_racing_one_refresh_all_verify_with_the_rotated_secret() {
    let moto = moto::server();
    let name = moto::unique_name("race");
    let arn = moto::create_secret(&name, r#"{"github": "before"}"#).await;
    let db = TestDb::migrated().await;
    let hook = Arc::new(
        support::webhook(
            &db.url,
            &[
                ("HOOKCLAIM_SECRETS_ARN", &arn),
                ("HOOKCLAIM_SECRETS_REFRESH_SECS", "1"),
            ],
            StoreOnly,
        )
        .await,
    );
    assert_eq!(status(&hook, signed("before", "warm")).await, 200);
    moto::put_secret_value(&arn, r#"{"github": ["after"]}"#).await;
    outlive_interval(1).await;

    // All fail against the cached secret at about the same time; one refreshes, the others
    // wait for it and verify with its result.
    let statuses = concurrently(&hook, 50, |i| signed("after", &format!("race-{i}"))).await;

    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(hook.keys().fetch_count(), 2);
    assert_eq!(
        moto.count(GET_SECRET_VALUE, &name),
        2,
        "one refresh for all"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_1000_forged_deliveries_refreshes_the_secrets_at_most_once_per_interval() {
    const INTERVAL: u64 = 2;
    let moto = moto::server();
    let name = moto::unique_name("forged");
    let arn = moto::create_secret(&name, r#"{"github": "the-real-secret"}"#).await;
    let db = TestDb::migrated().await;
    let hook = Arc::new(
        support::webhook(
            &db.url,
            &[
                ("HOOKCLAIM_SECRETS_ARN", &arn),
                ("HOOKCLAIM_SECRETS_REFRESH_SECS", &INTERVAL.to_string()),
            ],
            StoreOnly,
        )
        .await,
    );
    assert_eq!(status(&hook, signed("the-real-secret", "real")).await, 200);
    let allowed_windows = |elapsed: Duration| 1 + elapsed.as_secs() / INTERVAL;

    // 1,000 at once (as many environments' worth of concurrency as a test can muster)...
    outlive_interval(INTERVAL).await;
    let reads_before = moto.count(GET_SECRET_VALUE, &name);
    let started = Instant::now();
    let statuses = concurrently(&hook, 1000, |i| signed("a-guess", &format!("f{i}"))).await;
    let concurrent_elapsed = started.elapsed();
    let concurrent_reads = moto.count(GET_SECRET_VALUE, &name) - reads_before;

    // ...then 1,000 one after another, as one Lambda environment receives them.
    outlive_interval(INTERVAL).await;
    let reads_before = moto.count(GET_SECRET_VALUE, &name);
    let started = Instant::now();
    let mut sequential = Vec::new();
    for i in 0..1000 {
        sequential.push(status(&hook, signed("a-guess", &format!("s{i}"))).await);
    }
    let sequential_elapsed = started.elapsed();
    let sequential_reads = moto.count(GET_SECRET_VALUE, &name) - reads_before;

    println!(
        "forged burst, refresh interval {INTERVAL} s: 1000 concurrent in {concurrent_elapsed:?} \
         -> {concurrent_reads} GetSecretValue; 1000 sequential in {sequential_elapsed:?} -> \
         {sequential_reads} GetSecretValue"
    );
    assert!(statuses.iter().chain(&sequential).all(|s| *s == 401));
    for (reads, elapsed) in [
        (concurrent_reads, concurrent_elapsed),
        (sequential_reads, sequential_elapsed),
    ] {
        assert!(
            (1..=allowed_windows(elapsed) as usize).contains(&reads),
            "{reads} reads in {elapsed:?}"
        );
    }
    // The code's own count agrees with the server's.
    assert_eq!(
        hook.keys().fetch_count() as usize,
        moto.count(GET_SECRET_VALUE, &name)
    );
}

/// A private server on which role `app` must give its password (scram), while `postgres`
/// keeps trust for the test's own administration.
fn server_with_password_auth() -> PgServer {
    let dir = std::env::temp_dir().join(format!("hookclaim-hba-{:08x}", fastrand::u32(..)));
    std::fs::create_dir_all(&dir).expect("hba dir");
    let hba = dir.join("pg_hba.conf");
    std::fs::write(
        &hba,
        "host all postgres 127.0.0.1/32 trust\nhost all app 127.0.0.1/32 scram-sha-256\n",
    )
    .expect("write pg_hba.conf");
    PgServer::start_with(&[&format!("hba_file = '{}'", hba.display())])
}

/// Role `app` with `password`, owning database `hooks`.
async fn create_app_database(admin: &tokio_postgres::Client, password: &str) {
    admin
        .batch_execute(&format!("CREATE ROLE app LOGIN PASSWORD '{password}'"))
        .await
        .unwrap();
    admin
        .batch_execute("CREATE DATABASE hooks OWNER app")
        .await
        .unwrap();
}

/// An RDS-managed secret for role `app` on `server`.
fn rds_secret(server: &PgServer, password: &str) -> String {
    serde_json::json!({
        "engine": "postgres",
        "username": "app",
        "password": password,
        "host": "127.0.0.1",
        "port": server.port,
        "dbname": "hooks",
    })
    .to_string()
}

fn refused_logins(server: &PgServer) -> usize {
    server
        .log()
        .matches(r#"password authentication failed for user "app""#)
        .count()
}

async fn terminate_app_backends(admin: &tokio_postgres::Client) -> i64 {
    admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'app'",
            &[],
        )
        .await
        .expect("terminate")
        .get(0)
}

fn secret_reads(hook: &Webhook<StoreOnly>) -> u64 {
    match hook.database().credentials() {
        Credentials::Secret(secret) => secret.fetch_count(),
        _ => panic!("the database login should come from the secret"),
    }
}

#[tokio::test]
async fn a_rotated_database_password_is_picked_up_after_one_refused_connection() {
    let moto = moto::server();
    let server = server_with_password_auth();
    let admin = support::connect(&server.url("postgres")).await;
    create_app_database(&admin, "first-password").await;
    let name = moto::unique_name("db-rotate");
    let arn = moto::create_secret(&name, &rds_secret(&server, "first-password")).await;
    let hook = support::webhook(
        &server.url("hooks"),
        &[
            ("DATABASE_SECRET_ARN", &arn),
            ("DATABASE_SECRET_REFRESH_SECS", "1"),
        ],
        StoreOnly,
    )
    .await;
    let first = hook
        .handle(github_request(Format::HttpApiV2, "p1", b"{}", false))
        .await;
    assert_eq!(answer(&first).0, 200, "{}", server.log());
    let connects = hook.database().connect_count();

    // Rotation: the password changes in the database and in the secret; the function's
    // connection is dropped (as a failover or idle timeout would) while it is frozen.
    admin
        .batch_execute("ALTER ROLE app PASSWORD 'second-password'")
        .await
        .unwrap();
    moto::put_secret_value(&arn, &rds_secret(&server, "second-password")).await;
    assert_eq!(terminate_app_backends(&admin).await, 1);
    outlive_interval(1).await;
    let refused_before = refused_logins(&server);

    let second = hook
        .handle(github_request(Format::HttpApiV2, "p2", b"{}", false))
        .await;

    assert_eq!(answer(&second).0, 200, "{}", server.log());
    assert_eq!(refused_logins(&server) - refused_before, 1, "one refused");
    assert_eq!(moto.count(GET_SECRET_VALUE, &name), 2, "one refetch");
    assert_eq!(secret_reads(&hook), 2);
    assert_eq!(hook.database().connect_count(), connects + 1);
    let user: String = admin
        .query_one(
            "SELECT usename::text FROM pg_stat_activity WHERE datname = 'hooks'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(user, "app");
}

#[tokio::test]
async fn a_database_refusing_the_login_costs_at_most_one_secret_read_per_interval() {
    const INTERVAL: u64 = 2;
    // Each refusal costs a SCRAM exchange (slow in a debug build), so fewer than elsewhere.
    const DELIVERIES: usize = 60;
    let moto = moto::server();
    let server = server_with_password_auth();
    let admin = support::connect(&server.url("postgres")).await;
    create_app_database(&admin, "right").await;
    let name = moto::unique_name("db-stale");
    let arn = moto::create_secret(&name, &rds_secret(&server, "right")).await;
    let hook = support::webhook(
        &server.url("hooks"),
        &[
            ("DATABASE_SECRET_ARN", &arn),
            ("DATABASE_SECRET_REFRESH_SECS", &INTERVAL.to_string()),
        ],
        StoreOnly,
    )
    .await;
    assert_eq!(
        answer(
            &hook
                .handle(github_request(Format::HttpApiV2, "ok", b"{}", false))
                .await
        )
        .0,
        200
    );
    // The password changes in the database, but the secret is not updated (a rotation half
    // done, or a mistake): every connect is refused, and reading the secret does not help.
    admin
        .batch_execute("ALTER ROLE app PASSWORD 'changed-elsewhere'")
        .await
        .unwrap();
    assert_eq!(terminate_app_backends(&admin).await, 1);
    outlive_interval(INTERVAL).await;
    let refused_before = refused_logins(&server);

    let started = Instant::now();
    let mut statuses = Vec::new();
    for i in 0..DELIVERIES {
        let req = github_request(Format::HttpApiV2, &format!("x{i}"), b"{}", false);
        statuses.push(answer(&hook.handle(req).await).0);
    }
    let elapsed = started.elapsed();

    let reads = moto.count(GET_SECRET_VALUE, &name) - 1;
    let refused = refused_logins(&server) - refused_before;
    println!(
        "{DELIVERIES} deliveries against a stale login in {elapsed:?}: {refused} refused \
         connections, {reads} secret reads"
    );
    assert!(statuses.iter().all(|s| *s == 503), "{statuses:?}");
    assert_eq!(
        refused, DELIVERIES,
        "one attempt each; an unchanged secret is not retried"
    );
    assert!(
        (1..=(1 + elapsed.as_secs() / INTERVAL) as usize).contains(&reads),
        "{reads} reads in {elapsed:?}"
    );
    assert_eq!(secret_reads(&hook) as usize, reads + 1);
}

#[tokio::test]
async fn a_cold_start_reads_each_secret_once_and_the_next_1000_deliveries_call_aws_never() {
    let moto = moto::server();
    let db = TestDb::migrated().await;
    let pg: tokio_postgres::Config = db.url.parse().unwrap();
    let hooks_name = moto::unique_name("cold-hooks");
    let db_name = moto::unique_name("cold-db");
    let hooks_arn = moto::create_secret(&hooks_name, r#"{"github": ["cold-secret"]}"#).await;
    let db_arn = moto::create_secret(
        &db_name,
        &serde_json::json!({
            "engine": "postgres", "username": "postgres", "password": "unused-with-trust",
            "host": "127.0.0.1", "port": pg.get_ports()[0], "dbname": db.name,
        })
        .to_string(),
    )
    .await;
    let calls = || moto.calls_naming(&hooks_name).len() + moto.calls_naming(&db_name).len();
    let created = calls();

    let hook = support::webhook(
        &db.url,
        &[
            ("HOOKCLAIM_SECRETS_ARN", &hooks_arn),
            ("DATABASE_SECRET_ARN", &db_arn),
        ],
        StoreOnly,
    )
    .await;
    let at_init = calls() - created;
    assert_eq!(status(&hook, signed("cold-secret", "first")).await, 200);
    let at_first = calls() - created - at_init;
    for i in 0..1000 {
        assert_eq!(
            status(&hook, signed("cold-secret", &format!("n{i}"))).await,
            200
        );
    }
    let at_next_1000 = calls() - created - at_init - at_first;

    println!(
        "AWS calls: cold start {at_init} (GetSecretValue: webhook secrets {}, database {}), \
         first delivery {at_first}, next 1000 deliveries {at_next_1000}",
        moto.count(GET_SECRET_VALUE, &hooks_name),
        moto.count(GET_SECRET_VALUE, &db_name),
    );
    assert_eq!(at_init, 2);
    assert_eq!(moto.count(GET_SECRET_VALUE, &hooks_name), 1);
    assert_eq!(moto.count(GET_SECRET_VALUE, &db_name), 1);
    assert_eq!(at_first, 0);
    assert_eq!(at_next_1000, 0);
    // Every call moto has seen, from any test of this binary (the destinations' tests share the
    // server), went to a service hookclaim calls on purpose, and every Secrets Manager call
    // named a secret: no call of another kind (STS, SSO…) went uncounted above.
    const CALLED: [&str; 4] = [
        "secretsmanager.",
        "AmazonSQS.",
        "AWSEvents.",
        "AWSStepFunctions.",
    ];
    for call in moto.calls() {
        assert!(
            CALLED
                .iter()
                .any(|service| call.target.starts_with(service)),
            "{call:?}"
        );
        assert!(
            !call.target.starts_with("secretsmanager.") || call.secret().is_some(),
            "{call:?}"
        );
    }
}

#[test]
fn a_build_without_the_aws_parts_refuses_at_cold_start_each_setting_that_needs_one() {
    // The deployed-profile fixture is built with `default-features = false`: no Secrets
    // Manager, RDS IAM, destinations or forwarder (tests/it/deployed.rs builds it too).
    let bins =
        support::emulator::build_binaries("hookclaim-fixture-faulty", &["faulty-webhook"], true);
    const DESTINATIONS: &str =
        r#"{"github":[{"kind":"sqs","queue_url":"https://sqs.eu-west-1.amazonaws.com/1/q"}]}"#;
    // The settings, the one named in the error, and the feature it needs.
    type Case = (
        &'static [(&'static str, &'static str)],
        &'static str,
        &'static str,
    );
    let cases: &[Case] = &[
        (
            &[(
                "HOOKCLAIM_SECRETS_ARN",
                "arn:aws:secretsmanager:eu-west-1:1:secret:hooks",
            )],
            "HOOKCLAIM_SECRETS_ARN",
            "secrets-manager",
        ),
        (
            &[(
                "DATABASE_SECRET_ARN",
                "arn:aws:secretsmanager:eu-west-1:1:secret:db",
            )],
            "DATABASE_SECRET_ARN",
            "secrets-manager",
        ),
        (
            &[("DATABASE_IAM_AUTH", "true"), ("DATABASE_TLS", "require")],
            "DATABASE_IAM_AUTH",
            "rds-iam",
        ),
        (
            &[
                ("HOOKCLAIM_PROCESSOR", "destinations"),
                ("HOOKCLAIM_DESTINATIONS", DESTINATIONS),
            ],
            "HOOKCLAIM_PROCESSOR",
            "destinations",
        ),
        (
            &[
                ("HOOKCLAIM_PROCESSOR", "forward"),
                ("FORWARD_URL", "https://hooks.example/in"),
            ],
            "HOOKCLAIM_PROCESSOR",
            "forward",
        ),
    ];
    for (settings, setting, feature) in cases {
        let out = std::process::Command::new(&bins["faulty-webhook"])
            .env_clear()
            .envs(support::local_env())
            .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
            .envs(settings.iter().copied())
            .output()
            .expect("run the fixture's webhook binary");
        let printed = String::from_utf8_lossy(&out.stdout);
        let line = printed
            .lines()
            .find(|l| l.contains("bad configuration"))
            .unwrap_or_else(|| panic!("{settings:?}: no configuration error in {printed}"));
        println!("[aws] without the AWS parts, {setting}: {line}");
        assert!(!out.status.success(), "{settings:?}");
        let error: serde_json::Value = serde_json::from_str(line).unwrap();
        let error = error["error"].as_str().unwrap();
        assert!(error.starts_with(&format!("{setting}: ")), "{error}");
        assert!(error.contains(&format!("`{feature}` feature")), "{error}");
    }
}

/// 2026-01-01T00:00:00Z.
const SIGNED_AT: u64 = 1_767_225_600;

/// The same token from botocore's own (pure-Python) SigV4 presigner, with its clock fixed.
fn botocore_token(
    credentials: &AwsCredentials,
    region: &str,
    host: &str,
    port: u16,
    user: &str,
) -> String {
    const SCRIPT: &str = r#"
import datetime, sys, botocore.auth, botocore.session
# botocore prefers the CRT signer when awscrt is installed; use its own Python one.
botocore.auth.AUTH_TYPE_MAPS["v4-query"] = botocore.auth.SigV4QueryAuth
now = datetime.datetime.fromtimestamp(int(sys.argv[1]), datetime.timezone.utc).replace(tzinfo=None)
botocore.auth.get_current_datetime = lambda *a, **k: now
key, secret, token, region, host, port, user = sys.argv[2:]
client = botocore.session.get_session().create_client(
    "rds", region_name=region, aws_access_key_id=key, aws_secret_access_key=secret,
    aws_session_token=token or None)
print(client.generate_db_auth_token(host, int(port), user))
"#;
    let mut cmd = std::process::Command::new("python3");
    cmd.arg("-c")
        .arg(SCRIPT)
        .arg(SIGNED_AT.to_string())
        .arg(credentials.access_key_id())
        .arg(credentials.secret_access_key())
        .arg(credentials.session_token().unwrap_or_default())
        .args([region, host, &port.to_string(), user]);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().expect(
        "python3 with botocore (installed with moto: pip install \"moto[server]\") is required",
    );
    assert!(
        out.status.success(),
        "botocore failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn an_iam_token_has_the_documented_form_and_matches_botocores() {
    let at = UNIX_EPOCH + Duration::from_secs(SIGNED_AT);
    let host = "mydb.123456789012.us-east-1.rds.amazonaws.com";
    let plain = AwsCredentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        None,
        "test",
    );

    let token = rds_auth_token(&plain, "us-east-1", host, 5432, "iam_user", at).unwrap();

    let (endpoint, query) = token.split_once("/?").expect("host:port/?query");
    assert_eq!(endpoint, format!("{host}:5432"), "no scheme, host and port");
    let pairs: Vec<(&str, &str)> = query
        .split('&')
        .map(|p| p.split_once('=').expect("name=value"))
        .collect();
    let names: Vec<&str> = pairs.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "Action",
            "DBUser",
            "X-Amz-Algorithm",
            "X-Amz-Credential",
            "X-Amz-Date",
            "X-Amz-Expires",
            "X-Amz-SignedHeaders",
            "X-Amz-Signature"
        ]
    );
    let value = |n: &str| pairs.iter().find(|(k, _)| *k == n).unwrap().1;
    assert_eq!(value("Action"), "connect");
    assert_eq!(value("DBUser"), "iam_user");
    assert_eq!(value("X-Amz-Algorithm"), "AWS4-HMAC-SHA256");
    assert_eq!(
        value("X-Amz-Credential"),
        "AKIDEXAMPLE%2F20260101%2Fus-east-1%2Frds-db%2Faws4_request"
    );
    assert_eq!(value("X-Amz-Date"), "20260101T000000Z");
    assert_eq!(value("X-Amz-Expires"), "900");
    assert_eq!(value("X-Amz-SignedHeaders"), "host");
    let signature = value("X-Amz-Signature");
    assert!(signature.len() == 64 && signature.bytes().all(|b| b.is_ascii_hexdigit()));

    // Independently: botocore's own presigner computes the same token, byte for byte. The
    // values recorded here were produced by `botocore_token` with botocore 1.43 (and agree with
    // its CRT signer).
    assert_eq!(
        token,
        "mydb.123456789012.us-east-1.rds.amazonaws.com:5432/?Action=connect&DBUser=iam_user\
         &X-Amz-Algorithm=AWS4-HMAC-SHA256\
         &X-Amz-Credential=AKIDEXAMPLE%2F20260101%2Fus-east-1%2Frds-db%2Faws4_request\
         &X-Amz-Date=20260101T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host\
         &X-Amz-Signature=a36defd1bc3602e81d21849b3bb118f88c27b588ecde8b5ff5784418e80aeef8"
    );
    assert_eq!(
        token,
        botocore_token(&plain, "us-east-1", host, 5432, "iam_user")
    );

    // With a session token (as Lambda's credentials always have), another region, and a user
    // name that needs encoding.
    let session = AwsCredentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        Some("FQoG/token+with=chars".into()),
        None,
        "test",
    );
    let token =
        rds_auth_token(&session, "eu-west-1", "mydb.example", 6543, "app user", at).unwrap();
    assert!(token.ends_with(
        "&X-Amz-Security-Token=FQoG%2Ftoken%2Bwith%3Dchars\
         &X-Amz-Signature=9cad0c198fa8a5b742511962e8af5fbf4d832a8d6375bb803f176828cd83a7a1"
    ));
    assert_eq!(
        token,
        botocore_token(&session, "eu-west-1", "mydb.example", 6543, "app user")
    );
}

fn amz_date(token: &str) -> &str {
    let start = token.find("X-Amz-Date=").expect("X-Amz-Date") + "X-Amz-Date=".len();
    &token[start..start + 16]
}

fn password(pg: &tokio_postgres::Config) -> String {
    String::from_utf8(pg.get_password().expect("a password").to_vec()).unwrap()
}

#[tokio::test]
async fn with_iam_auth_each_connect_signs_a_fresh_token_from_the_environments_credentials() {
    let moto = moto::server();
    let name = moto::unique_name("iam-db");
    let arn = moto::create_secret(
        &name,
        r#"{"engine":"postgres","username":"master","password":"not-used-with-iam",
            "host":"db.cluster-x.us-east-1.rds.amazonaws.com","port":5432,"dbname":"hooks"}"#,
    )
    .await;
    let config = support::config(
        "postgres://unused@127.0.0.1/unused",
        &[
            ("DATABASE_SECRET_ARN", &arn),
            ("DATABASE_IAM_AUTH", "true"),
            ("DATABASE_IAM_USER", "hookclaim"),
            ("DATABASE_TLS", "require"),
        ],
    );
    let db = hookclaim::environment::database(&config).await.unwrap();
    let Credentials::IamToken(_) = db.credentials() else {
        panic!("DATABASE_IAM_AUTH=true should sign IAM tokens");
    };

    let day_before = utc_day(SystemTime::now());
    let first = db.credentials().login(&db.settings().pg).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = db.credentials().login(&db.settings().pg).await.unwrap();
    let day_after = utc_day(SystemTime::now());

    // Host and port from the secret, the user from DATABASE_IAM_USER, the credentials and
    // region from the environment (AWS_ACCESS_KEY_ID, AWS_REGION), signed at connect time.
    let token = password(&first);
    assert!(
        token.starts_with(
            "db.cluster-x.us-east-1.rds.amazonaws.com:5432/?Action=connect&DBUser=hookclaim&"
        ),
        "{token}"
    );
    let day = &amz_date(&token)[..8];
    assert!(day == day_before || day == day_after, "signed now: {token}");
    assert!(
        token.contains(&format!(
            "X-Amz-Credential=AKIAHOOKCLAIMTEST%2F{day}%2F{}%2Frds-db%2Faws4_request",
            moto::REGION
        )),
        "{token}"
    );
    assert_eq!(first.get_user(), Some("hookclaim"));
    assert_ne!(
        amz_date(&token),
        amz_date(&password(&second)),
        "fresh each time"
    );
    // Only the secret read at cold start; signing calls nothing.
    assert_eq!(moto.count(GET_SECRET_VALUE, &name), 1);

    // The same from the region and credentials alone, without the configuration.
    let iam = RdsIamAuth::new(Arc::new(Aws::default())).await.unwrap();
    let direct = iam.token("db.example", 5432, "hookclaim").await.unwrap();
    assert!(direct.contains("X-Amz-Credential=AKIAHOOKCLAIMTEST%2F"));
}

/// `YYYYMMDD` (UTC) of `t`, as in a SigV4 credential scope.
fn utc_day(t: SystemTime) -> String {
    let days = t.duration_since(UNIX_EPOCH).unwrap().as_secs() / 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}")
}

/// The secret RDS manages for a user: only the login, no host, port or database name.
fn rds_managed_secret(password: &str) -> String {
    serde_json::json!({"username": "app", "password": password}).to_string()
}

#[tokio::test]
async fn an_rds_managed_secret_with_only_username_and_password_connects_with_the_host_settings() {
    let moto = moto::server();
    let server = server_with_password_auth();
    let admin = support::connect(&server.url("postgres")).await;
    create_app_database(&admin, "managed-password").await;
    let name = moto::unique_name("db-managed");
    let arn = moto::create_secret(&name, &rds_managed_secret("managed-password")).await;
    let port = server.port.to_string();
    let hook = support::webhook(
        // No DATABASE_URL login is used: the secret wins, the settings say where the server is.
        "postgres://unused@192.0.2.1:1/unused",
        &[
            ("DATABASE_SECRET_ARN", &arn),
            ("DATABASE_HOST", "127.0.0.1"),
            ("DATABASE_PORT", &port),
            ("DATABASE_NAME", "hooks"),
        ],
        StoreOnly,
    )
    .await;

    let resp = hook
        .handle(github_request(Format::HttpApiV2, "managed-1", b"{}", false))
        .await;

    assert_eq!(answer(&resp).0, 200, "{:?} {}", answer(&resp), server.log());
    assert_eq!(moto.count(GET_SECRET_VALUE, &name), 1);
    let (user, db): (String, String) = admin
        .query_one(
            "SELECT usename::text, datname::text FROM pg_stat_activity WHERE usename = 'app'",
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!((user.as_str(), db.as_str()), ("app", "hooks"));
    println!(
        "[aws] RDS-managed secret {{username, password}} + DATABASE_HOST/PORT/NAME: 200, \
         connected as {user} to {db}"
    );
}

#[tokio::test]
async fn an_rds_managed_secret_without_a_host_setting_stops_the_cold_start_naming_database_host() {
    moto::server();
    let name = moto::unique_name("db-no-host");
    let arn = moto::create_secret(&name, &rds_managed_secret("whatever")).await;
    let config = support::config(
        "postgres://unused@127.0.0.1/unused",
        &[("DATABASE_SECRET_ARN", &arn)],
    );

    let err = match hookclaim::Webhook::from_config(&config, StoreOnly).await {
        Ok(_) => panic!("the cold start should fail without a host"),
        Err(e) => e.to_string(),
    };

    assert!(err.starts_with("DATABASE_HOST: not set"), "{err}");
    assert!(err.contains("RDS-managed secret"), "{err}");
    assert!(
        !err.contains("whatever"),
        "the password never appears: {err}"
    );
    println!("[aws] cold start without a host: {err}");
}
