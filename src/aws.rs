//! Everything hookclaim asks of AWS, made through aws-config so that the standard settings apply
//! (region, credentials, and `AWS_ENDPOINT_URL` and friends for a local endpoint in tests): the
//! environment's shared configuration, secret reads, the database login held in an RDS-format
//! secret, and RDS IAM authentication tokens.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aws_config::{BehaviorVersion, SdkConfig};
use aws_credential_types::provider::ProvideCredentials;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use tokio::sync::OnceCell;

/// The execution environment's AWS configuration and clients, made on first use and shared by
/// everything that calls AWS. Making them calls nothing; an environment configured entirely
/// from environment variables never makes them.
#[derive(Default)]
pub struct Aws {
    config: OnceCell<SdkConfig>,
    secrets_manager: OnceCell<aws_sdk_secretsmanager::Client>,
}

impl Aws {
    /// The configuration from the environment (variables, profile files, the Lambda role).
    pub async fn config(&self) -> &SdkConfig {
        self.config
            .get_or_init(|| aws_config::load_defaults(BehaviorVersion::latest()))
            .await
    }

    /// The Secrets Manager client.
    pub async fn secrets_manager(&self) -> &aws_sdk_secretsmanager::Client {
        let config = self.config().await;
        self.secrets_manager
            .get_or_init(|| async { aws_sdk_secretsmanager::Client::new(config) })
            .await
    }

    /// Reads a secret's string value: one `GetSecretValue` call.
    pub async fn secret_string(&self, secret_id: &str) -> Result<String, String> {
        secret_string(self.secrets_manager().await, secret_id).await
    }
}

/// Reads a secret's string value. The error says why, never what the secret holds.
pub async fn secret_string(
    client: &aws_sdk_secretsmanager::Client,
    secret_id: &str,
) -> Result<String, String> {
    let out = client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .map_err(|e| {
            format!(
                "GetSecretValue {secret_id}: {}",
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            )
        })?;
    out.secret_string()
        .map(str::to_owned)
        .ok_or_else(|| format!("secret {secret_id} has no string value"))
}

/// Builds connection settings from a secret in the format RDS manages
/// (`{"username", "password", "host", "port", "dbname"}`; `port` may be a number or a string).
/// The error names the missing field, never a value.
pub fn rds_secret_config(text: &str) -> Result<tokio_postgres::Config, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|_| "the secret is not a JSON object".to_string())?;
    let field = |name: &str| -> Result<String, String> {
        match v.get(name) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
            _ => Err(format!("the secret has no {name}")),
        }
    };
    let port: u16 = match v.get("port") {
        None => 5432,
        Some(_) => field("port")?
            .parse()
            .map_err(|_| "the secret's port is not a port number".to_string())?,
    };
    let mut pg = tokio_postgres::Config::new();
    pg.user(field("username")?)
        .password(field("password")?)
        .host(field("host")?)
        .port(port)
        .dbname(field("dbname").unwrap_or_else(|_| "postgres".into()))
        .application_name("hookclaim");
    Ok(pg)
}

/// The database login held in an RDS-format secret: read once at cold start, and read again
/// (at most once per interval) when the server refuses it, so a rotated password needs no
/// redeploy.
pub struct DatabaseSecret {
    aws: Arc<Aws>,
    arn: String,
    min_refresh_interval: Duration,
    state: Mutex<SecretState>,
    fetches: AtomicU64,
}

struct SecretState {
    text: String,
    login: tokio_postgres::Config,
    last_attempt: Instant,
}

impl DatabaseSecret {
    /// Reads the secret now. Fails when it cannot be read or is not in the RDS format.
    pub async fn load(
        aws: Arc<Aws>,
        arn: &str,
        min_refresh_interval: Duration,
    ) -> Result<Self, String> {
        let secret = DatabaseSecret {
            aws,
            arn: arn.to_string(),
            min_refresh_interval,
            state: Mutex::new(SecretState {
                text: String::new(),
                login: tokio_postgres::Config::new(),
                last_attempt: Instant::now(),
            }),
            fetches: AtomicU64::new(0),
        };
        let (text, login) = secret.fetch().await?;
        *secret.lock() = SecretState {
            text,
            login,
            last_attempt: Instant::now(),
        };
        Ok(secret)
    }

    /// The login as last read: host, port, user, password and database.
    pub fn login(&self) -> tokio_postgres::Config {
        self.lock().login.clone()
    }

    #[cfg(feature = "internals")]
    /// How many times the secret was read.
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// After the server refused the login: reads the secret again, unless it was read less than
    /// the minimum interval ago. True when that produced a login different from the refused one.
    pub async fn refresh(&self) -> bool {
        {
            let mut state = self.lock();
            if state.last_attempt.elapsed() < self.min_refresh_interval {
                tracing::warn!(
                    "database login refused; its secret was read too recently to read again"
                );
                return false;
            }
            // Claimed before the call, so that the interval also holds while it is in flight.
            state.last_attempt = Instant::now();
        }
        match self.fetch().await {
            Ok((text, login)) => {
                let mut state = self.lock();
                if text == state.text {
                    tracing::warn!("database login refused; its secret has not changed");
                    return false;
                }
                state.text = text;
                state.login = login;
                tracing::info!("database login refused; read its secret again and got a new one");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "database login refused; reading its secret again failed");
                false
            }
        }
    }

    async fn fetch(&self) -> Result<(String, tokio_postgres::Config), String> {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let text = self.aws.secret_string(&self.arn).await?;
        let login = rds_secret_config(&text)?;
        Ok((text, login))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SecretState> {
        // The state is replaced whole; a panic elsewhere cannot leave it half-written.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

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
    fn rds_secret_is_read_with_numeric_or_string_port() {
        let pg = rds_secret_config(
            r#"{"username":"app","password":"pw","engine":"postgres","host":"db.example","port":5433,"dbname":"hooks"}"#,
        )
        .unwrap();
        assert_eq!(pg.get_user(), Some("app"));
        assert_eq!(pg.get_ports(), &[5433]);
        assert_eq!(pg.get_dbname(), Some("hooks"));
        let pg = rds_secret_config(r#"{"username":"a","password":"p","host":"h","port":"6432"}"#)
            .unwrap();
        assert_eq!(pg.get_ports(), &[6432]);
        assert_eq!(pg.get_dbname(), Some("postgres"));
    }

    #[test]
    fn rds_secret_errors_name_the_field_not_the_value() {
        let err = rds_secret_config(r#"{"username":"a","host":"h"}"#).unwrap_err();
        assert!(err.contains("password"));
        let err =
            rds_secret_config(r#"{"username":"a","password":"hunter2","host":"h","port":"x"}"#)
                .unwrap_err();
        assert!(!err.contains("hunter2"));
        assert!(rds_secret_config("nope").is_err());
    }

    #[test]
    fn uri_encoding_keeps_only_unreserved_characters() {
        assert_eq!(uri_encode("iam_user-1.x~"), "iam_user-1.x~");
        assert_eq!(uri_encode("a b/c+d=é"), "a%20b%2Fc%2Bd%3D%C3%A9");
    }
}
