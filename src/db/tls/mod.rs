//! TLS for the database connection: the connector for each mode, and the CA bundle (such as the
//! RDS global bundle) that `verify-full` trusts, read at cold start so a bad file fails it.
//!
//! Two backends with the same modes and errors: rustls with ring by default (the TLS stack and
//! crypto library the AWS SDK and the forwarder use), or with the `native-tls` feature the
//! platform's TLS library through `postgres-native-tls` (OpenSSL on Linux, vendored so that a
//! cross-compiled build needs no OpenSSL for the target).

#[cfg(feature = "native-tls")]
mod native_backend;
#[cfg(not(feature = "native-tls"))]
mod rustls_backend;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

#[cfg(feature = "native-tls")]
use native_backend as backend;
#[cfg(not(feature = "native-tls"))]
use rustls_backend as backend;

pub(super) use backend::Connector;

use crate::config::TlsMode;

use super::DbError;

/// The connector for `mode`, or none for `disable`; `verify-full` trusts exactly the
/// certificates in `ca_file` and checks the host name.
pub(super) fn connector(
    mode: TlsMode,
    ca_file: Option<&std::path::Path>,
) -> Result<Option<Connector>, DbError> {
    let trust = match mode {
        TlsMode::Disable => return Ok(None),
        TlsMode::Require => Trust::AnyCertificate,
        TlsMode::VerifyFull => {
            let path = ca_file.ok_or_else(|| {
                DbError::Tls("verify-full needs a CA bundle file (DATABASE_CA_FILE)".into())
            })?;
            Trust::Bundle(path, bundle(path)?)
        }
    };
    Ok(Some(backend::connector(trust)?))
}

/// Whom a connector trusts.
enum Trust<'a> {
    /// Any certificate, as libpq's `sslmode=require`: encrypted, but the server is not
    /// authenticated. The handshake's signatures are still checked, so the session's keys are
    /// agreed with whoever holds the certificate's private key.
    AnyCertificate,
    /// Exactly the certificates of the bundle at the path, for a certificate that names the
    /// host: a public CA must not vouch for the database.
    Bundle(&'a std::path::Path, Vec<CertificateDer<'static>>),
}

/// The certificates of the PEM bundle at `path`: at least one, each checked by the backend as
/// it is added.
fn bundle(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, DbError> {
    let pem = std::fs::read(path)
        .map_err(|e| DbError::Tls(unusable_bundle(path, &format!("cannot be read ({e})"))))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid_certificate(path, &e))?;
    if certs.is_empty() {
        return Err(DbError::Tls(unusable_bundle(
            path,
            "holds no PEM certificate",
        )));
    }
    Ok(certs)
}

/// The error for a certificate in the bundle that cannot be used as a trust anchor.
fn invalid_certificate(path: &std::path::Path, e: &dyn std::fmt::Display) -> DbError {
    DbError::Tls(unusable_bundle(
        path,
        &format!("holds an invalid certificate ({e})"),
    ))
}

/// The error for a CA bundle that `verify-full` cannot use: the file, what is wrong with it, and
/// the ways to fix it. In Lambda the bundle comes from a layer, extracted under `/opt`.
fn unusable_bundle(path: &std::path::Path, problem: &str) -> String {
    format!(
        "DATABASE_CA_FILE {} {problem}. DATABASE_TLS=verify-full checks the server against this \
         bundle. Fix: publish the RDS CA bundle as a layer with scripts/rds-ca-layer.sh and attach \
         it (template parameter DatabaseCaLayerArn; the file is then \
         /opt/rds/global-bundle.pem), or set DATABASE_CA_FILE to where the bundle is, or use \
         DATABASE_TLS=require (encrypted, server not verified)",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_with_a_broken_certificate_is_refused_by_name() {
        let file = std::env::temp_dir().join(format!("hookclaim-bad-{}.pem", std::process::id()));
        std::fs::write(
            &file,
            "junk\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let err = connector(TlsMode::VerifyFull, Some(&file)).err().unwrap();
        let _ = std::fs::remove_file(&file);
        assert!(err.to_string().contains("holds an invalid certificate"), "{err}");
        assert!(err.to_string().contains(&file.display().to_string()));
    }

    #[test]
    fn disable_has_no_connector() {
        assert!(connector(TlsMode::Disable, None).unwrap().is_none());
    }

    #[test]
    fn a_missing_or_empty_bundle_is_named_with_the_fix() {
        let missing = std::path::Path::new("/opt/rds/no-such-bundle.pem");
        let err = connector(TlsMode::VerifyFull, Some(missing)).err().unwrap();
        let text = err.to_string();
        assert!(text.contains("/opt/rds/no-such-bundle.pem"), "{text}");
        assert!(text.contains("scripts/rds-ca-layer.sh"), "{text}");
        assert!(text.contains("DatabaseCaLayerArn"), "{text}");
        let empty = std::env::temp_dir().join(format!("hookclaim-empty-{}.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate").unwrap();
        let err = connector(TlsMode::VerifyFull, Some(&empty)).err().unwrap();
        let _ = std::fs::remove_file(&empty);
        assert!(err.to_string().contains("holds no PEM certificate"), "{err}");
        assert!(err.to_string().contains(&empty.display().to_string()));
    }

    #[test]
    fn verify_full_without_ca_file_is_refused() {
        let err = connector(TlsMode::VerifyFull, None).err().unwrap();
        assert!(err.to_string().contains("DATABASE_CA_FILE"));
    }
}
