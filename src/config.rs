//! The typed configuration, read once at cold start from environment variables. A bad or
//! missing setting stops the cold start with an error that names the setting.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::db::{DbSettings, TlsMode};
use crate::pipeline::RetryPolicy;
use crate::verify::{HmacScheme, IdLocation, Scheme, SignatureEncoding, DEFAULT_TOLERANCE_SECS};

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

/// Default body limit per source: Stripe and GitHub cap their payloads well below this.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// One configured source: how it signs, and how large a body it may send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The `{source}` path segment.
    pub name: String,
    /// Signature scheme and id location.
    pub scheme: Scheme,
    /// Larger bodies are refused with 413 before any other work.
    pub max_body_bytes: usize,
}

/// Where webhook secrets come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretsFrom {
    /// `HOOKCLAIM_SECRETS`: the secrets document in an environment variable (local use).
    Env(String),
    /// `HOOKCLAIM_SECRETS_ARN`: a Secrets Manager secret holding the same document.
    SecretsManager {
        /// The secret's ARN or name.
        arn: String,
        /// Cached secrets younger than this are not refetched after a failed verification.
        min_refresh_interval: Duration,
    },
}

/// Where database credentials come from.
#[derive(Debug, Clone)]
pub enum DatabaseFrom {
    /// `DATABASE_URL`.
    Url(Box<tokio_postgres::Config>),
    /// `DATABASE_SECRET_ARN`: an RDS-managed secret (username, password, host, port, dbname).
    SecretsManager {
        /// The secret's ARN or name.
        arn: String,
        /// `DATABASE_SECRET_REFRESH_SECS`: after a refused login, the secret is read again only
        /// if it was last read longer ago than this.
        min_refresh_interval: Duration,
    },
}

/// Which shipped processor the `webhook` and `retention` binaries run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessorChoice {
    /// [`crate::processor::StoreOnly`].
    Store,
    /// [`crate::processor::Licences`].
    Licence,
    /// [`crate::forward::Forwarder`] to `FORWARD_URL`.
    Forward {
        /// Where deliveries are posted.
        url: http::Uri,
        /// Bound on one call.
        timeout: Duration,
    },
}

/// What the retention function does on a scheduled run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionSettings {
    /// Finished rows older than this are deleted.
    pub retention: Duration,
    /// Payloads of done rows older than this are dropped (the key stays); `None` keeps them.
    pub trim_after: Option<Duration>,
    /// Rows per purge or trim statement.
    pub batch_size: i64,
    /// The run stops this long before the invocation's deadline.
    pub deadline_margin: Duration,
}

/// All settings, read once per cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// Sources by name.
    pub sources: BTreeMap<String, Source>,
    /// Where webhook secrets come from; `None` where none are configured (the retention
    /// function needs none).
    pub secrets: Option<SecretsFrom>,
    /// Where database credentials come from.
    pub database: DatabaseFrom,
    /// Connection settings other than credentials (host etc. are filled in from `database`).
    pub tls: TlsMode,
    /// CA bundle for `verify-full`.
    pub ca_file: Option<PathBuf>,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Statement timeout.
    pub statement_timeout: Duration,
    /// Use RDS IAM authentication tokens instead of a password.
    pub iam_auth: bool,
    /// `DATABASE_IAM_USER`: with IAM authentication, the database user to connect as, in place
    /// of the user in `DATABASE_URL` or the secret.
    pub iam_user: Option<String>,
    /// `DATABASE_POOLED`: the database is reached through a transaction pooler (PgBouncer in
    /// transaction mode, RDS Proxy), so no startup `options` are sent; see [`DbSettings::pooled`].
    pub pooled: bool,
    /// Added to the invocation's deadline to make the lease.
    pub lease_margin: Duration,
    /// Retry policy for failed processing.
    pub retry: RetryPolicy,
    /// Retention function settings.
    pub retention: RetentionSettings,
    /// Which shipped processor to run.
    pub processor: ProcessorChoice,
}

/// How a source is written in `HOOKCLAIM_SOURCES`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceSpec {
    kind: String,
    tolerance_secs: Option<u64>,
    max_body_bytes: Option<usize>,
    signature_header: Option<String>,
    prefix: Option<String>,
    encoding: Option<String>,
    id_header: Option<String>,
    id_pointer: Option<String>,
    event_type_pointer: Option<String>,
}

const SOURCES: &str = "HOOKCLAIM_SOURCES";

impl Config {
    /// Reads the configuration from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the configuration through `get`, so tests need not touch the process environment.
    /// An empty value counts as unset (SAM passes declared-but-empty variables).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let raw_sources = get(SOURCES).ok_or_else(|| {
            bad(
                SOURCES,
                "not set; give a JSON object of source name to settings",
            )
        })?;
        let sources = parse_sources(&raw_sources)?;

        let secrets = match (get("HOOKCLAIM_SECRETS_ARN"), get("HOOKCLAIM_SECRETS")) {
            (Some(arn), _) => Some(SecretsFrom::SecretsManager {
                arn,
                // Never 0: the interval is what keeps forged deliveries from turning into
                // Secrets Manager calls.
                min_refresh_interval: Duration::from_secs(int(
                    &get,
                    "HOOKCLAIM_SECRETS_REFRESH_SECS",
                    60,
                    1,
                    86_400,
                )?),
            }),
            (None, Some(doc)) => {
                crate::secret::SecretsDocument::parse(&doc)
                    .map_err(|e| bad("HOOKCLAIM_SECRETS", e.to_string()))?;
                Some(SecretsFrom::Env(doc))
            }
            (None, None) => None,
        };

        let database = match (get("DATABASE_SECRET_ARN"), get("DATABASE_URL")) {
            (Some(arn), _) => DatabaseFrom::SecretsManager {
                arn,
                min_refresh_interval: Duration::from_secs(int(
                    &get,
                    "DATABASE_SECRET_REFRESH_SECS",
                    10,
                    1,
                    86_400,
                )?),
            },
            (_, Some(url)) => DatabaseFrom::Url(Box::new(url.parse().map_err(|_| {
                bad(
                    "DATABASE_URL",
                    "not a valid postgres:// URL or key=value connection string",
                )
            })?)),
            _ => {
                return Err(bad(
                    "DATABASE_URL",
                    "neither DATABASE_URL nor DATABASE_SECRET_ARN is set",
                ))
            }
        };

        let tls: TlsMode = get("DATABASE_TLS")
            .as_deref()
            .unwrap_or("require")
            .parse()
            .map_err(|e| bad("DATABASE_TLS", e))?;
        let ca_file = get("DATABASE_CA_FILE").map(PathBuf::from);
        if tls == TlsMode::VerifyFull && ca_file.is_none() {
            return Err(bad(
                "DATABASE_CA_FILE",
                "required when DATABASE_TLS is verify-full",
            ));
        }
        let iam_auth = flag(&get, "DATABASE_IAM_AUTH")?;
        if iam_auth && tls == TlsMode::Disable {
            return Err(bad("DATABASE_TLS", "IAM authentication requires TLS"));
        }
        let iam_user = get("DATABASE_IAM_USER");
        if iam_user.is_some() && !iam_auth {
            return Err(bad(
                "DATABASE_IAM_USER",
                "only applies with DATABASE_IAM_AUTH=true",
            ));
        }

        let pooled = flag(&get, "DATABASE_POOLED")?;

        let retry = RetryPolicy {
            max_attempts: int(&get, "MAX_ATTEMPTS", 8, 1, 1000)? as i32,
            base: Duration::from_secs(secs(&get, "RETRY_BASE_SECS", 30)?),
            cap: Duration::from_secs(secs(&get, "RETRY_MAX_SECS", 3600)?),
        };
        let retention_days = int(&get, "RETENTION_DAYS", 30, 1, 36500)?;
        let trim_days = match get("TRIM_PAYLOAD_AFTER_DAYS") {
            None => None,
            Some(_) => Some(int(&get, "TRIM_PAYLOAD_AFTER_DAYS", 0, 0, retention_days)?),
        };

        Ok(Config {
            sources,
            secrets,
            database,
            tls,
            ca_file,
            connect_timeout: Duration::from_millis(int(
                &get,
                "DATABASE_CONNECT_TIMEOUT_MS",
                3000,
                100,
                60_000,
            )?),
            statement_timeout: Duration::from_millis(int(
                &get,
                "DATABASE_STATEMENT_TIMEOUT_MS",
                5000,
                100,
                600_000,
            )?),
            iam_auth,
            iam_user,
            pooled,
            lease_margin: Duration::from_secs(secs(&get, "LEASE_MARGIN_SECS", 10)?),
            retry,
            retention: RetentionSettings {
                retention: days(retention_days),
                trim_after: trim_days.map(days),
                batch_size: int(&get, "PURGE_BATCH_SIZE", 5000, 1, 100_000)? as i64,
                deadline_margin: Duration::from_secs(secs(
                    &get,
                    "RETENTION_DEADLINE_MARGIN_SECS",
                    5,
                )?),
            },
            processor: match get("HOOKCLAIM_PROCESSOR").as_deref().unwrap_or("store") {
                "store" => ProcessorChoice::Store,
                "licence" => ProcessorChoice::Licence,
                "forward" => ProcessorChoice::Forward {
                    url: get("FORWARD_URL")
                        .and_then(|u| u.parse::<http::Uri>().ok())
                        .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
                        .ok_or_else(|| {
                            bad(
                                "FORWARD_URL",
                                "HOOKCLAIM_PROCESSOR=forward needs an http:// or https:// URL",
                            )
                        })?,
                    timeout: Duration::from_millis(int(
                        &get,
                        "FORWARD_TIMEOUT_MS",
                        5000,
                        100,
                        60_000,
                    )?),
                },
                other => {
                    return Err(bad(
                        "HOOKCLAIM_PROCESSOR",
                        format!("{other:?} is not one of store, licence, forward"),
                    ))
                }
            },
        })
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

    /// Connection settings for `pg` credentials.
    pub fn db_settings(&self, pg: tokio_postgres::Config) -> DbSettings {
        DbSettings {
            pg,
            tls: self.tls,
            ca_file: self.ca_file.clone(),
            connect_timeout: self.connect_timeout,
            statement_timeout: self.statement_timeout,
            keepalive_idle: Duration::from_secs(30),
            pooled: self.pooled,
        }
    }
}

fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

fn int(
    get: &impl Fn(&str) -> Option<String>,
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

fn secs(
    get: &impl Fn(&str) -> Option<String>,
    setting: &'static str,
    default: u64,
) -> Result<u64, ConfigError> {
    int(get, setting, default, 0, 30 * 86_400)
}

fn flag(get: &impl Fn(&str) -> Option<String>, setting: &'static str) -> Result<bool, ConfigError> {
    match get(setting).as_deref().map(str::trim) {
        None | Some("") | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some(other) => Err(bad(setting, format!("{other:?} is not true or false"))),
    }
}

/// Parses `HOOKCLAIM_SOURCES`.
pub fn parse_sources(json: &str) -> Result<BTreeMap<String, Source>, ConfigError> {
    let specs: BTreeMap<String, SourceSpec> =
        serde_json::from_str(json).map_err(|e| bad(SOURCES, format!("invalid JSON: {e}")))?;
    if specs.is_empty() {
        return Err(bad(SOURCES, "no source configured"));
    }
    specs
        .into_iter()
        .map(|(name, spec)| {
            let source = source(&name, spec)
                .map_err(|problem| bad(SOURCES, format!("source {name:?}: {problem}")))?;
            Ok((name, source))
        })
        .collect()
}

fn source(name: &str, spec: SourceSpec) -> Result<Source, String> {
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !name_ok {
        return Err("names are 1-64 characters of a-z, 0-9, - and _".into());
    }
    let tolerance_secs = spec.tolerance_secs.unwrap_or(DEFAULT_TOLERANCE_SECS);
    let hmac_only = [
        ("signature_header", spec.signature_header.is_some()),
        ("prefix", spec.prefix.is_some()),
        ("encoding", spec.encoding.is_some()),
        ("id_header", spec.id_header.is_some()),
        ("id_pointer", spec.id_pointer.is_some()),
        ("event_type_pointer", spec.event_type_pointer.is_some()),
    ];
    if spec.kind != "hmac" {
        if let Some((field, _)) = hmac_only.iter().find(|(_, set)| *set) {
            return Err(format!("{field} only applies to kind hmac"));
        }
    }
    let scheme = match spec.kind.as_str() {
        "stripe" => Scheme::Stripe { tolerance_secs },
        "github" => Scheme::Github,
        "standard" => Scheme::Standard { tolerance_secs },
        "hmac" => {
            let signature_header = spec
                .signature_header
                .filter(|h| http::HeaderName::from_bytes(h.as_bytes()).is_ok())
                .ok_or("kind hmac needs a valid signature_header")?;
            let encoding = match spec.encoding.as_deref().unwrap_or("hex") {
                "hex" => SignatureEncoding::Hex,
                "base64" => SignatureEncoding::Base64,
                other => return Err(format!("encoding {other:?} is not hex or base64")),
            };
            let id = match (spec.id_header, spec.id_pointer) {
                (Some(_), Some(_)) => return Err("give id_header or id_pointer, not both".into()),
                (Some(h), None) => IdLocation::Header(h),
                (None, Some(p)) if p.starts_with('/') => IdLocation::JsonPointer(p),
                (None, Some(_)) => return Err("id_pointer must be a JSON pointer like /id".into()),
                (None, None) => IdLocation::BodySha256,
            };
            if let Some(p) = &spec.event_type_pointer {
                if !p.starts_with('/') {
                    return Err("event_type_pointer must be a JSON pointer like /type".into());
                }
            }
            Scheme::Hmac(HmacScheme {
                signature_header,
                prefix: spec.prefix.unwrap_or_default(),
                encoding,
                id,
                event_type_pointer: spec.event_type_pointer,
            })
        }
        other => {
            return Err(format!(
                "kind {other:?} is not one of stripe, github, standard, hmac"
            ))
        }
    };
    let max_body_bytes = spec.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
    if max_body_bytes == 0 || max_body_bytes > 6 * 1024 * 1024 {
        return Err("max_body_bytes must be 1..=6291456 (Lambda's request limit)".into());
    }
    Ok(Source {
        name: name.to_string(),
        scheme,
        max_body_bytes,
    })
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
        assert_eq!(c.tls, TlsMode::Require);
        assert_eq!(c.retention.retention, Duration::from_secs(30 * 86_400));
        assert_eq!(c.retry.max_attempts, 8);
        assert_eq!(c.processor, ProcessorChoice::Store);
        assert_eq!(c.sources["stripe"].max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        assert!(!c.pooled);
    }

    #[test]
    fn database_pooled_reaches_the_connection_settings() {
        let pg: tokio_postgres::Config = "postgres://u@localhost/db".parse().unwrap();
        assert!(!with(&[]).unwrap().db_settings(pg.clone()).pooled);
        let pooled = with(&[("DATABASE_POOLED", "true")]).unwrap();
        assert!(pooled.pooled);
        assert!(pooled.db_settings(pg).pooled);
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
            (&[("RETENTION_DAYS", "ten")], "RETENTION_DAYS"),
            (&[("HOOKCLAIM_PROCESSOR", "magic")], "HOOKCLAIM_PROCESSOR"),
            (&[("HOOKCLAIM_PROCESSOR", "forward")], "FORWARD_URL"),
            (
                &[
                    ("HOOKCLAIM_PROCESSOR", "forward"),
                    ("FORWARD_URL", "ftp://x"),
                ],
                "FORWARD_URL",
            ),
            (&[("DATABASE_IAM_AUTH", "yes")], "DATABASE_IAM_AUTH"),
            (
                &[("DATABASE_IAM_AUTH", "true"), ("DATABASE_TLS", "disable")],
                "DATABASE_TLS",
            ),
            (&[("DATABASE_IAM_USER", "app")], "DATABASE_IAM_USER"),
            (&[("DATABASE_POOLED", "pgbouncer")], "DATABASE_POOLED"),
            (
                &[
                    ("HOOKCLAIM_SECRETS_ARN", "arn"),
                    ("HOOKCLAIM_SECRETS_REFRESH_SECS", "0"),
                ],
                "HOOKCLAIM_SECRETS_REFRESH_SECS",
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
    fn empty_values_count_as_unset() {
        let c = with(&[
            ("HOOKCLAIM_SECRETS_ARN", ""),
            ("DATABASE_SECRET_ARN", ""),
            ("MAX_ATTEMPTS", ""),
        ])
        .unwrap();
        assert!(matches!(c.secrets, Some(SecretsFrom::Env(_))));
        assert!(matches!(c.database, DatabaseFrom::Url(_)));
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
            })
        );
        assert!(matches!(
            c.database,
            DatabaseFrom::SecretsManager { ref arn, min_refresh_interval }
                if arn == "arn:db" && min_refresh_interval == Duration::from_secs(10)
        ));
        assert!(c.iam_auth);
        assert_eq!(c.iam_user.as_deref(), Some("hookclaim"));
    }

    #[test]
    fn secrets_never_appear_in_config_errors() {
        let err = with(&[("HOOKCLAIM_SECRETS", r#"{"stripe": whsec_topsecret}"#)]).unwrap_err();
        assert!(!err.to_string().contains("topsecret"));
    }

    #[test]
    fn hmac_source_reads_every_field() {
        let s = parse_sources(
            r#"{"acme":{"kind":"hmac","signature_header":"X-Sig","prefix":"sha256=",
                "encoding":"base64","id_pointer":"/id","event_type_pointer":"/event"}}"#,
        )
        .unwrap();
        assert_eq!(
            s["acme"].scheme,
            Scheme::Hmac(HmacScheme {
                signature_header: "X-Sig".into(),
                prefix: "sha256=".into(),
                encoding: SignatureEncoding::Base64,
                id: IdLocation::JsonPointer("/id".into()),
                event_type_pointer: Some("/event".into()),
            })
        );
    }
}
