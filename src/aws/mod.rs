//! Everything hookclaim asks of AWS, made through aws-config so that the standard settings apply
//! (region, credentials, and `AWS_ENDPOINT_URL` and friends for a local endpoint in tests): the
//! environment's shared configuration, secret reads and the database login held in an
//! RDS-format secret ([`secrets`], feature `secrets-manager`), RDS IAM authentication tokens
//! ([`rds_iam`], feature `rds-iam`), and the clients of the destinations deliveries fan out to
//! (SQS, EventBridge, Step Functions; feature `destinations`). A build without any of these
//! features has no AWS SDK and no such module.

#[cfg(feature = "rds-iam")]
pub mod rds_iam;
#[cfg(feature = "secrets-manager")]
pub mod secrets;

use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use tokio::sync::OnceCell;

#[cfg(feature = "rds-iam")]
pub use rds_iam::RdsIamAuth;
#[cfg(feature = "secrets-manager")]
pub use secrets::{DatabaseSecret, SecretLoginError};

/// aws-config's loader of the standard settings, with the HTTPS client every AWS call of
/// hookclaim makes: the SDK's own client on rustls with ring, the crypto library of hookclaim's
/// other TLS connections (the SDK's default client is on aws-lc).
pub fn config_loader() -> aws_config::ConfigLoader {
    let https = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    aws_config::defaults(BehaviorVersion::latest()).http_client(https)
}

/// The execution environment's AWS configuration and clients, made on first use and shared by
/// everything that calls AWS. Making them calls nothing; an environment configured entirely
/// from environment variables never makes them.
#[derive(Default)]
pub struct Aws {
    config: OnceCell<SdkConfig>,
    #[cfg(feature = "secrets-manager")]
    secrets_manager: OnceCell<aws_sdk_secretsmanager::Client>,
    #[cfg(feature = "destinations")]
    sqs: OnceCell<aws_sdk_sqs::Client>,
    #[cfg(feature = "destinations")]
    eventbridge: OnceCell<aws_sdk_eventbridge::Client>,
    #[cfg(feature = "destinations")]
    step_functions: OnceCell<aws_sdk_sfn::Client>,
}

impl Aws {
    #[cfg(feature = "internals")]
    /// Clients made from `config` instead of the environment's defaults (another endpoint).
    pub fn with_config(config: SdkConfig) -> Self {
        Aws {
            config: OnceCell::new_with(Some(config)),
            ..Aws::default()
        }
    }

    /// The configuration from the environment (variables, profile files, the Lambda role).
    pub async fn config(&self) -> &SdkConfig {
        self.config.get_or_init(|| config_loader().load()).await
    }

    #[cfg(feature = "secrets-manager")]
    /// The Secrets Manager client.
    pub async fn secrets_manager(&self) -> &aws_sdk_secretsmanager::Client {
        let config = self.config().await;
        self.secrets_manager
            .get_or_init(|| async { aws_sdk_secretsmanager::Client::new(config) })
            .await
    }

    #[cfg(feature = "destinations")]
    /// The SQS client.
    pub async fn sqs(&self) -> &aws_sdk_sqs::Client {
        let config = self.config().await;
        self.sqs
            .get_or_init(|| async { aws_sdk_sqs::Client::new(config) })
            .await
    }

    #[cfg(feature = "destinations")]
    /// The EventBridge client.
    pub async fn eventbridge(&self) -> &aws_sdk_eventbridge::Client {
        let config = self.config().await;
        self.eventbridge
            .get_or_init(|| async { aws_sdk_eventbridge::Client::new(config) })
            .await
    }

    #[cfg(feature = "destinations")]
    /// The Step Functions client.
    pub async fn step_functions(&self) -> &aws_sdk_sfn::Client {
        let config = self.config().await;
        self.step_functions
            .get_or_init(|| async { aws_sdk_sfn::Client::new(config) })
            .await
    }

    #[cfg(feature = "secrets-manager")]
    /// Reads a secret's string value: one `GetSecretValue` call.
    pub async fn secret_string(&self, secret_id: &str) -> Result<String, String> {
        secrets::secret_string(self.secrets_manager().await, secret_id).await
    }
}
