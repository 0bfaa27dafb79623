//! Each source kind's settings, one struct per kind, and the scheme they make. A setting belongs
//! to a kind by being a field of its struct; the scheme's own rules are checked where the scheme
//! is built (`SignedScheme::new`).

use serde::Deserialize;

use super::settings::kind_settings;
use super::MAX_TOLERANCE_SECS;
use crate::handshake::Handshake;
use crate::verify::{
    presets, Algorithm, Field, HmacScheme, IdLocation, MessagePart, Scheme, SignatureEncoding,
    SignatureFormat, SignedParts, SignedScheme, TimestampFrom, TimestampRule, TimestampUnit,
    TokenScheme, Tolerance, DEFAULT_TOLERANCE_SECS,
};

/// The kinds that are not presets.
const KINDS: &[&str] = &["stripe", "github", "standard", "hmac", "signed", "token"];

type Object = serde_json::Map<String, serde_json::Value>;

/// The scheme (and, for presets, the handshakes) of a source of `kind` with `settings`.
pub(super) fn scheme(kind: &str, settings: Object) -> Result<(Scheme, Option<Handshake>), String> {
    let scheme = match kind {
        "stripe" => {
            let s: Timestamped = kind_settings(kind, settings)?;
            Scheme::Stripe {
                tolerance_secs: tolerance(s.tolerance_secs)?,
            }
        }
        "github" => {
            kind_settings::<Nothing>(kind, settings)?;
            Scheme::Github
        }
        "standard" => {
            let s: Standard = kind_settings(kind, settings)?;
            Scheme::Standard {
                tolerance_secs: tolerance(s.tolerance_secs)?,
                raw_secrets: s.secret_encoding == Some(SecretEncoding::Raw),
            }
        }
        "hmac" => Scheme::Hmac(kind_settings::<Hmac>(kind, settings)?.scheme()?),
        "signed" => Scheme::Signed(kind_settings::<Signed>(kind, settings)?.scheme()?),
        "token" => Scheme::Token(kind_settings::<Token>(kind, settings)?.scheme()?),
        other => {
            let Some(preset) = presets::lookup(other) else {
                let presets: Vec<&str> = presets::PRESETS.iter().map(|p| p.name).collect();
                return Err(format!(
                    "kind {other:?} is not one of {}, or a preset: {}",
                    KINDS.join(", "),
                    presets.join(", ")
                ));
            };
            return kind_settings::<Preset>(kind, settings)?.scheme(preset);
        }
    };
    Ok((scheme, None))
}

/// `tolerance_secs`, bounded, or the default.
fn tolerance(secs: Option<u64>) -> Result<u64, String> {
    match secs {
        Some(t) if !(1..=MAX_TOLERANCE_SECS).contains(&t) => Err(format!(
            "tolerance_secs must be 1..={MAX_TOLERANCE_SECS}: far below the key retention, \
             which a signed timestamp shortens to RETENTION_DAYS"
        )),
        t => Ok(t.unwrap_or(DEFAULT_TOLERANCE_SECS)),
    }
}

/// `github`: nothing beyond the settings every kind reads.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Nothing {}

/// `stripe`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Timestamped {
    tolerance_secs: Option<u64>,
}

/// `standard`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Standard {
    tolerance_secs: Option<u64>,
    /// Base64 by the specification; raw bytes for Polar.
    secret_encoding: Option<SecretEncoding>,
}

#[derive(Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum SecretEncoding {
    Base64,
    Raw,
}

/// `hmac`: a MAC of the body in one header.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Hmac {
    signature_header: Option<String>,
    #[serde(default)]
    prefix: String,
    encoding: Option<SignatureEncoding>,
    id_header: Option<String>,
    id_pointer: Option<String>,
    event_type_pointer: Option<String>,
}

impl Hmac {
    fn scheme(self) -> Result<HmacScheme, String> {
        Ok(HmacScheme {
            signature_header: header_name(self.signature_header)
                .ok_or("kind hmac needs a valid signature_header")?,
            prefix: self.prefix,
            encoding: self.encoding.unwrap_or(SignatureEncoding::Hex),
            id: id_location(self.id_header, self.id_pointer, None)?,
            event_type_pointer: pointer(self.event_type_pointer, "event_type_pointer")?,
        })
    }
}

/// `token`: a static token in a header.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Token {
    token_header: Option<String>,
    id_header: Option<String>,
    id_pointer: Option<String>,
    id_pointers: Option<Vec<String>>,
    event_type_header: Option<String>,
    event_type_pointer: Option<String>,
}

impl Token {
    fn scheme(self) -> Result<TokenScheme, String> {
        Ok(TokenScheme {
            token_header: header_name(self.token_header)
                .ok_or("kind token needs a valid token_header")?,
            id: id_location(self.id_header, self.id_pointer, self.id_pointers)?,
            event_type: event_type(self.event_type_header, self.event_type_pointer)?,
        })
    }
}

/// `signed`: an HMAC over a message built from parts of the request.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Signed {
    signature_header: Option<String>,
    algorithm: Option<Algorithm>,
    encoding: Option<SignatureEncoding>,
    prefix: Option<String>,
    signature_list: Option<SignatureList>,
    message: Option<Vec<MessagePart>>,
    timestamp_header: Option<String>,
    timestamp_pointer: Option<String>,
    timestamp_unit: Option<TimestampUnit>,
    timestamp_past_only: Option<bool>,
    tolerance_secs: Option<u64>,
    id_header: Option<String>,
    id_pointer: Option<String>,
    id_pointers: Option<Vec<String>>,
    event_type_header: Option<String>,
    event_type_pointer: Option<String>,
    public_url: Option<String>,
}

/// `"signature_list": {"separator": ";", "signature_key": "h1", "timestamp_key": "ts"}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignatureList {
    separator: char,
    signature_key: String,
    timestamp_key: Option<String>,
}

impl Signed {
    fn scheme(self) -> Result<SignedScheme, String> {
        let signature_header = self
            .signature_header
            .ok_or("kind signed needs a valid signature_header")?;
        let (format, in_signature) = match (self.prefix, self.signature_list) {
            (Some(_), Some(_)) => return Err("give prefix or signature_list, not both".into()),
            (prefix, None) => (SignatureFormat::Prefixed(prefix.unwrap_or_default()), false),
            (None, Some(list)) => (
                SignatureFormat::List {
                    separator: list.separator,
                    signature_key: list.signature_key,
                    timestamp_key: list.timestamp_key.clone(),
                },
                list.timestamp_key.is_some(),
            ),
        };
        let from = match (self.timestamp_header, self.timestamp_pointer, in_signature) {
            (None, None, false) => None,
            (Some(h), None, false) => Some(TimestampFrom::Header(h)),
            (None, Some(p), false) => Some(TimestampFrom::Body(
                pointer(Some(p), "timestamp_pointer")?.unwrap_or_default(),
            )),
            (None, None, true) => Some(TimestampFrom::Signature),
            _ => {
                return Err("give one of timestamp_header, timestamp_pointer or \
                            signature_list.timestamp_key"
                    .into())
            }
        };
        let timestamp = match from {
            Some(from) => Some(TimestampRule {
                from,
                unit: self.timestamp_unit.unwrap_or(TimestampUnit::Seconds),
                tolerance: match (tolerance(self.tolerance_secs)?, self.timestamp_past_only) {
                    (secs, Some(true)) => Tolerance::Past(secs),
                    (secs, _) => Tolerance::Both(secs),
                },
            }),
            None if self.tolerance_secs.is_some() => {
                return Err("tolerance_secs needs a timestamp (timestamp_header, \
                            timestamp_pointer or signature_list.timestamp_key)"
                    .into())
            }
            None if self.timestamp_unit.is_some() || self.timestamp_past_only.is_some() => {
                return Err("timestamp_unit and timestamp_past_only need a timestamp".into())
            }
            None => None,
        };
        SignedScheme::new(SignedParts {
            algorithm: self.algorithm.unwrap_or(Algorithm::Sha256),
            signature_header,
            encoding: self.encoding.unwrap_or(SignatureEncoding::Hex),
            format,
            message: self.message.unwrap_or_else(|| vec![MessagePart::Body]),
            timestamp,
            id: id_location(self.id_header, self.id_pointer, self.id_pointers)?,
            event_type: event_type(self.event_type_header, self.event_type_pointer)?,
            public_url: self.public_url,
        })
        .map_err(|e| e.to_string())
    }
}

/// A named provider's preset: `"kind": "slack"`, …
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Preset {
    tolerance_secs: Option<u64>,
    public_url: Option<String>,
}

impl Preset {
    fn scheme(self, preset: &presets::Preset) -> Result<(Scheme, Option<Handshake>), String> {
        let kind = preset.name;
        if self.tolerance_secs.is_some() && preset.default_tolerance_secs.is_none() {
            return Err(format!(
                "tolerance_secs does not apply to kind {kind}: it signs no timestamp"
            ));
        }
        tolerance(self.tolerance_secs)?;
        let public_url = match (preset.needs_public_url, self.public_url) {
            (true, Some(url)) => public_url(url)?,
            (true, None) => {
                return Err(format!(
                    "kind {kind} needs public_url: the URL the provider posts to, which it signs"
                ))
            }
            (false, Some(_)) => {
                return Err(format!(
                    "public_url does not apply to kind {kind}: it signs no URL"
                ))
            }
            (false, None) => String::new(),
        };
        Ok((
            preset.scheme(self.tolerance_secs, &public_url),
            preset.handshake,
        ))
    }
}

fn header_name(name: Option<String>) -> Option<String> {
    name.filter(|h| http::HeaderName::from_bytes(h.as_bytes()).is_ok())
}

fn pointer(p: Option<String>, field: &str) -> Result<Option<String>, String> {
    match p {
        Some(p) if !p.starts_with('/') => Err(format!("{field} must be a JSON pointer like /type")),
        p => Ok(p),
    }
}

fn public_url(url: String) -> Result<String, String> {
    let ok = (url.starts_with("https://") || url.starts_with("http://"))
        && !url.contains(['?', '#'])
        && !url.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(url)
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
        (Some(h), None, None) => IdLocation::Header(
            header_name(Some(h)).ok_or("id_header is not a valid header name")?,
        ),
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
            header_name(Some(h)).ok_or("event_type_header is not a valid header name")?,
        ))),
        (None, p) => Ok(pointer(p, "event_type_pointer")?.map(Field::Pointer)),
    }
}
