//! The database's TLS on the platform's TLS library through `postgres-native-tls` (the
//! `native-tls` feature): OpenSSL on Linux, vendored.

use native_tls::{Certificate, Protocol, TlsConnector};

use super::{invalid_certificate, DbError, Trust};

/// What makes each connection's TLS session.
pub(in crate::db) type Connector = postgres_native_tls::MakeTlsConnector;

pub(super) fn connector(trust: Trust<'_>) -> Result<Connector, DbError> {
    let mut builder = TlsConnector::builder();
    // As rustls: TLS 1.2 and 1.3 only.
    builder.min_protocol_version(Some(Protocol::Tlsv12));
    match trust {
        Trust::AnyCertificate => {
            builder
                .danger_accept_invalid_certs(true)
                .danger_accept_invalid_hostnames(true);
        }
        Trust::Bundle(path, certs) => {
            builder.disable_built_in_roots(true);
            for cert in certs {
                let cert = Certificate::from_der(&cert).map_err(|e| invalid_certificate(path, &e))?;
                builder.add_root_certificate(cert);
            }
        }
    }
    let connector = builder
        .build()
        .map_err(|e| DbError::Tls(format!("cannot build TLS configuration: {e}")))?;
    Ok(postgres_native_tls::MakeTlsConnector::new(connector))
}
