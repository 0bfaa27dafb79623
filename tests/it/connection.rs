//! The environment's one connection under trouble: a terminated backend, a database that is
//! down or hangs. TLS verification against a server with a test CA is tests/tls.rs.

use crate::support;

use std::time::{Duration, Instant};

use crate::support::licences::Licences;
use hookclaim::processor::StoreOnly;
use support::{answer, delivery_count, github_request, Format, PgServer, TestDb};

#[tokio::test]
async fn a_terminated_backend_is_replaced_by_exactly_one_new_connection() {
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], Licences).await;
    let admin = db.client().await;
    let first = hook
        .handle(github_request(
            Format::HttpApiV2,
            "d1",
            br#"{"order_id":"o1"}"#,
            false,
        ))
        .await;
    assert_eq!(answer(&first).0, 200);
    let connects = hook.database().connect_count();

    // Between invocations the server drops the function's connection (as a failover, an idle
    // timeout or a proxy would while the environment is frozen).
    let killed = support::terminate_other_backends(&admin).await;
    assert_eq!(killed, 1);

    let second = hook
        .handle(github_request(
            Format::HttpApiV2,
            "d2",
            br#"{"order_id":"o2"}"#,
            false,
        ))
        .await;

    assert_eq!(answer(&second).0, 200);
    assert_eq!(
        hook.database().connect_count(),
        connects + 1,
        "exactly one new connection"
    );
}

#[tokio::test]
async fn a_connection_that_dies_mid_claim_is_retried_once_on_a_new_connection() {
    // The socket dies without the client noticing (no FIN seen yet): the first statement fails
    // at the I/O level, the retry succeeds on a fresh connection.
    let db = TestDb::migrated().await;
    let hook = support::webhook(&db.url, &[], StoreOnly).await;
    let admin = db.client().await;
    for round in 0..20 {
        support::terminate_other_backends(&admin).await;
        let id = format!("round-{round}");
        let resp = hook
            .handle(support::github_delivery(Format::HttpApiV2, &id))
            .await;
        assert_eq!(answer(&resp).0, 200, "round {round}");
    }
}

/// A TCP proxy in front of the test server that can stop passing the server's replies on the
/// connections open at that moment, as a network that loses a reply would: the server still
/// receives and commits, the client hears nothing. Connections made later pass everything.
struct ReplyLosingProxy {
    url: String,
    opened: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    lose_below: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl ReplyLosingProxy {
    async fn start(db_url: &str) -> ReplyLosingProxy {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (_, after_at) = db_url.rsplit_once('@').expect("user@host in the URL");
        let (server, db_name) = after_at.split_once('/').expect("host:port/db in the URL");
        let server = server.to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "postgres://postgres@127.0.0.1:{}/{db_name}",
            listener.local_addr().unwrap().port()
        );
        let opened = Arc::new(AtomicUsize::new(0));
        let lose_below = Arc::new(AtomicUsize::new(0));
        let (counter, threshold) = (opened.clone(), lose_below.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let number = counter.fetch_add(1, Ordering::SeqCst);
                let Ok(upstream) = tokio::net::TcpStream::connect(&server).await else {
                    continue;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = upstream.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                });
                let threshold = threshold.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    loop {
                        let n = match server_read.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if number < threshold.load(Ordering::SeqCst) {
                            continue;
                        }
                        if client_write.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        ReplyLosingProxy {
            url,
            opened,
            lose_below,
        }
    }

    /// From now on, replies on every connection open now are lost.
    fn lose_replies_on_open_connections(&self) {
        use std::sync::atomic::Ordering;
        self.lose_below
            .store(self.opened.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_store_only_claim_whose_answer_is_lost_is_recognised_as_its_own_on_the_retry() {
    // The claim commits on the server, but its answer never reaches the function: the client's
    // deadline passes and it runs the claim again on a new connection. The row is done under
    // this request's own owner token; the retry must say so ("processed"), not answer the
    // request as a duplicate of itself.
    let db = TestDb::migrated().await;
    let proxy = ReplyLosingProxy::start(&db.url).await;
    let hook = support::webhook(
        &proxy.url,
        &[("DATABASE_STATEMENT_TIMEOUT_MS", "300")],
        StoreOnly,
    )
    .await;
    let admin = db.client().await;
    // Warm: the connection is made and the schema checked, so the next request's first message
    // on it is the claim.
    let warm = hook
        .handle(support::github_delivery(Format::HttpApiV2, "warm"))
        .await;
    assert_eq!(answer(&warm).1["status"], "processed");
    let connects = hook.database().connect_count();

    proxy.lose_replies_on_open_connections();
    let resp = hook
        .handle(support::github_delivery(Format::HttpApiV2, "lost"))
        .await;

    assert_eq!(
        answer(&resp),
        (
            200,
            serde_json::json!({"status": "processed", "delivery_id": "lost"})
        )
    );
    assert_eq!(hook.database().connect_count(), connects + 1);
    assert_eq!(
        support::row(&admin, "github", "lost")
            .await
            .map(|r| (r.0, r.1)),
        Some(("done".to_string(), 1)),
        "claimed once, by the first try"
    );
    // A redelivery, from another invocation, is a duplicate.
    let again = hook
        .handle(support::github_delivery(Format::HttpApiV2, "lost"))
        .await;
    assert_eq!(answer(&again).1["status"], "duplicate");
}

#[tokio::test]
async fn a_warm_connection_to_a_node_turned_read_only_is_replaced_by_a_writable_one() {
    // A failover while the environment is warm: the node its connection is on becomes read-only
    // (demoted, or a standby in recovery), while a new connection reaches a writable primary.
    // Its own server, because the read-only switch is cluster-wide.
    let server = tokio::task::spawn_blocking(PgServer::start)
        .await
        .expect("server");
    let admin = support::connect(&server.url("postgres")).await;
    admin.batch_execute("CREATE DATABASE app").await.unwrap();
    let url = server.url("app");
    hookclaim::schema::migrate(&mut support::connect(&url).await)
        .await
        .unwrap();
    let hook = support::webhook(&url, &[], StoreOnly).await;
    let before = hook
        .handle(support::github_delivery(Format::HttpApiV2, "f1"))
        .await;
    assert_eq!(answer(&before).0, 200);
    let connects = hook.database().connect_count();

    // Sessions that exist now turn read-only at the reload; new ones to `app` stay writable.
    admin
        .batch_execute("ALTER DATABASE app SET default_transaction_read_only = off")
        .await
        .unwrap();
    admin
        .batch_execute("ALTER SYSTEM SET default_transaction_read_only = on")
        .await
        .unwrap();
    admin
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    // Backends apply a reload when they next wait for a command; wait until a session that
    // already existed (like the function's) has applied it.
    let applied = support::eventually(Duration::from_secs(10), async || {
        let row = admin
            .query_one("SHOW default_transaction_read_only", &[])
            .await
            .unwrap();
        row.get::<_, String>(0) == "on"
    })
    .await;
    assert!(applied, "the reload never reached existing sessions");
    tokio::time::sleep(Duration::from_millis(200)).await;

    for id in ["f2", "f3"] {
        let resp = hook
            .handle(support::github_delivery(Format::HttpApiV2, id))
            .await;
        assert_eq!(
            answer(&resp),
            (
                200,
                serde_json::json!({"status": "processed", "delivery_id": id})
            )
        );
    }
    assert_eq!(
        hook.database().connect_count(),
        connects + 1,
        "one new connection replaces the read-only one"
    );
    let admin_app = support::connect(&url).await;
    assert_eq!(delivery_count(&admin_app).await, 3);
}

#[tokio::test]
async fn database_down_answers_503_within_the_connect_timeout_and_a_redelivery_succeeds_after() {
    let server = PgServer::start();
    let url = server.url("postgres");
    let hook = support::webhook(&url, &[("DATABASE_CONNECT_TIMEOUT_MS", "1000")], StoreOnly).await;
    let ok = hook
        .handle(support::github_delivery(Format::HttpApiV2, "before"))
        .await;
    assert_eq!(answer(&ok).0, 200);

    server.stop_immediate();
    let started = Instant::now();
    let resp = hook
        .handle(support::github_delivery(Format::HttpApiV2, "during"))
        .await;
    let took = started.elapsed();

    let (status, json) = answer(&resp);
    assert_eq!(status, 503);
    assert_eq!(
        json,
        serde_json::json!({"status": "unavailable", "error": "temporarily unavailable"})
    );
    assert!(resp.headers().contains_key("retry-after"));
    // One failed statement, one reconnect attempt bounded by the connect timeout.
    assert!(took < Duration::from_millis(2500), "took {took:?}");

    server.start_existing();
    let again = hook
        .handle(support::github_delivery(Format::HttpApiV2, "during"))
        .await;
    assert_eq!(
        answer(&again).0,
        200,
        "the sender's retry succeeds once the database is back"
    );
    let c = support::connect(&url).await;
    assert_eq!(
        delivery_count(&c).await,
        2,
        "nothing was half-written while it was down"
    );
}

#[tokio::test]
async fn a_database_that_accepts_but_never_answers_gets_503_within_the_connect_timeout() {
    // A listener that accepts TCP connections and then says nothing, like a black-holed proxy.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let hook = support::webhook(&url, &[("DATABASE_CONNECT_TIMEOUT_MS", "500")], StoreOnly).await;

    let started = Instant::now();
    let resp = hook
        .handle(support::github_delivery(Format::HttpApiV2, "hang"))
        .await;

    assert_eq!(answer(&resp).0, 503);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        started.elapsed()
    );
    hold.abort();
}
