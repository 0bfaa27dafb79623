//! The deployed split of database roles, on a real PostgreSQL: `sql/roles.sql` (run with psql,
//! as an administrator would) makes an owner and an application role. The retention function
//! holds both logins, as the template gives them: the owner's only to apply the migrations and
//! the processor's setup (its cold start and the `migrate` command), the application role's for
//! everything else, so internet-supplied payloads are re-driven and replayed without DDL
//! rights. The webhook function runs as the application role alone, which has no `CREATE`, with
//! `HOOKCLAIM_MIGRATE=never` (the template's setting), and gives every row of the response
//! table. The application role cannot write the record of migrations. A schema that is behind
//! answers 503 and is logged, without failing the cold start, until the owner has migrated. The
//! application role records destinations' progress, and retention's purge removes it with its
//! delivery.

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

/// The deployed retention function: the application role's login for its work and the owner's
/// for migrating (`DATABASE_OWNER_URL` here, `DATABASE_OWNER_SECRET_ARN` in AWS), with
/// `overrides`. Its cold start applies what is missing, as the owner.
async fn deployed_retention<P: Processor>(
    roles: &Roles,
    overrides: &[(&str, &str)],
    processor: P,
) -> hookclaim::retention::Retention<P> {
    let mut all = vec![
        ("HOOKCLAIM_MIGRATE", "auto"),
        ("DATABASE_OWNER_URL", roles.owner_url.as_str()),
    ];
    all.extend_from_slice(overrides);
    let config = support::config(&roles.app_url, &all);
    hookclaim::Retention::from_config(&config, processor)
        .await
        .expect("retention cold start")
}

/// The deployed retention function's `migrate` command: the report's `migrations` (the version
/// reached).
async fn owner_migrates<P: Processor>(roles: &Roles, processor: P) -> serde_json::Value {
    let retention = deployed_retention(roles, &[], processor).await;
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
async fn the_application_role_records_destination_progress_and_retentions_purge_removes_it() {
    let db = TestDb::empty().await;
    let roles = roles(&db).await;
    owner_migrates(&roles, Scripted).await;
    // moto's server first: starting it points this process's AWS settings at it.
    support::moto::server();
    let sqs = aws_sdk_sqs::Client::new(&hookclaim::aws::config_loader().load().await);
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
    let config = support::config(&roles.app_url, &settings);
    let processor = hookclaim::Shipped::from_config(&config).expect("destinations processor");
    let retention = deployed_retention(&roles, &settings, processor).await;
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

/// Records which database user ran each delivery (`current_user` inside the delivery's
/// transaction). A body with `"fail_first": true` fails its first attempt, so the retention
/// function re-drives it.
struct WhoRan;

impl Processor for WhoRan {
    fn name(&self) -> &'static str {
        "who-ran"
    }

    async fn setup(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
    ) -> Result<(), tokio_postgres::Error> {
        // Checked first, so the application role (no CREATE) finds the owner's table.
        let exists: bool = tx
            .query_typed_one("SELECT to_regclass('who_ran') IS NOT NULL", &[])
            .await?
            .get(0);
        if !exists {
            tx.batch_execute("CREATE TABLE who_ran (delivery_id text, attempt int, db_user text)")
                .await?;
        }
        Ok(())
    }

    async fn process(
        &self,
        delivery: &hookclaim::processor::Delivery,
        work: &mut hookclaim::work::Work<'_>,
    ) -> Result<(), hookclaim::processor::ProcessError> {
        use hookclaim::processor::ProcessError;
        let body: serde_json::Value = delivery.json().unwrap_or_default();
        if body["fail_first"] == json!(true) && delivery.attempt == 1 {
            return Err(ProcessError::new("the first attempt fails"));
        }
        work.queue(
            "INSERT INTO who_ran VALUES ($1, $2, current_user)",
            &[&delivery.delivery_id, &delivery.attempt],
        );
        Ok(())
    }
}

/// (delivery id, attempt, database user) of every run [`WhoRan`] recorded.
async fn who_ran(c: &tokio_postgres::Client) -> Vec<(String, i32, String)> {
    c.query(
        "SELECT delivery_id, attempt, db_user FROM who_ran ORDER BY delivery_id, attempt",
        &[],
    )
    .await
    .expect("read who_ran")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

#[tokio::test]
async fn retention_migrates_as_the_owner_and_runs_re_drives_replays_purge_and_stats_as_the_app() {
    let db = TestDb::empty().await;
    let roles = roles(&db).await;
    let admin = db.client().await;

    // Cold start: the owner applies the migrations and the processor's setup.
    let retention = deployed_retention(&roles, &[("RETRY_BASE_SECS", "60")], WhoRan).await;
    let owners: Vec<String> = admin
        .query(
            "SELECT DISTINCT tableowner::text FROM pg_tables WHERE schemaname = 'hookclaim'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        owners,
        vec![roles.owner.clone()],
        "the owner made every table"
    );
    // Its connection is let go once that is done: only the application role's stays.
    let owner_sessions = async || {
        support::count(
            &admin,
            &format!(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = '{}'",
                roles.owner
            ),
        )
        .await
    };
    let owner_let_go =
        support::eventually(Duration::from_secs(5), async || owner_sessions().await == 0).await;

    // A delivery fails at the webhook (the application role) and is due again.
    let hook = app_webhook(&roles, &[("RETRY_BASE_SECS", "60")], WhoRan).await;
    let body = br#"{"fail_first":true,"order":"o-1"}"#;
    let failed = hook
        .handle(github_request(Format::HttpApiV2, "redrive-1", body, false))
        .await;
    assert_eq!(answer(&failed).1["status"], "failed");
    admin
        .batch_execute(
            "UPDATE hookclaim.hookclaim_deliveries SET next_attempt_at = now()
              WHERE delivery_id = 'redrive-1'",
        )
        .await
        .unwrap();

    let deadline = || SystemTime::now() + Duration::from_secs(60);
    let run = retention.handle(json!({}), deadline()).await.expect("run");
    assert_eq!(run.reclaimed, 1, "{run:?}");
    let replay = json!({"command": "replay", "source": "github", "delivery_id": "redrive-1",
                        "force": true});
    retention.handle(replay, deadline()).await.expect("replay");
    let purge = json!({"command": "purge", "older_than_days": 1, "force": true});
    retention.handle(purge, deadline()).await.expect("purge");
    let stats = retention
        .handle(json!({"command": "stats"}), deadline())
        .await
        .expect("stats");
    assert!(stats.stats.is_some());

    assert_eq!(
        who_ran(&support::connect(&roles.owner_url).await).await,
        vec![
            ("redrive-1".to_string(), 2, roles.app.clone()),
            ("redrive-1".to_string(), 3, roles.app.clone()),
        ],
        "the re-drive and the replay ran as the application role"
    );
    assert!(
        owner_let_go,
        "the owner's connection stayed open after the cold start"
    );
    assert!(
        support::eventually(Duration::from_secs(5), async || owner_sessions().await == 0).await,
        "only the migrations used the owner's login"
    );

    // The migrate command: the owner again, and nothing left to apply.
    let migrate = retention
        .handle(json!({"command": "migrate"}), deadline())
        .await
        .expect("migrate");
    let migrations = migrate.migrations.expect("migrations section");
    assert_eq!(
        (migrations.applied, migrations.version),
        (vec![], hookclaim::schema::latest_version())
    );
}

#[tokio::test]
async fn the_application_role_cannot_write_the_record_of_migrations() {
    let db = TestDb::empty().await;
    let roles = roles(&db).await;
    owner_migrates(&roles, Scripted).await;
    // The roles script run again after the first migration (it grants on every table again).
    let (url, owner, app) = (db.url.clone(), roles.owner.clone(), roles.app.clone());
    tokio::task::spawn_blocking(move || {
        run_roles_sql(&url, &owner, &app, &[("app_password", "app-pw-for-tests")])
    })
    .await
    .expect("psql task");
    let app = support::connect(&roles.app_url).await;

    let mut refused = Vec::new();
    for sql in [
        "INSERT INTO hookclaim_schema_migrations (version, name) VALUES (999, 'forged')",
        "UPDATE hookclaim_schema_migrations SET version = 999",
        "DELETE FROM hookclaim_schema_migrations",
        "TRUNCATE hookclaim_schema_migrations",
    ] {
        let e = app.batch_execute(sql).await.err();
        refused.push((sql, e.and_then(|e| e.code().cloned())));
    }

    for (sql, code) in &refused {
        assert_eq!(
            code.as_ref(),
            Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
            "{sql}; all: {refused:?}"
        );
    }
    // It still reads the version (a function that never migrates checks it) and writes the
    // deliveries.
    assert_eq!(
        hookclaim::schema::current_version(&app).await.unwrap(),
        hookclaim::schema::latest_version()
    );
    let hook = app_webhook(&roles, &[], StoreOnly).await;
    let resp = hook
        .handle(github_request(Format::HttpApiV2, "app-1", b"{}", false))
        .await;
    assert_eq!(answer(&resp).0, 200, "{:?}", answer(&resp));
}

#[tokio::test]
async fn in_aws_the_retention_function_reads_the_owners_secret_to_migrate_and_works_as_the_app() {
    // As the template deploys it: DATABASE_SECRET_ARN (the application role) and
    // DATABASE_OWNER_SECRET_ARN (the owner), both RDS-format secrets in Secrets Manager.
    let moto = support::moto::server();
    let db = TestDb::empty().await;
    let roles = roles(&db).await;
    let url: tokio_postgres::Config = db.url.parse().expect("test URL");
    let secret = |user: &str, password: &str| {
        let host = match &url.get_hosts()[0] {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            other => panic!("a TCP host expected, got {other:?}"),
        };
        json!({"username": user, "password": password, "host": host,
               "port": url.get_ports()[0], "dbname": url.get_dbname()})
        .to_string()
    };
    let (app_name, owner_name) = (
        support::moto::unique_name("db-app"),
        support::moto::unique_name("db-owner"),
    );
    let app_arn =
        support::moto::create_secret(&app_name, &secret(&roles.app, "app-pw-for-tests")).await;
    let owner_arn =
        support::moto::create_secret(&owner_name, &secret(&roles.owner, "owner-pw-for-tests"))
            .await;
    let settings = [
        ("HOOKCLAIM_MIGRATE", "auto"),
        ("DATABASE_SECRET_ARN", app_arn.as_str()),
        ("DATABASE_OWNER_SECRET_ARN", owner_arn.as_str()),
    ];
    let config = support::config(&db.url, &settings);

    let retention = hookclaim::Retention::from_config(&config, StoreOnly)
        .await
        .expect("retention cold start");
    let stats = retention
        .handle(
            json!({"command": "stats"}),
            SystemTime::now() + Duration::from_secs(30),
        )
        .await
        .expect("stats");

    assert!(stats.stats.is_some());
    let admin = db.client().await;
    let owner: String = admin
        .query_one(
            "SELECT tableowner::text FROM pg_tables WHERE tablename = 'hookclaim_deliveries'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(owner, roles.owner, "migrated with the owner's secret");
    let sessions = |user: String| {
        let admin = &admin;
        async move {
            support::count(
                admin,
                &format!("SELECT count(*) FROM pg_stat_activity WHERE usename = '{user}'"),
            )
            .await
        }
    };
    assert_eq!(
        sessions(roles.app.clone()).await,
        1,
        "its work on the app's"
    );
    assert!(
        support::eventually(Duration::from_secs(5), async || {
            sessions(roles.owner.clone()).await == 0
        })
        .await,
        "the owner's connection was let go"
    );
    let reads = (
        moto.count(support::moto::GET_SECRET_VALUE, &app_name),
        moto.count(support::moto::GET_SECRET_VALUE, &owner_name),
    );
    assert_eq!(reads, (1, 1), "each secret read once, at cold start");
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
