//! Sources and their secrets: `HOOKCLAIM_SOURCES`, `HOOKCLAIM_SECRETS`,
//! `HOOKCLAIM_SECRETS_ARN`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{bad, int, ConfigError, Lookup};
use crate::verify::{HmacScheme, IdLocation, Scheme, SignatureEncoding, DEFAULT_TOLERANCE_SECS};

const SOURCES: &str = "HOOKCLAIM_SOURCES";

/// Default body limit per source: Stripe and GitHub cap their payloads well below this.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// The largest request Lambda accepts for a synchronous invocation: the whole event, of which
/// the body is one field (`RequestEntityTooLargeException` above it).
pub const LAMBDA_REQUEST_LIMIT: usize = 6 * 1024 * 1024;

/// What the event around the body may take: headers, the request context, JSON quoting.
pub const EVENT_ENVELOPE_ALLOWANCE: usize = 128 * 1024;

/// The highest `max_body_bytes` a source may have: a body this large still fits in Lambda's
/// request when API Gateway base64-encodes it (binary content types), which makes it 4/3 as long.
/// A larger request never reaches the function, so a larger limit could never be used.
pub const MAX_BODY_BYTES_LIMIT: usize = (LAMBDA_REQUEST_LIMIT - EVENT_ENVELOPE_ALLOWANCE) / 4 * 3;

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

/// Where webhook secrets come from. `Debug` leaves the inline document out.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretsFrom {
    /// `HOOKCLAIM_SECRETS`: the secrets document in an environment variable (local use).
    Env(String),
    /// `HOOKCLAIM_SECRETS_ARN`: a Secrets Manager secret holding the same document.
    SecretsManager {
        /// The secret's ARN or name.
        arn: String,
        /// Cached secrets younger than this are not refetched after a failed verification.
        min_refresh_interval: Duration,
        /// Cached secrets older than this are read again before use.
        max_age: Duration,
    },
}

impl std::fmt::Debug for SecretsFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretsFrom::Env(_) => f.write_str("Env([redacted])"),
            SecretsFrom::SecretsManager {
                arn,
                min_refresh_interval,
                max_age,
            } => f
                .debug_struct("SecretsManager")
                .field("arn", arn)
                .field("min_refresh_interval", min_refresh_interval)
                .field("max_age", max_age)
                .finish(),
        }
    }
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

/// Reads `HOOKCLAIM_SOURCES`, which is required.
pub(super) fn read_sources(get: Lookup<'_>) -> Result<BTreeMap<String, Source>, ConfigError> {
    let raw = get(SOURCES).ok_or_else(|| {
        bad(
            SOURCES,
            "not set; give a JSON object of source name to settings",
        )
    })?;
    parse_sources(&raw)
}

/// Reads where the webhook secrets come from: the ARN wins over the inline document.
pub(super) fn read_secrets(get: Lookup<'_>) -> Result<Option<SecretsFrom>, ConfigError> {
    Ok(
        match (get("HOOKCLAIM_SECRETS_ARN"), get("HOOKCLAIM_SECRETS")) {
            (Some(arn), _) => Some(SecretsFrom::SecretsManager {
                arn,
                // Never 0: the interval is what keeps forged deliveries from turning into Secrets
                // Manager calls.
                min_refresh_interval: Duration::from_secs(int(
                    get,
                    "HOOKCLAIM_SECRETS_REFRESH_SECS",
                    60,
                    1,
                    86_400,
                )?),
                max_age: Duration::from_secs(int(
                    get,
                    "HOOKCLAIM_SECRETS_MAX_AGE_SECS",
                    300,
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
        },
    )
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
    if max_body_bytes == 0 || max_body_bytes > MAX_BODY_BYTES_LIMIT {
        return Err(format!(
            "max_body_bytes must be 1..={MAX_BODY_BYTES_LIMIT}: Lambda accepts requests up to \
             {LAMBDA_REQUEST_LIMIT} bytes, and a binary body arrives base64-encoded (4/3 as long) \
             inside the event"
        ));
    }
    Ok(Source {
        name: name.to_string(),
        scheme,
        max_body_bytes,
    })
}
