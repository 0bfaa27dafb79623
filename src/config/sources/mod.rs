//! Sources and their secrets: `HOOKCLAIM_SOURCES`, `HOOKCLAIM_SECRETS`,
//! `HOOKCLAIM_SECRETS_ARN`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{bad, int, ConfigError, Lookup};
use crate::handshake::Handshake;
use crate::verify::Scheme;

mod kinds;
mod settings;

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
    let specs: BTreeMap<String, serde_json::Map<String, serde_json::Value>> =
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

/// The settings every kind reads.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Common {
    max_body_bytes: Option<usize>,
    long_key_retention: Option<bool>,
    replay_guard: Option<bool>,
}

/// One source: its name checked, the settings every kind shares taken out, and the rest read
/// as its kind's settings.
fn source(name: &str, mut spec: serde_json::Map<String, serde_json::Value>) -> Result<Source, String> {
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !name_ok {
        return Err("names are 1-64 characters of a-z, 0-9, - and _".into());
    }
    if spec.contains_key("verify_token") {
        return Err("verify_token is a secret: put it in the secrets document \
                    (HOOKCLAIM_SECRETS, or the Secrets Manager secret HOOKCLAIM_SECRETS_ARN \
                    names) under \"<source>.verify_token\", beside the source's secret, not \
                    in HOOKCLAIM_SOURCES"
            .into());
    }
    let kind = match spec.remove("kind") {
        Some(serde_json::Value::String(kind)) => kind,
        _ => return Err("needs a \"kind\": a string".into()),
    };
    let common = settings::COMMON
        .iter()
        .filter_map(|k| spec.remove_entry(*k))
        .collect();
    let common: Common = settings::typed(common)?;
    let (scheme, handshake) = kinds::scheme(&kind, spec)?;
    let max_body_bytes = common.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
    if max_body_bytes == 0 || max_body_bytes > MAX_BODY_BYTES_LIMIT {
        return Err(format!(
            "max_body_bytes must be 1..={MAX_BODY_BYTES_LIMIT}: Lambda accepts requests up to \
             {LAMBDA_REQUEST_LIMIT} bytes, and a binary body arrives base64-encoded (4/3 as long) \
             inside the event"
        ));
    }
    Ok(Source {
        name: name.to_string(),
        long_key_retention: common
            .long_key_retention
            .unwrap_or(!scheme.refuses_old_requests()),
        replay_guard: common
            .replay_guard
            .unwrap_or(scheme.needs_replay_guard()),
        scheme,
        max_body_bytes,
        handshake,
    })
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::{HmacScheme, IdLocation, SignatureEncoding};

    #[test]
    fn the_largest_body_limit_fits_lambdas_request_when_base64_encoded() {
        let at_limit =
            format!(r#"{{"big":{{"kind":"github","max_body_bytes":{MAX_BODY_BYTES_LIMIT}}}}}"#);
        assert!(parse_sources(&at_limit).is_ok());
        let over = format!(
            r#"{{"big":{{"kind":"github","max_body_bytes":{}}}}}"#,
            MAX_BODY_BYTES_LIMIT + 1
        );
        let err = parse_sources(&over).unwrap_err();
        assert!(err.problem.contains("base64"), "{err}");
        // base64 of the largest body, plus the envelope allowance, is within Lambda's limit.
        assert!(
            MAX_BODY_BYTES_LIMIT.div_ceil(3) * 4 + EVENT_ENVELOPE_ALLOWANCE
                <= LAMBDA_REQUEST_LIMIT
        );
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

    #[test]
    fn signed_source_reads_every_field() {
        use crate::verify::{
            Algorithm, Field, MessagePart, SignatureFormat, SignedParts, SignedScheme,
            TimestampFrom, TimestampRule, TimestampUnit, Tolerance,
        };
        let s = parse_sources(
            r#"{"paddle-like":{"kind":"signed","signature_header":"Sig","algorithm":"sha512",
                "encoding":"base64",
                "signature_list":{"separator":";","signature_key":"h1","timestamp_key":"ts"},
                "message":["method","url",{"text":":"},"timestamp",{"header":"X-Extra"},"body"],
                "timestamp_unit":"ms","timestamp_past_only":true,"tolerance_secs":60,
                "id_pointers":["/a","/b"],"event_type_header":"X-Type",
                "public_url":"https://example.com/hook"}}"#,
        )
        .unwrap();
        let expected = SignedScheme::new(SignedParts {
            algorithm: Algorithm::Sha512,
            signature_header: "Sig".into(),
            encoding: SignatureEncoding::Base64,
            format: SignatureFormat::List {
                separator: ';',
                signature_key: "h1".into(),
                timestamp_key: Some("ts".into()),
            },
            message: vec![
                MessagePart::Method,
                MessagePart::Url,
                MessagePart::Text(":".into()),
                MessagePart::Timestamp,
                MessagePart::Header("X-Extra".into()),
                MessagePart::Body,
            ],
            timestamp: Some(TimestampRule {
                from: TimestampFrom::Signature,
                unit: TimestampUnit::Millis,
                tolerance: Tolerance::Past(60),
            }),
            id: IdLocation::Composite(vec!["/a".into(), "/b".into()]),
            event_type: Some(Field::Header("X-Type".into())),
            public_url: Some("https://example.com/hook".into()),
        })
        .unwrap();
        assert_eq!(s["paddle-like"].scheme, Scheme::Signed(expected));
    }

    #[test]
    fn every_preset_parses_and_bad_settings_are_named() {
        for preset in crate::verify::presets::PRESETS {
            let url = if preset.needs_public_url {
                r#","public_url":"https://example.com/x""#
            } else {
                ""
            };
            let json = format!(r#"{{"s":{{"kind":"{}"{url}}}}}"#, preset.name);
            let s = parse_sources(&json).unwrap_or_else(|e| panic!("{}: {e}", preset.name));
            assert_eq!(
                s["s"].handshake.is_some(),
                ["slack", "zoom", "twitch", "discord", "meta"].contains(&preset.name)
            );
        }
        let refused = [
            (r#"{"s":{"kind":"twilio"}}"#, "needs public_url"),
            (
                r#"{"s":{"kind":"slack","public_url":"https://x"}}"#,
                "public_url does not apply",
            ),
            (
                r#"{"s":{"kind":"square","public_url":"https://x/?a=b"}}"#,
                "without query",
            ),
            (
                r#"{"s":{"kind":"slack","verify_token":"t"}}"#,
                "verify_token is a secret: put it in the secrets document",
            ),
            (
                r#"{"s":{"kind":"gitlab","tolerance_secs":5}}"#,
                "signs no timestamp",
            ),
            (
                r#"{"s":{"kind":"stripe","secret_encoding":"raw"}}"#,
                "does not apply",
            ),
            (
                r#"{"s":{"kind":"standard","secret_encoding":"hex"}}"#,
                "secret_encoding: unknown variant `hex`, expected `base64` or `raw`",
            ),
            (r#"{"s":{"kind":"nope"}}"#, "or a preset: slack"),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","message":["timestamp"]}}"#,
                "needs a timestamp setting",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","message":["id"]}}"#,
                "needs id_header",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","message":[{"text":"x"}]}}"#,
                "must include the body",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","message":["url","body"]}}"#,
                "needs public_url",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","message":[{"bogus":"x"}]}}"#,
                "message[0]: unknown variant `bogus`, expected one of `body`, `timestamp`, `id`, \
                 `method`, `url`, `header`, `text`",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","algorithm":"md5"}}"#,
                "algorithm: unknown variant `md5`, expected one of `sha1`, `sha256`, `sha512`",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","prefix":"v=","signature_list":{"separator":",","signature_key":"v1"}}}"#,
                "not both",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","timestamp_header":"T","timestamp_pointer":"/t"}}"#,
                "give one of timestamp_header",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","timestamp_unit":"ms"}}"#,
                "timestamp_unit and timestamp_past_only need a timestamp",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","timestamp_header":"T","message":["timestamp","body"],"timestamp_unit":"h"}}"#,
                "timestamp_unit: unknown variant `h`, expected one of `s`, `ms`, `rfc3339`",
            ),
            (r#"{"s":{"kind":"token"}}"#, "needs a valid token_header"),
            (
                r#"{"s":{"kind":"hmac","signature_header":"S","id_pointers":["/a"]}}"#,
                "id_pointers does not apply",
            ),
        ];
        for (json, expected) in refused {
            let err = parse_sources(json).unwrap_err().to_string();
            assert!(err.contains(expected), "{json}: {err}");
        }
    }

    #[test]
    fn meta_verify_token_is_refused_in_plain_configuration_and_never_printed() {
        let err =
            parse_sources(r#"{"m":{"kind":"meta","verify_token":"hookclaim-meta-verify-token"}}"#)
                .unwrap_err();
        assert_eq!(err.setting, "HOOKCLAIM_SOURCES");
        assert!(
            err.problem
                .contains("verify_token is a secret: put it in the secrets document")
                && err.problem.contains("HOOKCLAIM_SECRETS"),
            "{err}"
        );
        assert!(!err.to_string().contains("hookclaim-meta-verify-token"));
        // Where it belongs, a Meta source needs nothing but its kind.
        let s = parse_sources(r#"{"m":{"kind":"meta"}}"#).unwrap();
        assert_eq!(s["m"].handshake, Some(crate::handshake::Handshake::Meta));
    }

    #[test]
    fn replay_guard_is_on_where_the_signature_covers_neither_the_id_nor_a_checked_timestamp() {
        let mut sources = serde_json::Map::new();
        for preset in crate::verify::presets::PRESETS {
            let mut spec = serde_json::json!({"kind": preset.name});
            if preset.needs_public_url {
                spec["public_url"] = "https://hooks.example.com/x".into();
            }
            sources.insert(preset.name.to_owned(), spec);
        }
        let more = serde_json::json!({
            "stripe": {"kind": "stripe"},
            "github": {"kind": "github"},
            "standard": {"kind": "standard"},
            "hmac-id-header": {"kind": "hmac", "signature_header": "X-Sig", "id_header": "X-Id"},
            "hmac-id-pointer": {"kind": "hmac", "signature_header": "X-Sig", "id_pointer": "/id"},
            "hmac-body-hash": {"kind": "hmac", "signature_header": "X-Sig"},
            "signed-id-header": {"kind": "signed", "signature_header": "X-Sig", "id_header": "X-Id"},
            "signed-id-signed": {"kind": "signed", "signature_header": "X-Sig", "id_header": "X-Id",
                "message": ["id", {"text": "."}, "body"]},
            "signed-timestamp": {"kind": "signed", "signature_header": "X-Sig", "id_header": "X-Id",
                "timestamp_header": "X-Ts", "message": ["timestamp", "body"]},
            "signed-body-timestamp": {"kind": "signed", "signature_header": "X-Sig",
                "id_header": "X-Id", "timestamp_pointer": "/ts"},
            "token-id-header": {"kind": "token", "token_header": "X-Token", "id_header": "X-Id"},
            "token-id-pointer": {"kind": "token", "token_header": "X-Token", "id_pointer": "/id"},
            "github-off": {"kind": "github", "replay_guard": false},
            "stripe-on": {"kind": "stripe", "replay_guard": true},
        });
        sources.extend(more.as_object().unwrap().clone());
        let sources = parse_sources(&serde_json::Value::Object(sources).to_string()).unwrap();
        let guarded: Vec<&str> = sources
            .values()
            .filter(|s| s.replay_guard)
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(
            guarded,
            [
                "bitbucket",
                "github",
                "gitlab",
                "hmac-id-header",
                "shopify",
                "signed-id-header",
                "stripe-on",
                "token-id-header",
                "token-id-pointer",
                "twilio",
            ]
        );
        assert!(sources.len() > 30);
    }

    #[test]
    fn a_timestamp_counts_only_when_signed_and_the_tolerance_is_bounded_and_read_where_it_applies()
    {
        let refused = [
            // A timestamp the message does not include: rewriting it would pass the check.
            (
                r#"{"s":{"kind":"signed","signature_header":"S","timestamp_header":"T"}}"#,
                "timestamp_header names a timestamp the signature does not cover",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","message":[{"header":"X-Other"},"body"],"timestamp_header":"T"}}"#,
                "timestamp_header names a timestamp the signature does not cover",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","signature_list":{"separator":",","signature_key":"v1","timestamp_key":"t"}}}"#,
                "signature_list.timestamp_key names a timestamp the signature does not cover",
            ),
            // The tolerance is bounded, well below the key retention.
            (
                r#"{"s":{"kind":"stripe","tolerance_secs":31536000}}"#,
                "tolerance_secs must be 1..=3600",
            ),
            (
                r#"{"s":{"kind":"standard","tolerance_secs":3601}}"#,
                "tolerance_secs must be 1..=3600",
            ),
            (
                r#"{"s":{"kind":"slack","tolerance_secs":0}}"#,
                "tolerance_secs must be 1..=3600",
            ),
            // And refused where nothing timestamped is signed.
            (
                r#"{"s":{"kind":"github","tolerance_secs":300}}"#,
                "tolerance_secs does not apply to kind github",
            ),
            (
                r#"{"s":{"kind":"hmac","signature_header":"S","tolerance_secs":300}}"#,
                "tolerance_secs does not apply to kind hmac",
            ),
            (
                r#"{"s":{"kind":"token","token_header":"T","tolerance_secs":300}}"#,
                "tolerance_secs does not apply to kind token",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","tolerance_secs":300}}"#,
                "tolerance_secs needs a timestamp",
            ),
            (
                r#"{"s":{"kind":"shopify","tolerance_secs":300}}"#,
                "signs no timestamp",
            ),
        ];
        for (json, expected) in refused {
            let err = parse_sources(json).unwrap_err();
            assert_eq!(err.setting, "HOOKCLAIM_SOURCES");
            assert!(err.problem.contains(expected), "{json}: {err}");
        }
        let accepted = [
            r#"{"s":{"kind":"signed","signature_header":"S","timestamp_header":"T","message":["timestamp","body"],"tolerance_secs":3600}}"#,
            r#"{"s":{"kind":"signed","signature_header":"S","timestamp_header":"T","message":[{"header":"t"},"body"]}}"#,
            r#"{"s":{"kind":"signed","signature_header":"S","timestamp_pointer":"/ts","tolerance_secs":1}}"#,
            r#"{"s":{"kind":"stripe","tolerance_secs":600}}"#,
            r#"{"s":{"kind":"paddle","tolerance_secs":60}}"#,
        ];
        for json in accepted {
            let s = parse_sources(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert!(s["s"].scheme.refuses_old_requests(), "{json}");
            assert!(!s["s"].long_key_retention, "{json}");
        }
    }

    #[test]
    fn every_source_error_names_the_source_and_the_setting() {
        let refused = [
            (r#"{"#, "HOOKCLAIM_SOURCES: invalid JSON"),
            (r#"{}"#, "HOOKCLAIM_SOURCES: no source configured"),
            (r#"{"X Y":{"kind":"github"}}"#, "names are 1-64 characters of a-z, 0-9, - and _"),
            (r#"{"s":{}}"#, "source \"s\": needs a \"kind\": a string"),
            (
                r#"{"s":{"kind":"nope","prefix":"x"}}"#,
                "source \"s\": kind \"nope\" is not one of stripe, github, standard, hmac, \
                 signed, token, or a preset: slack",
            ),
            (
                r#"{"s":{"kind":"github","typo":1}}"#,
                "source \"s\": typo does not apply to kind github (it reads max_body_bytes, \
                 long_key_retention, replay_guard)",
            ),
            (
                r#"{"s":{"kind":"github","prefix":"x"}}"#,
                "prefix does not apply to kind github",
            ),
            (
                r#"{"s":{"kind":"github","long_key_retention":"yes"}}"#,
                "long_key_retention: invalid type: string \"yes\", expected a boolean",
            ),
            (
                r#"{"s":{"kind":"github","max_body_bytes":0}}"#,
                "max_body_bytes must be 1..=",
            ),
            (r#"{"s":{"kind":"hmac"}}"#, "kind hmac needs a valid signature_header"),
            (
                r#"{"s":{"kind":"hmac","signature_header":"a b"}}"#,
                "kind hmac needs a valid signature_header",
            ),
            (
                r#"{"s":{"kind":"hmac","signature_header":"S","encoding":"b32"}}"#,
                "encoding: unknown variant `b32`, expected `hex` or `base64`",
            ),
            (r#"{"s":{"kind":"signed"}}"#, "kind signed needs a valid signature_header"),
            (
                r#"{"s":{"kind":"signed","signature_header":"a b"}}"#,
                "signature_header is not a valid header name",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","signature_list":{"separator":",;","signature_key":"v1"}}}"#,
                "signature_list.separator: invalid value: string \",;\", expected a character",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","signature_list":{"separator":",","signature_key":""}}}"#,
                "signature_list keys must not be empty",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","signature_list":{"separator":",","key":"v1"}}}"#,
                "signature_list.key: unknown field `key`, expected one of `separator`, `signature_key`",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","timestamp_header":"a b","message":["timestamp","body"]}}"#,
                "timestamp_header is not a valid header name",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","message":[{"header":"a b"},"body"]}}"#,
                "message header is not a valid header name",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","timestamp_pointer":"ts"}}"#,
                "timestamp_pointer must be a JSON pointer like /type",
            ),
            (
                r#"{"s":{"kind":"signed","signature_header":"S","public_url":"https://x/?q"}}"#,
                "public_url must be an http(s) URL without query string or fragment",
            ),
            (
                r#"{"s":{"kind":"token","token_header":"T","id_header":"a b"}}"#,
                "id_header is not a valid header name",
            ),
            (
                r#"{"s":{"kind":"token","token_header":"T","id_pointer":"id"}}"#,
                "id_pointer must be a JSON pointer like /type",
            ),
            (
                r#"{"s":{"kind":"token","token_header":"T","id_pointers":[]}}"#,
                "id_pointers must be a non-empty list of JSON pointers",
            ),
            (
                r#"{"s":{"kind":"token","token_header":"T","id_header":"X","id_pointer":"/id"}}"#,
                "give one of id_header, id_pointer or id_pointers",
            ),
            (
                r#"{"s":{"kind":"token","token_header":"T","event_type_header":"X","event_type_pointer":"/t"}}"#,
                "give event_type_header or event_type_pointer, not both",
            ),
            (
                r#"{"s":{"kind":"token","token_header":"T","event_type_header":"a b"}}"#,
                "event_type_header is not a valid header name",
            ),
            (
                r#"{"s":{"kind":"hmac","signature_header":"S","event_type_pointer":"type"}}"#,
                "event_type_pointer must be a JSON pointer like /type",
            ),
            (
                r#"{"s":{"kind":"stripe","tolerance_secs":"5"}}"#,
                "tolerance_secs: invalid type: string \"5\", expected u64",
            ),
        ];
        for (json, expected) in refused {
            let err = parse_sources(json).unwrap_err();
            assert_eq!(err.setting, "HOOKCLAIM_SOURCES", "{json}");
            assert!(err.to_string().contains(expected), "{json}: {err}");
            if json.contains("\"s\"") {
                assert!(err.problem.starts_with("source \"s\": "), "{json}: {err}");
            }
        }
    }
}
