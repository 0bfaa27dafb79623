//! The deployed split of database roles, on a real PostgreSQL: `sql/roles.sql` (run with psql,
//! as an administrator would) makes an owner and an application role; the owner applies the
//! migrations through the retention function's `migrate` command; the webhook function runs as
//! the application role, which has no `CREATE`, with `HOOKCLAIM_MIGRATE=never` (the template's
//! setting), and gives every row of the response table. A schema that is behind answers 503 and
//! is logged, without failing the cold start, until the owner has migrated. The application role
//! records destinations' progress, and the owner's purge removes it with its delivery.

use crate::support;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use hookclaim::ledger::{self, Claimant, NewDelivery};
use hookclaim::processor::{Processor, StoreOnly};
use serde_json::json;
use support::scripted::Scripted;
use support::{answer, github_request, row, Format, TestDb};

/// The two roles `sql/roles.sql` made for one test database.
struct Roles {
    owner: String,
    app: String,
    /// The owner's login, as the retention function has it.
    owner_url: String,
    /// The application role's login, as the webhook function has it.
    app_url: String,
}

/// psql: on PATH, or next to the server binaries the harness uses.
fn psql() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("psql"))
        .find(|p| p.exists());
    let bundled = || {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| Some(e.ok()?.path().join("bin/psql")))
            .filter(|p| p.exists())
            .collect();
        found.sort();
        found.pop()
    };
    on_path.or_else(bundled).unwrap_or_else(|| {
        panic!("psql is needed to run sql/roles.sql (Debian/Ubuntu: apt-get install postgresql-client)")
    })
}

/// `url` with its user and password replaced.
fn as_user(url: &str, user: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let host_part = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    format!("{scheme}://{user}:{password}@{host_part}")
}

/// Runs `sql/roles.sql` with psql against `db` as its administrator, with role names of this
/// test's own (roles are shared by the whole server) and `extra` variables.
fn run_roles_sql(url: &str, owner: &str, app: &str, extra: &[(&str, &str)]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sql/roles.sql");
    let mut cmd = Command::new(psql());
    cmd.arg(url)
        .args(["-X", "-q", "-f", script])
        .args(["-v", &format!("owner_role={owner}")])
        .args(["-v", &format!("app_role={app}")])
        .args(["-v", "owner_password=owner-pw-for-tests"]);
    for (k, v) in extra {
        cmd.args(["-v", &format!("{k}={v}")]);
    }
    let out = cmd.output().expect("run psql");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "sql/roles.sql failed:\n{text}");
    text
}

async fn roles(db: &TestDb) -> Roles {
    let tag = format!("{:08x}", fastrand::u32(..));
    let (owner, app) = (format!("hc_owner_{tag}"), format!("hc_app_{tag}"));
    let (url, o, a) = (db.url.clone(), owner.clone(), app.clone());
    let out = tokio::task::spawn_blocking(move || {
        run_roles_sql(&url, &o, &a, &[("app_password", "app-pw-for-tests")])
    })
    .await
    .expect("psql task");
    assert!(out.contains("hookclaim roles ready"), "{out}");
    Roles {
        owner_url: as_user(&db.url, &owner, "owner-pw-for-tests"),
        app_url: as_user(&db.url, &app, "app-pw-for-tests"),
        owner,
        app,
    }
}

/// The deployed webhook function: the application role, never migrating.
async fn app_webhook<P: Processor>(
    roles: &Roles,
    overrides: &[(&str, &str)],
    processor: P,
) -> hookclaim::webhook::Webhook<P> {
    let mut all = vec![("HOOKCLAIM_MIGRATE", "never")];
    all.extend_from_slice(overrides);
    support::webhook(&roles.app_url, &all, processor).await
}

/// The deployed retention function: the owner role, migrating (its cold start applies what is
/// missing; the `migrate` command reports the version reached).
async fn owner_migrates<P: Processor>(roles: &Roles, processor: P) -> serde_json::Value {
    let config = support::config(&roles.owner_url, &[("HOOKCLAIM_MIGRATE", "auto")]);
    let retention = hookclaim::environment::retention(&config, processor)
        .await
        .expect("retention cold start");
    let report = retention
        .handle(
            json!({"command": "migrate"}),
            SystemTime::now() + Duration::from_secs(60),
        )
        .await
        .expect("migrate command");
    serde_json::to_value(&report).expect("report")["migrations"].clone()
}

async fn scalar_bool(c: &tokio_postgres::Client, sql: &str) -> bool {
    c.query_one(sql, &[]).await.expect(sql).get(0)
}

/// Log lines written through `tracing` while the guard lives (this thread only).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn start(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log buffer")).into_owned()
    }
}

#[tokio::test]
async fn the_roles_script_gives_the_application_role_data_rights_only_on_hookclaims_tables() {
    let db = TestDb::empty().await;
    let roles = roles(&db).await;

    let migrated = owner_migrates(&roles, Scripted).await;

    assert_eq!(
        migrated["version"],
        json!(hookclaim::schema::latest_version()),
        "{migrated}"
    );
    let admin = db.client().await;
    let q = |sql: String| sql;
    for (sql, expected) in [
        (
            q(format!(
                "SELECT has_schema_privilege('{}', 'hookclaim', 'CREATE')",
                roles.app
            )),
            false,
        ),
        (
            q(format!(
                "SELECT has_database_privilege('{}', current_database(), 'CREATE')",
                roles.app
            )),
            false,
        ),
        (
            q(format!(
                "SELECT has_table_privilege('{}', 'hookclaim.hookclaim_deliveries', \
                 'SELECT, INSERT, UPDATE, DELETE')",
                roles.app
            )),
            true,
        ),
        (
            q(format!(
                "SELECT has_table_privilege('{}', 'hookclaim.hookclaim_deliveries', 'TRUNCATE')",
                roles.app
            )),
            false,
        ),
        (
            q(format!(
                "SELECT has_table_privilege('{}', 'hookclaim.effects', 'INSERT')",
                roles.app
            )),
            true,
        ),
        (
            q(format!(
                "SELECT has_table_privilege('{}', 'hookclaim.hookclaim_destination_progress', \
                 'SELECT, INSERT, DELETE')",
                roles.app
            )),
            true,
        ),
        (
            q(format!(
                "SELECT bool_and(tableowner = '{}') FROM pg_tables WHERE schemaname = 'hookclaim'",
                roles.owner
            )),
            true,
        ),
        (
            q("SELECT count(*) = 0 FROM pg_tables WHERE schemaname = 'public'".into()),
            true,
        ),
    ] {
        assert_eq!(scalar_bool(&admin, &sql).await, expected, "{sql}");
    }
    // The application role cannot make a table, in hookclaim's schema or anywhere it is sent.
    let app = support::connect(&roles.app_url).await;
    let refused = app
        .batch_execute("CREATE TABLE hookclaim.intruder (x int)")
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
    );
}

#[tokio::test]
async fn the_application_role_records_destination_progress_and_the_owners_purge_removes_it() {
    let db = TestDb::empty().await;
    let roles = roles(&db).await;
    owner_migrates(&roles, Scripted).await;
    // moto's server first: starting it points this process's AWS settings at it.
    support::moto::server();
    let sqs = aws_sdk_sqs::Client::new(
        &aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await,
    );
    let queue_url = sqs
        .create_queue()
        .queue_name(format!("hc-roles-{:08x}", fastrand::u32(..)))
        .send()
        .await
        .expect("CreateQueue")
        .queue_url()
        .expect("queue URL")
        .to_string();
    let destinations = json!({"github": [{"kind": "sqs", "queue_url": queue_url}]}).to_string();
    let settings = [
        ("HOOKCLAIM_PROCESSOR", "destinations"),
        ("HOOKCLAIM_DESTINATIONS", destinations.as_str()),
    ];
    let config = support::config(&roles.app_url, &settings);
    let processor = hookclaim::Shipped::from_config(&config).expect("destinations processor");
    let hook = app_webhook(&roles, &settings, processor).await;

    let resp = hook
        .handle(github_request(
            Format::HttpApiV2,
            "roles-dest-1",
            b"{}",
            false,
        ))
        .await;
    assert_eq!(answer(&resp).0, 200, "{:?}", answer(&resp));
    let owner = support::connect(&roles.owner_url).await;
    let recorded = support::count(
        &owner,
        "SELECT count(*) FROM hookclaim_destination_progress",
    )
    .await;
    assert_eq!(recorded, 1);

    // The owner's retention purges the delivery, and its progress with it.
    owner
        .batch_execute("UPDATE hookclaim_deliveries SET completed_at = now() - interval '400 days'")
        .await
        .unwrap();
    let config = support::config(&roles.owner_url, &settings);
    let retention = hookclaim::environment::retention(
        &config,
        hookclaim::Shipped::from_config(&config).expect("destinations processor"),
    )
    .await
    .expect("retention cold start");
    let report = retention
        .handle(json!({}), SystemTime::now() + Duration::from_secs(30))
        .await
        .expect("retention run");
    assert_eq!(report.purged, 1, "{report:?}");
    let left = support::count(
        &owner,
        "SELECT count(*) FROM hookclaim_destination_progress",
    )
    .await;
    assert_eq!(left, 0);
}

#[tokio::test]
async fn the_roles_script_iam_variant_grants_rds_iam_and_leaves_no_password() {
    let db = TestDb::empty().await;
    let admin = db.client().await;
    // RDS has this role; a plain server needs a stand-in (roles are server-wide, so it may exist).
    let _ = admin.batch_execute("CREATE ROLE rds_iam NOLOGIN").await;
    let tag = format!("{:08x}", fastrand::u32(..));
    let (owner, app) = (format!("hc_owner_{tag}"), format!("hc_iam_{tag}"));
    let url = db.url.clone();
    let (o, a) = (owner.clone(), app.clone());
    tokio::task::spawn_blocking(move || run_roles_sql(&url, &o, &a, &[("iam", "1")]))
        .await
        .expect("psql task");

    let member: bool = admin
        .query_one("SELECT pg_has_role($1, 'rds_iam', 'MEMBER')", &[&app])
        .await
        .unwrap()
        .get(0);
    let password: Option<String> = admin
        .query_one(
            "SELECT rolpassword FROM pg_authid WHERE rolname = $1",
            &[&app],
        )
        .await
        .unwrap()
        .get(0);
    assert!(member, "the application role is granted rds_iam");
    assert_eq!(password, None, "and has no password to log in with");
}

#[tokio::test]
async fn every_response_row_answers_as_the_application_role_without_create() {
    let db = TestDb::empty().await;
    let roles = roles(&db).await;
    owner_migrates(&roles, Scripted).await;
    let owner = support::connect(&roles.owner_url).await;
    let hook = app_webhook(&roles, &[("RETRY_BASE_SECS", "60")], Scripted).await;
    let store_only = app_webhook(&roles, &[], StoreOnly).await;
    let send = |id: &str, body: &str| github_request(Format::HttpApiV2, id, body.as_bytes(), false);
    let mut seen = Vec::new();
    let mut expect =
        |what: &str, resp: &lambda_http::Response<lambda_http::Body>, want: (u16, &str)| {
            let (status, json) = answer(resp);
            assert_eq!(
                (status, json["status"].as_str().unwrap_or_default()),
                want,
                "{what}: {json}"
            );
            seen.push(format!("{what}: {status} {}", want.1));
        };

    // 200 processed, by the store-only default and by a processor writing in its transaction.
    expect(
        "new delivery, store-only",
        &store_only.handle(send("store-1", "{}")).await,
        (200, "processed"),
    );
    expect(
        "new delivery, processed in its transaction",
        &hook.handle(send("ok-1", r#"{"behaviour":"ok"}"#)).await,
        (200, "processed"),
    );
    // 200 duplicate.
    expect(
        "duplicate of a done delivery",
        &hook.handle(send("ok-1", r#"{"behaviour":"ok"}"#)).await,
        (200, "duplicate"),
    );
    // 202 in progress: another environment holds the claim.
    let busy = br#"{"n":"busy-1"}"#;
    let hash = sha256(busy);
    ledger::claim(
        &owner,
        &NewDelivery {
            source: "github",
            delivery_id: "busy-1",
            id_origin: hookclaim::verify::IdOrigin::Header,
            event_type: Some("push"),
            payload: busy,
            payload_sha256: &hash,
            headers: &Default::default(),
            long_key_retention: true,
            replay_guard: true,
        },
        &Claimant {
            owner: "someone-else",
            lease: Duration::from_secs(60),
            max_attempts: 5,
        },
        false,
    )
    .await
    .unwrap();
    expect(
        "duplicate while another invocation holds it",
        &hook.handle(send("busy-1", r#"{"n":"busy-1"}"#)).await,
        (202, "in_progress"),
    );
    // 503 failed, with Retry-After, then 503 retry_later for the redelivery not yet due.
    let failed = hook
        .handle(send("retry-1", r#"{"behaviour":"retry"}"#))
        .await;
    assert!(failed.headers().contains_key("retry-after"));
    expect("retryable failure", &failed, (503, "failed"));
    let later = hook
        .handle(send("retry-1", r#"{"behaviour":"retry"}"#))
        .await;
    assert!(later.headers().contains_key("retry-after"));
    expect(
        "redelivery of a failed row not yet due",
        &later,
        (503, "retry_later"),
    );
    // 200 dead.
    expect(
        "permanent failure",
        &hook
            .handle(send("dead-1", r#"{"behaviour":"permanent"}"#))
            .await,
        (200, "dead"),
    );
    // 401, 400, 404, 405, 413: refused before the database.
    let mut forged = send("forged-1", "{}");
    forged.headers_mut().insert(
        "x-hub-signature-256",
        support::github_signature("wrong-secret", b"{}")
            .parse()
            .unwrap(),
    );
    expect(
        "bad signature",
        &hook.handle(forged).await,
        (401, "unauthorized"),
    );
    let mut no_id = send("x", "{}");
    no_id.headers_mut().remove("x-github-delivery");
    expect(
        "no delivery id",
        &hook.handle(no_id).await,
        (400, "bad_request"),
    );
    let req = |method: &str, source: &str, body: &[u8]| {
        support::request(Format::HttpApiV2, method, source, &[], body, false)
    };
    expect(
        "unknown source",
        &hook.handle(req("POST", "nope", b"{}")).await,
        (404, "unknown_source"),
    );
    expect(
        "method other than POST",
        &hook.handle(req("GET", "github", b"")).await,
        (405, "method_not_allowed"),
    );
    expect(
        "body over the source's limit",
        &hook.handle(req("POST", "acme", &vec![b'a'; 262_145])).await,
        (413, "payload_too_large"),
    );
    // 503 unavailable: the database refuses the role's login (and its connection is gone).
    owner_admin(&db, &format!("ALTER ROLE {} NOLOGIN", roles.app)).await;
    terminate(&db, &roles.app).await;
    let down = hook.handle(send("down-1", "{}")).await;
    assert!(down.headers().contains_key("retry-after"));
    expect("database refusing the login", &down, (503, "unavailable"));
    owner_admin(&db, &format!("ALTER ROLE {} LOGIN", roles.app)).await;

    // What was stored, read as the owner.
    assert_eq!(row(&owner, "github", "ok-1").await.unwrap().0, "done");
    assert_eq!(row(&owner, "github", "store-1").await.unwrap().0, "done");
    assert_eq!(row(&owner, "github", "retry-1").await.unwrap().0, "failed");
    assert_eq!(row(&owner, "github", "dead-1").await.unwrap().0, "dead");
    assert_eq!(
        row(&owner, "github", "busy-1").await.unwrap().0,
        "processing"
    );
    assert!(row(&owner, "github", "down-1").await.is_none());
    let effects: i64 = owner
        .query_one("SELECT count(*) FROM effects", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(effects, 1, "only the processed delivery's write committed");
    println!(
        "[roles] as {} (no CREATE), HOOKCLAIM_MIGRATE=never:\n  {}",
        roles.app,
        seen.join("\n  ")
    );
}

#[tokio::test]
async fn a_schema_behind_answers_503_and_is_logged_until_the_owner_migrates() {
    let db = TestDb::empty().await;
    let roles = roles(&db).await;
    let logs = Captured::default();
    let guard = logs.start();

    // The cold start succeeds: no crash loop over a schema the function may not change.
    let hook = app_webhook(&roles, &[], StoreOnly).await;
    let send = || github_request(Format::HttpApiV2, "early-1", b"{}", false);
    let first = hook.handle(send()).await;
    let second = hook.handle(send()).await;

    for resp in [&first, &second] {
        assert_eq!(answer(resp).0, 503, "{:?}", answer(resp));
        assert_eq!(answer(resp).1["status"], "unavailable");
        assert!(resp.headers().contains_key("retry-after"));
    }
    let text = logs.text();
    let behind: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("database schema is behind"))
        .collect();
    assert_eq!(behind.len(), 1, "logged once per environment:\n{text}");
    assert!(
        behind[0].contains(&format!(
            "is at version 0 and this build needs {}",
            hookclaim::schema::latest_version()
        )) && behind[0].contains(r#"{\"command\":\"migrate\"}"#)
            && behind[0].contains("\"level\":\"ERROR\""),
        "{}",
        behind[0]
    );
    println!("[roles] schema behind, logged: {}", behind[0]);
    let admin = db.client().await;
    assert!(
        scalar_bool(
            &admin,
            "SELECT count(*) = 0 FROM pg_tables WHERE tablename LIKE 'hookclaim%'"
        )
        .await,
        "the application role created nothing"
    );

    // The owner migrates; the same environment answers without a restart.
    let migrated = owner_migrates(&roles, StoreOnly).await;
    assert_eq!(
        migrated["version"],
        json!(hookclaim::schema::latest_version())
    );
    let after = hook.handle(send()).await;
    assert_eq!(answer(&after).0, 200, "{:?}", answer(&after));
    drop(guard);
}

#[tokio::test]
async fn with_auto_migration_the_application_role_fails_on_permissions_so_never_is_the_deployed_setting(
) {
    let db = TestDb::empty().await;
    let roles = roles(&db).await;

    let hook = support::webhook(&roles.app_url, &[("HOOKCLAIM_MIGRATE", "auto")], StoreOnly).await;
    let resp = hook
        .handle(github_request(Format::HttpApiV2, "auto-1", b"{}", false))
        .await;

    // Still a 503 the sender retries, never a crash, but the reason is a permission error
    // rather than the fix; the template therefore sets never for the webhook function.
    assert_eq!(answer(&resp).0, 503);
    let err = hook.ensure_ready().await.unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");
}

async fn owner_admin(db: &TestDb, sql: &str) {
    db.client().await.batch_execute(sql).await.expect(sql);
}

async fn terminate(db: &TestDb, role: &str) {
    db.client()
        .await
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1",
            &[&role],
        )
        .await
        .expect("terminate");
}

fn sha256(body: &[u8]) -> Vec<u8> {
    use sha2::Digest as _;
    sha2::Sha256::digest(body).to_vec()
}
