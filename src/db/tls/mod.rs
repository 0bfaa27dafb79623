//! TLS for the database connection, on rustls with ring (the TLS stack and crypto library the
//! AWS SDK and the forwarder use): the connector for each mode, and the CA bundle (such as the RDS
//! global bundle) that `verify-full` trusts, read at cold start so a bad file fails it.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::TlsMode;

use super::DbError;

/// The connector for `mode`, or none for `disable`; `verify-full` trusts exactly the
/// certificates in `ca_file` and checks the host name.
pub(super) fn connector(
    mode: TlsMode,
    ca_file: Option<&std::path::Path>,
) -> Result<Option<MakeRustlsConnect>, DbError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| DbError::Tls(format!("cannot build TLS configuration: {e}")))?;
    let config = match mode {
        TlsMode::Disable => return Ok(None),
        TlsMode::Require => config
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
        TlsMode::VerifyFull => {
            let path = ca_file.ok_or_else(|| {
                DbError::Tls("verify-full needs a CA bundle file (DATABASE_CA_FILE)".into())
            })?;
            // Trust exactly the bundle: a public CA must not vouch for the database.
            config
                .with_root_certificates(bundle(path)?)
                .with_no_client_auth()
        }
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

/// The certificates of the PEM bundle at `path`, every one of them usable as a trust anchor.
fn bundle(path: &std::path::Path) -> Result<RootCertStore, DbError> {
    let pem = std::fs::read(path)
        .map_err(|e| DbError::Tls(unusable_bundle(path, &format!("cannot be read ({e})"))))?;
    let invalid = |e: &dyn std::fmt::Display| {
        DbError::Tls(unusable_bundle(
            path,
            &format!("holds an invalid certificate ({e})"),
        ))
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.map_err(|e| invalid(&e))?).map_err(|e| invalid(&e))?;
    }
    if roots.is_empty() {
        return Err(DbError::Tls(unusable_bundle(
            path,
            "holds no PEM certificate",
        )));
    }
    Ok(roots)
}

/// `require`, as libpq's `sslmode=require`: encrypted, but any certificate is accepted, so the
/// server is not authenticated. The handshake's signatures are still checked, so the session's
/// keys are agreed with whoever holds the certificate's private key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
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
