//! The typed configuration, read once at cold start from environment variables. A bad or
//! missing setting stops the cold start with an error that names the setting.

mod database;
mod destinations;
pub(crate) mod features;
mod metrics;
mod processing;
mod sources;

use std::collections::BTreeMap;
use std::time::Duration;

pub use database::{DatabaseConfig, DatabaseFrom, DbSettings, MigrateMode, TlsMode};
// What only the parts a build may leave out read: re-exported with them, so a build without
// them has no unused import.
#[cfg(feature = "secrets-manager")]
pub use database::{Endpoint, LoginParts};
#[cfg(feature = "destinations")]
pub use destinations::{DestinationConfig, Destinations, Target};
pub use processing::{ProcessorChoice, RetentionSettings, RetryPolicy};
pub use sources::{SecretsFrom, Source};
/// The parsers and limits that hookclaim's own tests, benchmarks and fuzz targets reach directly.
#[cfg(feature = "internals")]
pub use {
    database::{DEFAULT_DBNAME, DEFAULT_PORT},
    destinations::{
        parse as parse_destinations, DEFAULT_DESTINATION_TIMEOUT, EVENTBRIDGE_MAX_BYTES,
        SQS_MAX_BYTES, STEP_FUNCTIONS_MAX_BYTES,
    },
    sources::{parse_sources, DEFAULT_MAX_BODY_BYTES, MAX_BODY_BYTES_LIMIT},
};

/// A setting that could not be used. Names the variable; never quotes a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {problem}")]
pub struct ConfigError {
    /// The environment variable at fault.
    pub setting: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

fn bad(setting: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        setting,
        problem: problem.into(),
    }
}

/// The JSON object read as `T`; an error starts with the setting's path
/// (`signature_list.separator`, `message[2]`) where it is not the whole object.
fn typed<T: serde::de::DeserializeOwned>(
    object: serde_json::Map<String, serde_json::Value>,
) -> Result<T, String> {
    serde_path_to_error::deserialize(serde_json::Value::Object(object)).map_err(|e| {
        let path = e.path().to_string();
        match path.as_str() {
            "." => e.into_inner().to_string(),
            _ => format!("{path}: {}", e.into_inner()),
        }
    })
}

/// All settings, read once per cold start from the environment ([`Config::from_env`]); what
/// each variable means is in `docs/configuration.md`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Sources by name.
    pub(crate) sources: BTreeMap<String, Source>,
    /// Where webhook secrets come from; `None` where none are configured (the retention
    /// function needs none).
    pub(crate) secrets: Option<SecretsFrom>,
    /// The database: credentials, TLS, timeouts.
    pub(crate) database: DatabaseConfig,
    /// Added to the invocation's deadline to make the lease.
    pub(crate) lease_margin: Duration,
    /// Retry policy for failed processing.
    pub(crate) retry: RetryPolicy,
    /// Retention function settings.
    pub(crate) retention: RetentionSettings,
    /// Which shipped processor the shipped binaries run.
    pub(crate) processor: ProcessorChoice,
    /// `HOOKCLAIM_METRICS_NAMESPACE`: the CloudWatch namespace of every metric (default
    /// `hookclaim`).
    pub(crate) metrics_namespace: String,
}

/// Looks a setting up by name; `None` when unset.
type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Config {
    /// Reads the configuration from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the configuration through `get`, so tests need not touch the process environment.
    /// An empty value counts as unset (SAM passes declared-but-empty variables).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let get: Lookup<'_> = &get;
        let config = Config {
            sources: sources::read_sources(get)?,
            secrets: sources::read_secrets(get)?,
            database: DatabaseConfig::read(get)?,
            lease_margin: Duration::from_secs(secs(get, "LEASE_MARGIN_SECS", 10)?),
            retry: processing::read_retry(get)?,
            retention: processing::read_retention(get)?,
            processor: processing::read_processor(get)?,
            metrics_namespace: metrics::read_namespace(get)?,
        };
        if let ProcessorChoice::Destinations(d) = &config.processor {
            destinations::check_sources(d, &config.sources)?;
        }
        features::check(&config, features::Part::in_build)?;
        Ok(config)
    }

    /// The webhook secrets' origin, which the webhook function cannot run without.
    pub fn require_secrets(&self) -> Result<&SecretsFrom, ConfigError> {
        self.secrets.as_ref().ok_or_else(|| {
            bad(
                "HOOKCLAIM_SECRETS",
                "neither HOOKCLAIM_SECRETS nor HOOKCLAIM_SECRETS_ARN is set",
            )
        })
    }
}

fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

/// A whole number in `min..=max`, or `default` when unset.
fn int(
    get: Lookup<'_>,
    setting: &'static str,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, ConfigError> {
    let Some(raw) = get(setting) else {
        return Ok(default);
    };
    let n: u64 = raw
        .trim()
        .parse()
        .map_err(|_| bad(setting, format!("{raw:?} is not a whole number")))?;
    if n < min || n > max {
        return Err(bad(setting, format!("{n} is outside {min}..={max}")));
    }
    Ok(n)
}

/// A number of seconds, at most 30 days.
fn secs(get: Lookup<'_>, setting: &'static str, default: u64) -> Result<u64, ConfigError> {
    int(get, setting, default, 0, 30 * 86_400)
}

/// One of a fixed set of words, read as the serde enum `T`, or `default` when unset.
fn choice<T: serde::de::DeserializeOwned>(
    get: Lookup<'_>,
    setting: &'static str,
    default: T,
) -> Result<T, ConfigError> {
    match get(setting) {
        None => Ok(default),
        Some(raw) => serde_json::from_value(raw.trim().into()).map_err(|e| bad(setting, e.to_string())),
    }
}

/// `true`/`1` or `false`/`0`; unset is false.
fn flag(get: Lookup<'_>, setting: &'static str) -> Result<bool, ConfigError> {
    match get(setting).as_deref().map(str::trim) {
        None | Some("") | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some(other) => Err(bad(setting, format!("{other:?} is not true or false"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    const OK: &[(&str, &str)] = &[
        ("HOOKCLAIM_SOURCES", r#"{"stripe":{"kind":"stripe"}}"#),
        ("HOOKCLAIM_SECRETS", r#"{"stripe":"whsec_x"}"#),
        ("DATABASE_URL", "postgres://u@localhost/db"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Result<Config, ConfigError> {
        let mut pairs: Vec<(&str, &str)> = OK.to_vec();
        pairs.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
        pairs.extend_from_slice(extra);
        Config::from_lookup(lookup(&pairs))
    }

    #[test]
    fn minimal_configuration_has_documented_defaults() {
        let c = with(&[]).unwrap();
        assert_eq!(c.database.tls, TlsMode::Require);
        assert_eq!(c.retention.retention, Duration::from_secs(30 * 86_400));
        assert_eq!(c.retry.max_attempts, 8);
        assert_eq!(c.retry.max_delivery_age, Duration::from_secs(3 * 86_400));
        assert_eq!(c.retention.redrive_timeout, Duration::from_secs(10));
        assert_eq!(c.processor, ProcessorChoice::Store);
        assert_eq!(c.sources["stripe"].max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        assert!(!c.database.pooled);
        assert_eq!(c.database.migrate, MigrateMode::Auto);
        assert_eq!(c.database.endpoint, Endpoint::default());
    }

    #[test]
    fn migrate_mode_and_host_settings_are_read() {
        let c = with(&[
            ("HOOKCLAIM_MIGRATE", "never"),
            ("DATABASE_HOST", "proxy.example"),
            ("DATABASE_PORT", "6432"),
            ("DATABASE_NAME", "hooks"),
        ])
        .unwrap();
        assert_eq!(c.database.migrate, MigrateMode::Never);
        assert_eq!(
            c.database.endpoint,
            Endpoint {
                host: Some("proxy.example".into()),
                port: Some(6432),
                dbname: Some("hooks".into()),
            }
        );
        // The settings apply over DATABASE_URL too, keeping its login.
        let DatabaseFrom::Url(url) = &c.database.from else {
            panic!("DATABASE_URL login expected");
        };
        let pg = c.database.url_login(url).unwrap();
        assert_eq!(pg.get_user(), Some("u"));
        assert_eq!(
            pg.get_hosts(),
            &[tokio_postgres::config::Host::Tcp("proxy.example".into())]
        );
        assert_eq!(pg.get_ports(), &[6432]);
        assert_eq!(pg.get_dbname(), Some("hooks"));
    }

    #[test]
    fn the_owners_login_is_read_apart_from_the_application_roles() {
        assert!(with(&[]).unwrap().database.owner.is_none(), "one login");
        let c = with(&[
            ("DATABASE_SECRET_ARN", "arn:app"),
            ("DATABASE_OWNER_SECRET_ARN", "arn:owner"),
            ("DATABASE_OWNER_URL", "postgres://ignored@localhost/db"),
        ])
        .unwrap();
        assert!(
            matches!(&c.database.from, DatabaseFrom::SecretsManager { arn, .. } if arn == "arn:app")
        );
        assert!(matches!(
            &c.database.owner,
            Some(DatabaseFrom::SecretsManager { arn, .. }) if arn == "arn:owner"
        ));
        let local = with(&[("DATABASE_OWNER_URL", "postgres://owner@localhost/db")]).unwrap();
        let Some(DatabaseFrom::Url(url)) = &local.database.owner else {
            panic!("the owner's URL expected");
        };
        assert_eq!(url.get_user(), Some("owner"));
    }

    #[test]
    fn database_pooled_reaches_the_connection_settings() {
        let pg: tokio_postgres::Config = "postgres://u@localhost/db".parse().unwrap();
        assert!(!with(&[]).unwrap().database.settings(pg.clone()).pooled);
        let pooled = with(&[("DATABASE_POOLED", "true")]).unwrap();
        assert!(pooled.database.pooled);
        assert!(pooled.database.settings(pg).pooled);
    }

    #[test]
    fn keys_of_sources_whose_signatures_do_not_expire_are_kept_longer_by_default() {
        let sources = r#"{"stripe":{"kind":"stripe"},"github":{"kind":"github"},
            "gitlab":{"kind":"gitlab"},"slack":{"kind":"slack"},
            "pinned":{"kind":"stripe","long_key_retention":true},
            "short":{"kind":"github","long_key_retention":false}}"#;
        let config = with(&[("HOOKCLAIM_SOURCES", sources)]).unwrap();
        let long = |name: &str| config.sources[name].long_key_retention;
        assert!(
            !long("stripe") && !long("slack"),
            "signed timestamps expire"
        );
        assert!(
            long("github") && long("gitlab"),
            "nothing in the request expires"
        );
        assert!(
            long("pinned") && !long("short"),
            "the source's own setting wins"
        );
        let r = &config.retention;
        assert_eq!(r.key_retention, Duration::from_secs(365 * 86_400));
        assert_eq!((r.trim_after, r.trim_dead_after), (None, None));
        // A RETENTION_DAYS beyond the default key retention raises it too.
        let long_payloads = with(&[("RETENTION_DAYS", "400")]).unwrap().retention;
        assert_eq!(long_payloads.key_retention, long_payloads.retention);
    }

    #[test]
    fn each_bad_setting_is_named_in_the_error() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("HOOKCLAIM_SOURCES", "{")], "HOOKCLAIM_SOURCES"),
            (&[("HOOKCLAIM_SOURCES", "{}")], "HOOKCLAIM_SOURCES"),
            (
                &[("HOOKCLAIM_SOURCES", r#"{"x":{"kind":"paypal"}}"#)],
                "HOOKCLAIM_SOURCES",
            ),
            (
                &[("HOOKCLAIM_SOURCES", r#"{"X Y":{"kind":"github"}}"#)],
                "HOOKCLAIM_SOURCES",
            ),
            (
                &[(
                    "HOOKCLAIM_SOURCES",
                    r#"{"g":{"kind":"github","prefix":"x"}}"#,
                )],
                "HOOKCLAIM_SOURCES",
            ),
            (
                &[("HOOKCLAIM_SOURCES", r#"{"h":{"kind":"hmac"}}"#)],
                "HOOKCLAIM_SOURCES",
            ),
            (
                &[("HOOKCLAIM_SOURCES", r#"{"g":{"kind":"github","typo":1}}"#)],
                "HOOKCLAIM_SOURCES",
            ),
            (&[("HOOKCLAIM_SECRETS", "not json")], "HOOKCLAIM_SECRETS"),
            (&[("DATABASE_URL", "mysql://nope:x:y")], "DATABASE_URL"),
            (&[("DATABASE_TLS", "sometimes")], "DATABASE_TLS"),
            (&[("DATABASE_TLS", "verify-full")], "DATABASE_CA_FILE"),
            (&[("MAX_ATTEMPTS", "0")], "MAX_ATTEMPTS"),
            (&[("REDRIVE_TIMEOUT_SECS", "0")], "REDRIVE_TIMEOUT_SECS"),
            (&[("REDRIVE_TIMEOUT_SECS", "901")], "REDRIVE_TIMEOUT_SECS"),
            (&[("RETENTION_DAYS", "ten")], "RETENTION_DAYS"),
            (
                &[("RETENTION_DAYS", "90"), ("KEY_RETENTION_DAYS", "60")],
                "KEY_RETENTION_DAYS",
            ),
            (
                &[("TRIM_DEAD_PAYLOAD_AFTER_DAYS", "31")],
                "TRIM_DEAD_PAYLOAD_AFTER_DAYS",
            ),
            (
                &[(
                    "HOOKCLAIM_SOURCES",
                    r#"{"g":{"kind":"github","long_key_retention":"yes"}}"#,
                )],
                "HOOKCLAIM_SOURCES",
            ),
            (&[("HOOKCLAIM_PROCESSOR", "magic")], "HOOKCLAIM_PROCESSOR"),
            (&[("HOOKCLAIM_PROCESSOR", "forward")], "FORWARD_URL"),
            (
                &[
                    ("HOOKCLAIM_PROCESSOR", "forward"),
                    ("FORWARD_URL", "ftp://x"),
                ],
                "FORWARD_URL",
            ),
            (
                &[
                    ("HOOKCLAIM_PROCESSOR", "forward"),
                    ("FORWARD_URL", "https://x"),
                    ("FORWARD_CONFLICT", "ignore"),
                ],
                "FORWARD_CONFLICT",
            ),
            (&[("DATABASE_IAM_AUTH", "yes")], "DATABASE_IAM_AUTH"),
            (
                &[("DATABASE_IAM_AUTH", "true"), ("DATABASE_TLS", "disable")],
                "DATABASE_TLS",
            ),
            (&[("DATABASE_IAM_USER", "app")], "DATABASE_IAM_USER"),
            (&[("DATABASE_POOLED", "pgbouncer")], "DATABASE_POOLED"),
            (&[("DATABASE_HOST", "db.example:5432")], "DATABASE_HOST"),
            (&[("DATABASE_PORT", "0")], "DATABASE_PORT"),
            (&[("DATABASE_PORT", "five")], "DATABASE_PORT"),
            (&[("HOOKCLAIM_MIGRATE", "sometimes")], "HOOKCLAIM_MIGRATE"),
            (
                &[("DATABASE_OWNER_URL", "mysql://nope:x:y")],
                "DATABASE_OWNER_URL",
            ),
            (
                &[
                    ("HOOKCLAIM_MIGRATE", "never"),
                    ("DATABASE_OWNER_URL", "postgres://owner@localhost/db"),
                ],
                "DATABASE_OWNER_URL",
            ),
            (
                &[
                    ("HOOKCLAIM_MIGRATE", "never"),
                    ("DATABASE_OWNER_SECRET_ARN", "arn:owner"),
                ],
                "DATABASE_OWNER_SECRET_ARN",
            ),
            (
                &[(
                    "HOOKCLAIM_SOURCES",
                    r#"{"big":{"kind":"github","max_body_bytes":6291456}}"#,
                )],
                "HOOKCLAIM_SOURCES",
            ),
            (
                &[
                    ("HOOKCLAIM_SECRETS_ARN", "arn"),
                    ("HOOKCLAIM_SECRETS_REFRESH_SECS", "0"),
                ],
                "HOOKCLAIM_SECRETS_REFRESH_SECS",
            ),
            (
                &[
                    ("HOOKCLAIM_SECRETS_ARN", "arn"),
                    ("HOOKCLAIM_SECRETS_MAX_AGE_SECS", "0"),
                ],
                "HOOKCLAIM_SECRETS_MAX_AGE_SECS",
            ),
            (
                &[
                    ("DATABASE_SECRET_ARN", "arn"),
                    ("DATABASE_SECRET_REFRESH_SECS", "0"),
                ],
                "DATABASE_SECRET_REFRESH_SECS",
            ),
        ];
        for (extra, setting) in cases {
            let err = with(extra).expect_err(setting);
            assert_eq!(err.setting, *setting, "{extra:?}: {err}");
            assert!(err.to_string().starts_with(setting));
        }
    }

    #[test]
    fn words_with_a_fixed_set_of_values_are_refused_with_the_values_they_may_take() {
        let cases = [
            (
                ("DATABASE_TLS", "verify_full"),
                "DATABASE_TLS: unknown variant `verify_full`, expected one of `disable`, \
                 `require`, `verify-full`",
            ),
            (
                ("HOOKCLAIM_MIGRATE", "sometimes"),
                "HOOKCLAIM_MIGRATE: unknown variant `sometimes`, expected `auto` or `never`",
            ),
        ];
        for (setting, expected) in cases {
            assert_eq!(with(&[setting]).unwrap_err().to_string(), expected);
        }
        let forward = with(&[
            ("HOOKCLAIM_PROCESSOR", "forward"),
            ("FORWARD_URL", "https://x"),
            ("FORWARD_CONFLICT", "ignore"),
        ]);
        assert_eq!(
            forward.unwrap_err().to_string(),
            "FORWARD_CONFLICT: unknown variant `ignore`, expected `retry` or `done`"
        );
        let read = with(&[("DATABASE_TLS", " disable "), ("HOOKCLAIM_MIGRATE", "never")]).unwrap();
        assert_eq!(read.database.tls, TlsMode::Disable);
        assert_eq!(read.database.migrate, MigrateMode::Never);
    }

    #[test]
    fn settings_that_must_agree_or_be_present_say_so() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("HOOKCLAIM_SOURCES", "")],
                "HOOKCLAIM_SOURCES: not set; give a JSON object of source name to settings",
            ),
            (
                &[("DATABASE_URL", "")],
                "DATABASE_URL: neither DATABASE_URL nor DATABASE_SECRET_ARN is set",
            ),
            (
                &[
                    ("HOOKCLAIM_SECRETS_ARN", "arn"),
                    ("HOOKCLAIM_SECRETS_REFRESH_SECS", "600"),
                ],
                "HOOKCLAIM_SECRETS_REFRESH_SECS: 600 s is above HOOKCLAIM_SECRETS_MAX_AGE_SECS \
                 (300 s)",
            ),
            (
                &[
                    ("HOOKCLAIM_PROCESSOR", "destinations"),
                    (
                        "HOOKCLAIM_DESTINATIONS",
                        r#"{"strype":[{"kind":"sqs","queue_url":"https://q/1/a"}]}"#,
                    ),
                ],
                "HOOKCLAIM_DESTINATIONS: source \"strype\" is not configured in HOOKCLAIM_SOURCES",
            ),
        ];
        for (extra, expected) in cases {
            let err = with(extra).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{extra:?}: {err}");
        }
    }

    #[test]
    fn empty_values_count_as_unset() {
        let c = with(&[
            ("HOOKCLAIM_SECRETS_ARN", ""),
            ("DATABASE_SECRET_ARN", ""),
            ("MAX_ATTEMPTS", ""),
        ])
        .unwrap();
        assert!(matches!(c.secrets, Some(SecretsFrom::Env(_))));
        assert!(matches!(c.database.from, DatabaseFrom::Url(_)));
        let none = with(&[("HOOKCLAIM_SECRETS", "")]).unwrap();
        assert_eq!(
            none.require_secrets().unwrap_err().setting,
            "HOOKCLAIM_SECRETS"
        );
    }

    #[test]
    fn secret_arns_take_precedence_and_have_refresh_intervals() {
        let c = with(&[
            ("HOOKCLAIM_SECRETS_ARN", "arn:hooks"),
            ("DATABASE_SECRET_ARN", "arn:db"),
            ("DATABASE_IAM_AUTH", "true"),
            ("DATABASE_IAM_USER", "hookclaim"),
        ])
        .unwrap();
        assert_eq!(
            c.secrets,
            Some(SecretsFrom::SecretsManager {
                arn: "arn:hooks".into(),
                min_refresh_interval: Duration::from_secs(60),
                max_age: Duration::from_secs(300),
            })
        );
        assert!(matches!(
            c.database.from,
            DatabaseFrom::SecretsManager { ref arn, min_refresh_interval }
                if arn == "arn:db" && min_refresh_interval == Duration::from_secs(10)
        ));
        assert!(c.database.iam_auth);
        assert_eq!(c.database.iam_user.as_deref(), Some("hookclaim"));
    }

    #[test]
    fn secrets_never_appear_in_config_errors() {
        let err = with(&[("HOOKCLAIM_SECRETS", r#"{"stripe": whsec_topsecret}"#)]).unwrap_err();
        assert!(!err.to_string().contains("topsecret"));
    }

    #[test]
    fn no_configuration_type_prints_a_secret_through_debug() {
        let c = with(&[
            ("HOOKCLAIM_SECRETS", r#"{"stripe":"whsec_topsecret"}"#),
            ("DATABASE_URL", "postgres://app:hunter2pw@db.internal/app"),
        ])
        .unwrap();
        let printed = format!("{c:?} {c:#?} {:?}", c.database.settings(Default::default()));
        for secret in ["topsecret", "hunter2pw"] {
            assert!(!printed.contains(secret), "{secret} in {printed}");
        }
    }
}
