//! TLS to the database with the backend this build was made with: rustls by default, OpenSSL
//! (`postgres-native-tls`) with the `native-tls` feature. A binary of its own, so that
//! `cargo test --features native-tls --test tls` runs the same tests on the other backend without
//! building every integration test again.

#[path = "it/support/mod.rs"]
mod support;

use std::time::Duration;

use hookclaim::config::TlsMode;
use hookclaim::db::Database;
use support::PgServer;

/// A test CA and a server certificate for `host`, written to `dir`.
fn make_certs(dir: &std::path::Path, host: &str) {
    let sh = |args: &str| {
        let st = std::process::Command::new("sh")
            .arg("-c")
            .arg(args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(st.success(), "{args}");
    };
    sh(
        "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=hookclaim test CA' \
        -keyout ca.key -out ca.crt 2>/dev/null",
    );
    sh(&format!(
        "openssl req -newkey rsa:2048 -nodes -subj '/CN={host}' -keyout server.key -out server.csr 2>/dev/null && \
         printf 'subjectAltName=DNS:{host}\\nbasicConstraints=CA:FALSE\\n' > ext.cnf && \
         openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
           -extfile ext.cnf -out server.crt 2>/dev/null"
    ));
}

fn tls_server(host: &str) -> (PgServer, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("hookclaim-tls-{:08x}", fastrand::u32(..)));
    std::fs::create_dir_all(&dir).unwrap();
    make_certs(&dir, host);
    // The server reads its key as the postgres user, and insists on 0600.
    let _ = std::process::Command::new("chown")
        .arg("-R")
        .arg("postgres:")
        .arg(&dir)
        .status();
    let _ = std::process::Command::new("chmod")
        .arg("755")
        .arg(&dir)
        .status();
    let _ = std::process::Command::new("chmod")
        .arg("600")
        .arg(dir.join("server.key"))
        .status();
    let server = PgServer::start_with(&[
        "ssl = on",
        &format!("ssl_cert_file = '{}'", dir.join("server.crt").display()),
        &format!("ssl_key_file = '{}'", dir.join("server.key").display()),
    ]);
    (server, dir)
}

async fn connect_with(
    port: u16,
    host: &str,
    mode: TlsMode,
    ca: Option<std::path::PathBuf>,
) -> Result<(), String> {
    let mut pg = tokio_postgres::Config::new();
    pg.host(host).port(port).user("postgres").dbname("postgres");
    let db = Database::new(hookclaim::config::DbSettings {
        pg,
        tls: mode,
        ca_file: ca,
        connect_timeout: Duration::from_secs(3),
        statement_timeout: Duration::from_secs(3),
        keepalive_idle: Duration::from_secs(30),
        pooled: false,
    })
    .map_err(|e| e.to_string())?;
    let mut session = db.session().await;
    let ssl: bool = session
        .run(|c, _| {
            Box::pin(async move {
                Ok(c.query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .await?
                .get(0))
            })
        })
        .await
        .map_err(|e| e.to_string())?;
    if ssl {
        Ok(())
    } else {
        Err("connected without TLS".into())
    }
}

#[tokio::test]
async fn verify_full_connects_with_the_right_ca_and_refuses_a_wrong_ca_or_host() {
    eprintln!(
        "TLS backend: {}",
        if cfg!(feature = "native-tls") {
            "postgres-native-tls (OpenSSL)"
        } else {
            "rustls"
        }
    );
    let (server, dir) = tls_server("localhost");

    connect_with(
        server.port,
        "localhost",
        TlsMode::VerifyFull,
        Some(dir.join("ca.crt")),
    )
    .await
    .expect("verify-full with the test CA");
    connect_with(server.port, "localhost", TlsMode::Require, None)
        .await
        .expect("require encrypts without checking");

    // Another CA that did not sign the server's certificate.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    make_certs(&other, "localhost");
    let err = connect_with(
        server.port,
        "localhost",
        TlsMode::VerifyFull,
        Some(other.join("ca.crt")),
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("cannot connect") && err.to_lowercase().contains("certificate"),
        "{err}"
    );

    // The right CA, but the certificate names another host.
    let err = connect_with(
        server.port,
        "127.0.0.1",
        TlsMode::VerifyFull,
        Some(dir.join("ca.crt")),
    )
    .await
    .unwrap_err();
    assert!(err.contains("cannot connect"), "{err}");

    // A bundle that is not a certificate, or no file at all, stops the cold start with a clear
    // message naming the file.
    let broken = dir.join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let err = connect_with(server.port, "localhost", TlsMode::VerifyFull, Some(broken))
        .await
        .unwrap_err();
    assert!(
        err.contains("broken.pem holds an invalid certificate"),
        "{err}"
    );
    let err = connect_with(
        server.port,
        "localhost",
        TlsMode::VerifyFull,
        Some(dir.join("missing.pem")),
    )
    .await
    .unwrap_err();
    assert!(err.contains("missing.pem"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
