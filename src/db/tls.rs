//! TLS for the database connection: the connector for each mode, and the CA bundle (such as the
//! RDS global bundle) that `verify-full` trusts, read at cold start so a bad file fails it.

use crate::config::TlsMode;

use super::DbError;

/// The connector for `mode`; `verify-full` trusts exactly the certificates in `ca_file`.
pub(super) fn connector(
    mode: TlsMode,
    ca_file: Option<&std::path::Path>,
) -> Result<postgres_native_tls::MakeTlsConnector, DbError> {
    let mut builder = native_tls::TlsConnector::builder();
    match mode {
        TlsMode::Disable => {}
        TlsMode::Require => {
            builder
                .danger_accept_invalid_certs(true)
                .danger_accept_invalid_hostnames(true);
        }
        TlsMode::VerifyFull => {
            let path = ca_file.ok_or_else(|| {
                DbError::Tls("verify-full needs a CA bundle file (DATABASE_CA_FILE)".into())
            })?;
            let pem = std::fs::read(path).map_err(|e| {
                DbError::Tls(unusable_bundle(path, &format!("cannot be read ({e})")))
            })?;
            let certs = pem_certificates(&pem);
            if certs.is_empty() {
                return Err(DbError::Tls(unusable_bundle(
                    path,
                    "holds no PEM certificate",
                )));
            }
            // Trust exactly the bundle: a public CA must not vouch for the database.
            builder.disable_built_in_roots(true);
            for cert in certs {
                let cert = native_tls::Certificate::from_pem(cert.as_bytes()).map_err(|e| {
                    DbError::Tls(unusable_bundle(
                        path,
                        &format!("holds an invalid certificate ({e})"),
                    ))
                })?;
                builder.add_root_certificate(cert);
            }
        }
    }
    let connector = builder
        .build()
        .map_err(|e| DbError::Tls(format!("cannot build TLS connector: {e}")))?;
    Ok(postgres_native_tls::MakeTlsConnector::new(connector))
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

/// Splits a PEM bundle (such as the RDS global bundle) into its certificates.
fn pem_certificates(pem: &[u8]) -> Vec<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let text = String::from_utf8_lossy(pem);
    let mut certs = Vec::new();
    let mut rest = text.as_ref();
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            break;
        };
        let end = start + len + END.len();
        certs.push(rest[start..end].to_string());
        rest = &rest[end..];
    }
    certs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_bundle_is_split_into_certificates() {
        let one = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let bundle = format!("junk\n{one}{one}-----BEGIN CERTIFICATE-----\ntruncated");
        assert_eq!(pem_certificates(bundle.as_bytes()).len(), 2);
        assert!(pem_certificates(b"nothing").is_empty());
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
