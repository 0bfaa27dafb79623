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
            let pem = std::fs::read(path)
                .map_err(|e| DbError::Tls(format!("cannot read {}: {e}", path.display())))?;
            let certs = pem_certificates(&pem);
            if certs.is_empty() {
                return Err(DbError::Tls(format!(
                    "{} holds no PEM certificate",
                    path.display()
                )));
            }
            // Trust exactly the bundle: a public CA must not vouch for the database.
            builder.disable_built_in_roots(true);
            for cert in certs {
                let cert = native_tls::Certificate::from_pem(cert.as_bytes()).map_err(|e| {
                    DbError::Tls(format!("invalid certificate in {}: {e}", path.display()))
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
    fn verify_full_without_ca_file_is_refused() {
        let err = connector(TlsMode::VerifyFull, None).err().unwrap();
        assert!(err.to_string().contains("DATABASE_CA_FILE"));
    }
}
