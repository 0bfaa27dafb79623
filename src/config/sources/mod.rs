//! Sources and their secrets: `HOOKCLAIM_SOURCES`, `HOOKCLAIM_SECRETS`,
//! `HOOKCLAIM_SECRETS_ARN`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{bad, int, ConfigError, Lookup};
use crate::handshake::Handshake;
use crate::verify::{
    presets, Algorithm, Field, HmacScheme, IdLocation, MessagePart, Scheme, SignatureEncoding,
    SignatureFormat, SignedScheme, TimestampFrom, TimestampRule, TimestampUnit, TokenScheme,
    Tolerance, DEFAULT_TOLERANCE_SECS,
};

const SOURCES: &str = "HOOKCLAIM_SOURCES";

/// The largest `tolerance_secs`: an hour. A signed timestamp is what lets the keys of a source
/// that refuses old requests go after `RETENTION_DAYS` (at least a day), so the window must stay
/// far below that: a request still inside its tolerance must never find its key purged. The
/// providers' own libraries use 5 s to 10 minutes; an hour leaves room for any skew or queueing.
pub const MAX_TOLERANCE_SECS: u64 = 3600;

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
    /// The provider's handshakes this source answers, if any (set by presets).
    pub handshake: Option<Handshake>,
    /// Its delivery keys are kept for `KEY_RETENTION_DAYS`, past the payload's `RETENTION_DAYS`
    /// (`long_key_retention`; by default, when its scheme does not refuse old requests).
    pub long_key_retention: bool,
    /// The signed body is remembered as well as the delivery id, so a signed body re-sent under
    /// a new id is a duplicate (`replay_guard`; by default, when the signature covers neither
    /// the delivery id nor a checked timestamp: [`Scheme::needs_replay_guard`]).
    pub replay_guard: bool,
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
    long_key_retention: Option<bool>,
    replay_guard: Option<bool>,
    // hmac, signed
    signature_header: Option<String>,
    prefix: Option<String>,
    encoding: Option<String>,
    // signed
    algorithm: Option<String>,
    signature_list: Option<SignatureListSpec>,
    message: Option<Vec<serde_json::Value>>,
    timestamp_header: Option<String>,
    timestamp_pointer: Option<String>,
    timestamp_unit: Option<String>,
    timestamp_past_only: Option<bool>,
    // token
    token_header: Option<String>,
    // ids and types (hmac, signed, token)
    id_header: Option<String>,
    id_pointer: Option<String>,
    id_pointers: Option<Vec<String>>,
    event_type_pointer: Option<String>,
    event_type_header: Option<String>,
    // presets
    public_url: Option<String>,
    verify_token: Option<String>,
    // standard
    secret_encoding: Option<String>,
}

/// `"signature_list": {"separator": ";", "signature_key": "h1", "timestamp_key": "ts"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignatureListSpec {
    separator: String,
    signature_key: String,
    timestamp_key: Option<String>,
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
            (Some(arn), _) => {
                // Never 0: the interval is what keeps forged deliveries from turning into Secrets
                // Manager calls.
                let refresh = int(get, "HOOKCLAIM_SECRETS_REFRESH_SECS", 60, 1, 86_400)?;
                let max_age = int(get, "HOOKCLAIM_SECRETS_MAX_AGE_SECS", 300, 1, 86_400)?;
                // A longer interval would keep the secrets from being read again at their
                // maximum age, and so silently replace it.
                if refresh > max_age {
                    return Err(bad(
                        "HOOKCLAIM_SECRETS_REFRESH_SECS",
                        format!(
                            "{refresh} s is above HOOKCLAIM_SECRETS_MAX_AGE_SECS ({max_age} s); \
                             secrets are read again at most once per interval, so the interval \
                             may not exceed their maximum age"
                        ),
                    ));
                }
                Some(SecretsFrom::SecretsManager {
                    arn,
                    min_refresh_interval: Duration::from_secs(refresh),
                    max_age: Duration::from_secs(max_age),
                })
            }
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

/// The kinds that are not presets.
const KINDS: &[&str] = &["stripe", "github", "standard", "hmac", "signed", "token"];

fn source(name: &str, spec: SourceSpec) -> Result<Source, String> {
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !name_ok {
        return Err("names are 1-64 characters of a-z, 0-9, - and _".into());
    }
    let kind = spec.kind.clone();
    let kind = kind.as_str();
    settings_apply(&spec, kind)?;
    if let Some(t) = spec.tolerance_secs {
        if !(1..=MAX_TOLERANCE_SECS).contains(&t) {
            return Err(format!(
                "tolerance_secs must be 1..={MAX_TOLERANCE_SECS}: far below the key retention, \
                 which a signed timestamp shortens to RETENTION_DAYS"
            ));
        }
    }
    let tolerance_given = spec.tolerance_secs.is_some();
    let tolerance_secs = spec.tolerance_secs.unwrap_or(DEFAULT_TOLERANCE_SECS);
    let max_body_bytes = spec.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
    let long_key_retention = spec.long_key_retention;
    let replay_guard = spec.replay_guard;
    let mut handshake = None;
    let scheme = match kind {
        "stripe" => Scheme::Stripe { tolerance_secs },
        "github" => Scheme::Github,
        "standard" => Scheme::Standard {
            tolerance_secs,
            raw_secrets: match spec.secret_encoding.as_deref().unwrap_or("base64") {
                "base64" => false,
                "raw" => true,
                other => return Err(format!("secret_encoding {other:?} is not base64 or raw")),
            },
        },
        "hmac" => {
            let signature_header = header_name(spec.signature_header.as_deref())
                .ok_or("kind hmac needs a valid signature_header")?;
            let encoding = encoding(spec.encoding.as_deref())?;
            let id = id_location(spec.id_header, spec.id_pointer, None)?;
            Scheme::Hmac(HmacScheme {
                signature_header,
                prefix: spec.prefix.unwrap_or_default(),
                encoding,
                id,
                event_type_pointer: pointer(spec.event_type_pointer, "event_type_pointer")?,
            })
        }
        "signed" => {
            let scheme = signed(spec, tolerance_secs)?;
            if tolerance_given && scheme.timestamp.is_none() {
                return Err("tolerance_secs needs a timestamp (timestamp_header, \
                            timestamp_pointer or signature_list.timestamp_key)"
                    .into());
            }
            Scheme::Signed(scheme)
        }
        "token" => Scheme::Token(TokenScheme {
            token_header: header_name(spec.token_header.as_deref())
                .ok_or("kind token needs a valid token_header")?,
            id: id_location(spec.id_header, spec.id_pointer, spec.id_pointers)?,
            event_type: event_type(spec.event_type_header, spec.event_type_pointer)?,
        }),
        preset => {
            let (scheme, preset_handshake) = preset_source(preset, spec)?;
            handshake = preset_handshake;
            scheme
        }
    };
    if max_body_bytes == 0 || max_body_bytes > MAX_BODY_BYTES_LIMIT {
        return Err(format!(
            "max_body_bytes must be 1..={MAX_BODY_BYTES_LIMIT}: Lambda accepts requests up to \
             {LAMBDA_REQUEST_LIMIT} bytes, and a binary body arrives base64-encoded (4/3 as long) \
             inside the event"
        ));
    }
    Ok(Source {
        name: name.to_string(),
        long_key_retention: long_key_retention.unwrap_or(!scheme.refuses_old_requests()),
        replay_guard: replay_guard.unwrap_or(scheme.needs_replay_guard()),
        scheme,
        max_body_bytes,
        handshake,
    })
}

/// Refuses a setting the source's kind does not read, so a typo'd kind or a setting that would
/// be ignored never passes silently.
fn settings_apply(spec: &SourceSpec, kind: &str) -> Result<(), String> {
    if spec.verify_token.is_some() {
        return Err("verify_token is a secret: put it in the secrets document \
                    (HOOKCLAIM_SECRETS, or the Secrets Manager secret HOOKCLAIM_SECRETS_ARN \
                    names) under \"<source>.verify_token\", beside the source's secret, not \
                    in HOOKCLAIM_SOURCES"
            .into());
    }
    // Presets read tolerance_secs when they sign a timestamp (checked with the preset).
    let timestamped: &[&str] = if presets::lookup(kind).is_some() {
        &[kind]
    } else {
        &["stripe", "standard", "signed"]
    };
    let settings: [(&str, bool, &[&str]); 23] = [
        ("tolerance_secs", spec.tolerance_secs.is_some(), timestamped),
        (
            "signature_header",
            spec.signature_header.is_some(),
            &["hmac", "signed"],
        ),
        ("prefix", spec.prefix.is_some(), &["hmac", "signed"]),
        ("encoding", spec.encoding.is_some(), &["hmac", "signed"]),
        ("algorithm", spec.algorithm.is_some(), &["signed"]),
        ("signature_list", spec.signature_list.is_some(), &["signed"]),
        ("message", spec.message.is_some(), &["signed"]),
        (
            "timestamp_header",
            spec.timestamp_header.is_some(),
            &["signed"],
        ),
        (
            "timestamp_pointer",
            spec.timestamp_pointer.is_some(),
            &["signed"],
        ),
        ("timestamp_unit", spec.timestamp_unit.is_some(), &["signed"]),
        (
            "timestamp_past_only",
            spec.timestamp_past_only.is_some(),
            &["signed"],
        ),
        ("token_header", spec.token_header.is_some(), &["token"]),
        (
            "id_header",
            spec.id_header.is_some(),
            &["hmac", "signed", "token"],
        ),
        (
            "id_pointer",
            spec.id_pointer.is_some(),
            &["hmac", "signed", "token"],
        ),
        (
            "id_pointers",
            spec.id_pointers.is_some(),
            &["signed", "token"],
        ),
        (
            "event_type_pointer",
            spec.event_type_pointer.is_some(),
            &["hmac", "signed", "token"],
        ),
        (
            "event_type_header",
            spec.event_type_header.is_some(),
            &["signed", "token"],
        ),
        (
            "public_url",
            spec.public_url.is_some(),
            &["signed", "twilio", "square", "hubspot"],
        ),
        (
            "secret_encoding",
            spec.secret_encoding.is_some(),
            &["standard"],
        ),
        ("stripe", false, &[]),
        ("github", false, &[]),
        ("standard", false, &[]),
        ("hmac", false, &[]),
    ];
    if let Some((field, _, kinds)) = settings
        .iter()
        .find(|(_, set, kinds)| *set && !kinds.contains(&kind))
    {
        return Err(format!(
            "{field} does not apply to kind {kind} (only to {})",
            kinds.join(", ")
        ));
    }
    Ok(())
}

/// The scheme and handshake of a named provider preset (`"kind": "slack"`, …).
fn preset_source(kind: &str, spec: SourceSpec) -> Result<(Scheme, Option<Handshake>), String> {
    let Some(preset) = presets::lookup(kind) else {
        let presets: Vec<&str> = presets::PRESETS.iter().map(|p| p.name).collect();
        return Err(format!(
            "kind {kind:?} is not one of {}, or a preset: {}",
            KINDS.join(", "),
            presets.join(", ")
        ));
    };
    if spec.tolerance_secs.is_some() && preset.default_tolerance_secs.is_none() {
        return Err(format!(
            "tolerance_secs does not apply to kind {kind}: it signs no timestamp"
        ));
    }
    let public_url = match (preset.needs_public_url, spec.public_url) {
        (true, Some(url)) => public_url(&url)?,
        (true, None) => {
            return Err(format!(
                "kind {kind} needs public_url: the URL the provider posts to, which it signs"
            ))
        }
        (false, _) => String::new(),
    };
    let handshake = match kind {
        "slack" => Some(Handshake::Slack),
        "zoom" => Some(Handshake::Zoom),
        "twitch" => Some(Handshake::Twitch),
        "discord" => Some(Handshake::Discord),
        // Its verify token is a secret, in the secrets document with the app secret.
        "meta" => Some(Handshake::Meta),
        _ => None,
    };
    Ok((preset.scheme(spec.tolerance_secs, &public_url), handshake))
}

fn header_name(name: Option<&str>) -> Option<String> {
    name.filter(|h| http::HeaderName::from_bytes(h.as_bytes()).is_ok())
        .map(str::to_owned)
}

fn encoding(text: Option<&str>) -> Result<SignatureEncoding, String> {
    match text.unwrap_or("hex") {
        "hex" => Ok(SignatureEncoding::Hex),
        "base64" => Ok(SignatureEncoding::Base64),
        other => Err(format!("encoding {other:?} is not hex or base64")),
    }
}

fn pointer(p: Option<String>, field: &str) -> Result<Option<String>, String> {
    match p {
        Some(p) if !p.starts_with('/') => Err(format!("{field} must be a JSON pointer like /type")),
        p => Ok(p),
    }
}

fn public_url(url: &str) -> Result<String, String> {
    let ok = (url.starts_with("https://") || url.starts_with("http://"))
        && !url.contains(['?', '#'])
        && !url.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(url.to_owned())
    } else {
        Err("public_url must be an http(s) URL without query string or fragment".into())
    }
}

fn id_location(
    header: Option<String>,
    json_pointer: Option<String>,
    pointers: Option<Vec<String>>,
) -> Result<IdLocation, String> {
    Ok(match (header, json_pointer, pointers) {
        (Some(h), None, None) => {
            IdLocation::Header(header_name(Some(&h)).ok_or("id_header is not a valid header name")?)
        }
        (None, Some(p), None) => {
            IdLocation::JsonPointer(pointer(Some(p), "id_pointer")?.unwrap_or_default())
        }
        (None, None, Some(ps)) => {
            if ps.is_empty() || ps.iter().any(|p| !p.starts_with('/')) {
                return Err("id_pointers must be a non-empty list of JSON pointers".into());
            }
            IdLocation::Composite(ps)
        }
        (None, None, None) => IdLocation::BodySha256,
        _ => return Err("give one of id_header, id_pointer or id_pointers".into()),
    })
}

fn event_type(
    header: Option<String>,
    json_pointer: Option<String>,
) -> Result<Option<Field>, String> {
    match (header, json_pointer) {
        (Some(_), Some(_)) => Err("give event_type_header or event_type_pointer, not both".into()),
        (Some(h), None) => Ok(Some(Field::Header(
            header_name(Some(&h)).ok_or("event_type_header is not a valid header name")?,
        ))),
        (None, p) => Ok(pointer(p, "event_type_pointer")?.map(Field::Pointer)),
    }
}

/// The `signed` kind's settings.
fn signed(spec: SourceSpec, tolerance_secs: u64) -> Result<SignedScheme, String> {
    let signature_header = header_name(spec.signature_header.as_deref())
        .ok_or("kind signed needs a valid signature_header")?;
    let algorithm = match spec.algorithm.as_deref().unwrap_or("sha256") {
        "sha1" => Algorithm::Sha1,
        "sha256" => Algorithm::Sha256,
        "sha512" => Algorithm::Sha512,
        other => return Err(format!("algorithm {other:?} is not sha1, sha256 or sha512")),
    };
    let format = match (spec.prefix, spec.signature_list) {
        (Some(_), Some(_)) => return Err("give prefix or signature_list, not both".into()),
        (prefix, None) => SignatureFormat::Prefixed(prefix.unwrap_or_default()),
        (None, Some(list)) => {
            let mut chars = list.separator.chars();
            let (Some(separator), None) = (chars.next(), chars.next()) else {
                return Err("signature_list.separator must be one character".into());
            };
            if list.signature_key.is_empty() || list.timestamp_key.as_deref() == Some("") {
                return Err("signature_list keys must not be empty".into());
            }
            SignatureFormat::List {
                separator,
                signature_key: list.signature_key,
                timestamp_key: list.timestamp_key,
            }
        }
    };
    let in_signature = matches!(
        &format,
        SignatureFormat::List {
            timestamp_key: Some(_),
            ..
        }
    );
    let from =
        match (spec.timestamp_header, spec.timestamp_pointer, in_signature) {
            (None, None, false) => None,
            (Some(h), None, false) => Some(TimestampFrom::Header(
                header_name(Some(&h)).ok_or("timestamp_header is not a valid header name")?,
            )),
            (None, Some(p), false) => Some(TimestampFrom::Body(
                pointer(Some(p), "timestamp_pointer")?.unwrap_or_default(),
            )),
            (None, None, true) => Some(TimestampFrom::Signature),
            _ => return Err(
                "give one of timestamp_header, timestamp_pointer or signature_list.timestamp_key"
                    .into(),
            ),
        };
    let timestamp = match from {
        Some(from) => Some(TimestampRule {
            from,
            unit: match spec.timestamp_unit.as_deref().unwrap_or("s") {
                "s" => TimestampUnit::Seconds,
                "ms" => TimestampUnit::Millis,
                "rfc3339" => TimestampUnit::Rfc3339,
                other => return Err(format!("timestamp_unit {other:?} is not s, ms or rfc3339")),
            },
            tolerance: if spec.timestamp_past_only.unwrap_or(false) {
                Tolerance::Past(tolerance_secs)
            } else {
                Tolerance::Both(tolerance_secs)
            },
        }),
        None => {
            if spec.timestamp_unit.is_some() || spec.timestamp_past_only.is_some() {
                return Err("timestamp_unit and timestamp_past_only need a timestamp".into());
            }
            None
        }
    };
    let id = id_location(spec.id_header, spec.id_pointer, spec.id_pointers)?;
    let message = spec
        .message
        .unwrap_or_else(|| vec![serde_json::Value::from("body")])
        .iter()
        .map(|part| message_part(part, &id, timestamp.is_some()))
        .collect::<Result<Vec<_>, _>>()?;
    if message.is_empty() || !message.contains(&MessagePart::Body) {
        return Err("message must include the body".into());
    }
    if message.contains(&MessagePart::Url) && spec.public_url.is_none() {
        return Err("a url message part needs public_url".into());
    }
    let public_url = spec.public_url.as_deref().map(public_url).transpose()?;
    let scheme = SignedScheme {
        algorithm,
        signature_header,
        other_signature_headers: Vec::new(),
        encoding: encoding(spec.encoding.as_deref())?,
        format,
        message,
        timestamp,
        id,
        event_type: event_type(spec.event_type_header, spec.event_type_pointer)?,
        public_url,
    };
    // A timestamp the signature does not cover is no protection: a captured request with the
    // timestamp rewritten would pass the tolerance check. (A body field is always covered.)
    if scheme.signs_timestamp() == Some(false) {
        let setting = if in_signature {
            "signature_list.timestamp_key"
        } else {
            "timestamp_header"
        };
        return Err(format!(
            "{setting} names a timestamp the signature does not cover: add \"timestamp\" (or \
             the timestamp header) to message, or remove the timestamp setting"
        ));
    }
    Ok(scheme)
}

/// One `message` entry: `"body"`, `"timestamp"`, `"id"`, `"method"`, `"url"`,
/// `{"header": NAME}` or `{"text": LITERAL}`.
fn message_part(
    part: &serde_json::Value,
    id: &IdLocation,
    has_timestamp: bool,
) -> Result<MessagePart, String> {
    let bad = || {
        "message parts are \"body\", \"timestamp\", \"id\", \"method\", \"url\", \
         {\"header\": NAME} or {\"text\": LITERAL}"
            .to_string()
    };
    if let Some(name) = part.as_str() {
        return match name {
            "body" => Ok(MessagePart::Body),
            "timestamp" if has_timestamp => Ok(MessagePart::Timestamp),
            "timestamp" => Err("a timestamp message part needs a timestamp setting".into()),
            "id" if matches!(id, IdLocation::Header(_)) => Ok(MessagePart::Id),
            "id" => Err("an id message part needs id_header".into()),
            "method" => Ok(MessagePart::Method),
            "url" => Ok(MessagePart::Url),
            _ => Err(bad()),
        };
    }
    let object = part.as_object().filter(|o| o.len() == 1).ok_or_else(bad)?;
    match object.iter().next() {
        Some((k, serde_json::Value::String(v))) if k == "header" => Ok(MessagePart::Header(
            header_name(Some(v)).ok_or("message header is not a valid header name")?,
        )),
        Some((k, serde_json::Value::String(v))) if k == "text" => Ok(MessagePart::Text(v.clone())),
        _ => Err(bad()),
    }
}
