//! RDS IAM authentication: a token signed with the environment's AWS credentials stands in for
//! the database password.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};

use super::Aws;

/// How long an RDS IAM authentication token is valid (the most RDS accepts). A token only
/// needs to be valid when the connection is opened; it is signed afresh for each connect.
pub const RDS_TOKEN_LIFETIME: Duration = Duration::from_secs(900);

/// RDS IAM authentication: a token signed with the environment's AWS credentials stands in for
/// the database password.
pub struct RdsIamAuth {
    aws: Arc<Aws>,
    region: String,
}

impl RdsIamAuth {
    /// Reads the region from the AWS configuration (`AWS_REGION` in Lambda); fails without one.
    pub async fn new(aws: Arc<Aws>) -> Result<Self, String> {
        let region =
            aws.config().await.region().map(|r| r.to_string()).ok_or(
                "no AWS region is configured (AWS_REGION); RDS IAM tokens are signed for one",
            )?;
        Ok(RdsIamAuth { aws, region })
    }

    /// A token for `user` at `host:port`, signed now with the current credentials.
    pub async fn token(&self, host: &str, port: u16, user: &str) -> Result<String, String> {
        let provider = self
            .aws
            .config()
            .await
            .credentials_provider()
            .ok_or("no AWS credentials provider is configured")?;
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|e| format!("cannot get AWS credentials: {e}"))?;
        rds_auth_token(
            &credentials,
            &self.region,
            host,
            port,
            user,
            SystemTime::now(),
        )
    }
}

/// An RDS IAM authentication token: the SigV4-presigned query string of an `rds-db` `connect`
/// request for `DBUser`, valid for [`RDS_TOKEN_LIFETIME`], without a scheme
/// (`host:port/?Action=connect&DBUser=…&X-Amz-Algorithm=…&X-Amz-Signature=…`), with its
/// parameters in the order AWS's own SDKs write them.
pub fn rds_auth_token(
    credentials: &Credentials,
    region: &str,
    host: &str,
    port: u16,
    user: &str,
    now: SystemTime,
) -> Result<String, String> {
    let endpoint = format!("{host}:{port}");
    let operation = format!("Action=connect&DBUser={}", uri_encode(user));
    let url = format!("https://{endpoint}/?{operation}");

    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(RDS_TOKEN_LIFETIME);
    let identity = credentials.clone().into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("rds-db")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| format!("cannot sign an RDS IAM token: {e}"))?
        .into();
    let request = SignableRequest::new("GET", &url, std::iter::empty(), SignableBody::Bytes(&[]))
        .map_err(|e| format!("cannot sign an RDS IAM token for {endpoint}: {e}"))?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| format!("cannot sign an RDS IAM token: {e}"))?
        .into_parts();

    const ORDER: [&str; 7] = [
        "X-Amz-Algorithm",
        "X-Amz-Credential",
        "X-Amz-Date",
        "X-Amz-Expires",
        "X-Amz-SignedHeaders",
        "X-Amz-Security-Token",
        "X-Amz-Signature",
    ];
    let mut auth = instructions.params().to_vec();
    auth.sort_by_key(|(name, _)| ORDER.iter().position(|o| o == name));
    let mut token = format!("{endpoint}/?{operation}");
    for (name, value) in auth {
        token.push_str(&format!("&{name}={}", uri_encode(&value)));
    }
    Ok(token)
}

/// Percent-encodes all but RFC 3986's unreserved characters, as SigV4 requires.
fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_encoding_keeps_only_unreserved_characters() {
        assert_eq!(uri_encode("iam_user-1.x~"), "iam_user-1.x~");
        assert_eq!(uri_encode("a b/c+d=é"), "a%20b%2Fc%2Bd%3D%C3%A9");
    }
}
