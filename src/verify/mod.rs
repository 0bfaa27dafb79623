//! Signature verification for every source kind, as a pure function of (scheme, secrets,
//! headers, raw body, now). It never logs, never reads the clock and never sees the database,
//! so every rule can be tested with a fixed clock.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use http::HeaderMap;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use crate::secret::Secret;

/// The tolerance the providers' own libraries use for signed timestamps: five minutes.
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;

// Header names, lower-case as `HeaderMap` stores them (lookups are case-insensitive).
const STRIPE_SIGNATURE: &str = "stripe-signature";
const GITHUB_SIGNATURE: &str = "x-hub-signature-256";
const GITHUB_DELIVERY: &str = "x-github-delivery";
const GITHUB_EVENT: &str = "x-github-event";

/// The three Standard Webhooks headers, under one of the two spellings senders use.
struct StandardHeaders {
    id: &'static str,
    timestamp: &'static str,
    signature: &'static str,
}

/// The names the Standard Webhooks specification gives.
const STANDARD_HEADERS: StandardHeaders = StandardHeaders {
    id: "webhook-id",
    timestamp: "webhook-timestamp",
    signature: "webhook-signature",
};

/// The same headers as Svix sends them to most of its customers' endpoints (Clerk and Resend,
/// for instance): same format, `svix-` prefix. Svix's own libraries accept both spellings.
const SVIX_HEADERS: StandardHeaders = StandardHeaders {
    id: "svix-id",
    timestamp: "svix-timestamp",
    signature: "svix-signature",
};

/// The headers a scheme reads, lower-case: stored with each delivery so it can be re-verified
/// or replayed later.
pub fn scheme_headers(scheme: &Scheme) -> Vec<String> {
    match scheme {
        Scheme::Stripe { .. } => vec![STRIPE_SIGNATURE.into()],
        Scheme::Github => vec![
            GITHUB_SIGNATURE.into(),
            GITHUB_DELIVERY.into(),
            GITHUB_EVENT.into(),
        ],
        Scheme::Standard { .. } => [STANDARD_HEADERS, SVIX_HEADERS]
            .iter()
            .flat_map(|h| [h.id, h.timestamp, h.signature])
            .map(String::from)
            .collect(),
        Scheme::Hmac(h) => {
            let mut names = vec![h.signature_header.to_ascii_lowercase()];
            if let IdLocation::Header(name) = &h.id {
                names.push(name.to_ascii_lowercase());
            }
            names
        }
    }
}

/// Most entries parsed from one signature header. A sender puts one signature per active secret
/// (two during a rotation), so 16 is generous; the cap bounds the work one request can cause.
const MAX_SIGNATURE_ENTRIES: usize = 16;

/// An HMAC-SHA256 output. A received signature is only ever compared after decoding to exactly
/// this many bytes, so an empty or truncated signature can never match.
type Tag = [u8; 32];

/// How a source signs its deliveries and where its delivery id and event type live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheme {
    /// `Stripe-Signature: t=…,v1=…`; id and type in the JSON body.
    Stripe {
        /// Oldest accepted `t`, in seconds before now.
        tolerance_secs: u64,
    },
    /// `X-Hub-Signature-256: sha256=<hex>`; id and type in headers.
    Github,
    /// Standard Webhooks (Svix, Polar, Clerk, Resend…): `webhook-id`, `webhook-timestamp`,
    /// `webhook-signature`.
    Standard {
        /// Largest accepted distance between `webhook-timestamp` and now, either direction.
        tolerance_secs: u64,
    },
    /// A generic HMAC-SHA256 of the body.
    Hmac(HmacScheme),
}

/// The generic HMAC scheme's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmacScheme {
    /// Header carrying the signature (matched case-insensitively).
    pub signature_header: String,
    /// Text before the signature value, e.g. `sha256=`; empty for none.
    pub prefix: String,
    /// How the MAC is written in the header.
    pub encoding: SignatureEncoding,
    /// Where the delivery id comes from.
    pub id: IdLocation,
    /// JSON pointer (RFC 6901) to the event type in the body, if any.
    pub event_type_pointer: Option<String>,
}

/// Text encoding of a generic HMAC signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureEncoding {
    /// Lower- or upper-case hexadecimal.
    Hex,
    /// Standard base64 with padding.
    Base64,
}

/// Where the generic HMAC scheme finds the delivery id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdLocation {
    /// A request header.
    Header(String),
    /// A JSON pointer into the body.
    JsonPointer(String),
    /// No id from the sender: the hex SHA-256 of the body is the id.
    BodySha256,
}

/// Where a verified delivery's id came from; stored with the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdOrigin {
    /// A header the sender set.
    Header,
    /// A field of the JSON body.
    Body,
    /// Derived: SHA-256 of the body, because the sender gives no id.
    BodySha256,
}

impl IdOrigin {
    /// The name stored in the `id_origin` column.
    pub fn as_str(self) -> &'static str {
        match self {
            IdOrigin::Header => "header",
            IdOrigin::Body => "body",
            IdOrigin::BodySha256 => "body_sha256",
        }
    }
}

/// What verification proves about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The sender's delivery id (or the body hash for id-less generic senders).
    pub delivery_id: String,
    /// Where `delivery_id` came from.
    pub id_origin: IdOrigin,
    /// The event type, where the scheme has one.
    pub event_type: Option<String>,
}

/// Why a request was refused. Never carries a secret, a signature or the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A header the scheme requires is absent (or not visible ASCII).
    #[error("missing header {0}")]
    MissingHeader(String),
    /// A signature or timestamp header is present but cannot be parsed.
    #[error("malformed header {0}")]
    MalformedHeader(String),
    /// No signature in the header matches any configured secret.
    #[error("no signature matches")]
    InvalidSignature,
    /// The signed timestamp is outside the tolerance.
    #[error("timestamp outside tolerance")]
    TimestampOutOfTolerance,
    /// The source has no secret configured.
    #[error("no secret configured")]
    NoSecret,
    /// Signed, but the delivery id is missing where the scheme requires one.
    #[error("missing delivery id")]
    MissingDeliveryId,
    /// Signed, but the body must be JSON (the id or type lives in it) and is not.
    #[error("body is not valid JSON")]
    InvalidJson,
    /// Signed, but the delivery id is longer than [`MAX_ID_LEN`] or holds control characters.
    #[error("delivery id is too long or contains control characters")]
    InvalidDeliveryId,
}

/// Longest delivery id accepted, in bytes. Providers' ids are 30 to 40 characters; the cap keeps
/// the unique index small and refuses garbage.
pub const MAX_ID_LEN: usize = 512;

/// Longest event type kept; a longer one is dropped (the delivery is still accepted).
pub const MAX_EVENT_TYPE_LEN: usize = 256;

impl VerifyError {
    /// True for failures of authenticity (401); false for well-signed but malformed requests (400).
    pub fn is_unauthorized(&self) -> bool {
        !matches!(
            self,
            VerifyError::MissingDeliveryId
                | VerifyError::InvalidJson
                | VerifyError::InvalidDeliveryId
        )
    }
}

/// Verifies `body` against `headers` with any of `secrets`, at unix time `now`, and extracts the
/// delivery id and event type.
///
/// The MAC is always computed over the exact bytes received, and compared in constant time.
/// Authenticity is settled first (`MissingHeader`, `MalformedHeader`, `InvalidSignature`,
/// `TimestampOutOfTolerance`: 401); only a signed request is then read for its id and type
/// (`MissingDeliveryId`, `InvalidJson`: 400).
///
/// Rules shared by all kinds:
/// - Several secrets mean a rotation: any one of them verifies. Empty secrets are ignored, and
///   with no non-empty secret the answer is `NoSecret`.
/// - A header value that is not visible ASCII counts as absent (`MissingHeader`).
/// - A signature counts only if it decodes to exactly 32 bytes: empty, truncated, odd-length
///   or over-long values never match.
/// - Timestamps are unix seconds written as plain decimal digits; a sign, a fraction or a value
///   beyond `i64` is `MalformedHeader`.
/// - The signature is checked before the timestamp, so `TimestampOutOfTolerance` always means
///   "genuinely signed, but too old (or too far ahead)".
/// - An empty delivery id is a missing one. An empty event type is `None`.
///
/// Per kind:
/// - `Stripe`: `Stripe-Signature` holds `t=` and one or more `v1=` (hex); `v0` and any other
///   entry is ignored, as Stripe's libraries do, and a header with no usable `v1` is
///   `InvalidSignature`. A `t` more than `tolerance_secs` in the past is rejected; a `t` in the
///   future is accepted, as Stripe's libraries only check age (the spec says "older than
///   tolerance"). The body must be JSON with a string `id` (the delivery id); `type` is the
///   event type if it is a string.
/// - `Github`: `X-Hub-Signature-256` holds exactly one `sha256=<hex>`; anything else in it is
///   `MalformedHeader`. The delivery id is `X-GitHub-Delivery` and the event type
///   `X-GitHub-Event` (optional).
/// - `Standard`: `webhook-id`, `webhook-timestamp` and `webhook-signature`; when
///   `webhook-signature` is absent, the `svix-` spellings of all three are used instead. The
///   signature header is a space-separated list of `<version>,<base64>`; only `v1` entries are
///   tried. The timestamp must be within `tolerance_secs` of now in either direction. The
///   delivery id is `webhook-id`; the event type is the body's string `type` when the body is
///   JSON (a non-JSON body is not an error here).
/// - `Hmac`: the configured header holds the prefix followed by exactly one hex or base64 MAC
///   of the body; a missing prefix or undecodable value is `MalformedHeader`. The id comes from
///   a header, a JSON pointer (a string, or an integer written in decimal; a JSON pointer
///   on a non-JSON body is `InvalidJson`) or the lower-case hex SHA-256 of the body. The event
///   type pointer only accepts strings, and yields `None` when the body is not JSON.
///
/// Signature headers with more than 16 entries are `MalformedHeader`, to bound the work.
pub fn verify(
    scheme: &Scheme,
    secrets: &[Secret],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    // An empty key would let anyone compute a valid MAC; treat it as no key at all.
    let keys: Vec<&[u8]> = secrets
        .iter()
        .map(Secret::expose)
        .filter(|key| !key.is_empty())
        .collect();
    if keys.is_empty() {
        return Err(VerifyError::NoSecret);
    }
    let verified = match scheme {
        Scheme::Stripe { tolerance_secs } => {
            verify_stripe(*tolerance_secs, &keys, headers, body, now)
        }
        Scheme::Github => verify_github(&keys, headers, body),
        Scheme::Standard { tolerance_secs } => {
            verify_standard(*tolerance_secs, &keys, headers, body, now)
        }
        Scheme::Hmac(settings) => verify_generic_hmac(settings, &keys, headers, body),
    }?;
    storable(verified)
}

/// Checks that a signed delivery's id and type can be stored as they are: PostgreSQL text holds
/// no NUL, and ids are keys, so they are bounded. A bad id is refused; a bad event type, which
/// is informational, is dropped.
fn storable(mut verified: Verified) -> Result<Verified, VerifyError> {
    let clean = |s: &str, max: usize| s.len() <= max && !s.chars().any(char::is_control);
    if !clean(&verified.delivery_id, MAX_ID_LEN) {
        return Err(VerifyError::InvalidDeliveryId);
    }
    if let Some(t) = &verified.event_type {
        if !clean(t, MAX_EVENT_TYPE_LEN) {
            verified.event_type = None;
        }
    }
    Ok(verified)
}

fn verify_stripe(
    tolerance_secs: u64,
    keys: &[&[u8]],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    let header = required_header(headers, STRIPE_SIGNATURE)?;
    let malformed = || VerifyError::MalformedHeader(STRIPE_SIGNATURE.to_owned());

    let mut timestamp_text = None;
    let mut candidates = Vec::new();
    for entry in bounded_entries(header, ',').ok_or_else(malformed)? {
        match entry.split_once('=') {
            Some(("t", value)) => {
                // Two timestamps leave it unclear which one was signed.
                if timestamp_text.is_some() {
                    return Err(malformed());
                }
                timestamp_text = Some(value);
            }
            Some(("v1", value)) => candidates.extend(decode_hex_tag(value)),
            // Stripe's libraries verify `v1` only; `v0` and unknown schemes are skipped.
            _ => {}
        }
    }
    let timestamp_text = timestamp_text.ok_or_else(malformed)?;
    let timestamp = parse_unix_seconds(timestamp_text).ok_or_else(malformed)?;

    // Stripe signs "{t}.{body}"; the `t` text is used exactly as received.
    let signed = [timestamp_text.as_bytes(), b".", body];
    if !any_key_matches(keys, &signed, &candidates) {
        return Err(VerifyError::InvalidSignature);
    }
    // Only age is checked (see `verify`). Widened to i128 so the subtraction cannot overflow.
    if i128::from(now) - i128::from(timestamp) > i128::from(tolerance_secs) {
        return Err(VerifyError::TimestampOutOfTolerance);
    }

    let json: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| VerifyError::InvalidJson)?;
    let delivery_id = json_string(&json, "/id").ok_or(VerifyError::MissingDeliveryId)?;
    Ok(Verified {
        delivery_id,
        id_origin: IdOrigin::Body,
        event_type: json_string(&json, "/type"),
    })
}

fn verify_github(
    keys: &[&[u8]],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Verified, VerifyError> {
    let header = required_header(headers, GITHUB_SIGNATURE)?;
    let tag = header
        .strip_prefix("sha256=")
        .and_then(decode_hex_tag)
        .ok_or_else(|| VerifyError::MalformedHeader(GITHUB_SIGNATURE.to_owned()))?;
    if !any_key_matches(keys, &[body], &[tag]) {
        return Err(VerifyError::InvalidSignature);
    }

    let delivery_id =
        optional_header(headers, GITHUB_DELIVERY).ok_or(VerifyError::MissingDeliveryId)?;
    Ok(Verified {
        delivery_id,
        id_origin: IdOrigin::Header,
        event_type: optional_header(headers, GITHUB_EVENT),
    })
}

fn verify_standard(
    tolerance_secs: u64,
    keys: &[&[u8]],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    // Take all three headers from one spelling, so a request never mixes the two.
    let names = if !headers.contains_key(STANDARD_HEADERS.signature)
        && headers.contains_key(SVIX_HEADERS.signature)
    {
        &SVIX_HEADERS
    } else {
        &STANDARD_HEADERS
    };
    let signature = required_header(headers, names.signature)?;
    let id = required_header(headers, names.id)?;
    let timestamp_text = required_header(headers, names.timestamp)?;
    let timestamp = parse_unix_seconds(timestamp_text)
        .ok_or_else(|| VerifyError::MalformedHeader(names.timestamp.to_owned()))?;

    let entries = bounded_entries(signature, ' ')
        .ok_or_else(|| VerifyError::MalformedHeader(names.signature.to_owned()))?;
    // Entries are `<version>,<base64>`. Only `v1` is HMAC-SHA256; `v1a` (asymmetric) and
    // anything unknown is skipped, as the reference libraries do.
    let candidates: Vec<Tag> = entries
        .into_iter()
        .filter_map(|entry| match entry.split_once(',') {
            Some(("v1", value)) => decode_base64_tag(value),
            _ => None,
        })
        .collect();

    let signed = [id.as_bytes(), b".", timestamp_text.as_bytes(), b".", body];
    if !any_key_matches(keys, &signed, &candidates) {
        return Err(VerifyError::InvalidSignature);
    }
    if now.abs_diff(timestamp) > tolerance_secs {
        return Err(VerifyError::TimestampOutOfTolerance);
    }

    if id.is_empty() {
        return Err(VerifyError::MissingDeliveryId);
    }
    // The type is a convenience: a body that is not JSON is still a valid delivery.
    let event_type = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|json| json_string(&json, "/type"));
    Ok(Verified {
        delivery_id: id.to_owned(),
        id_origin: IdOrigin::Header,
        event_type,
    })
}

fn verify_generic_hmac(
    settings: &HmacScheme,
    keys: &[&[u8]],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Verified, VerifyError> {
    let header_name = settings.signature_header.as_str();
    let header = required_header(headers, header_name)?;
    let encoded = header
        .strip_prefix(settings.prefix.as_str())
        .ok_or_else(|| VerifyError::MalformedHeader(header_name.to_owned()))?;
    let tag = match settings.encoding {
        SignatureEncoding::Hex => decode_hex_tag(encoded),
        SignatureEncoding::Base64 => decode_base64_tag(encoded),
    }
    .ok_or_else(|| VerifyError::MalformedHeader(header_name.to_owned()))?;
    if !any_key_matches(keys, &[body], &[tag]) {
        return Err(VerifyError::InvalidSignature);
    }

    // Parse the body at most once, and only when a pointer needs it.
    let needs_json =
        matches!(settings.id, IdLocation::JsonPointer(_)) || settings.event_type_pointer.is_some();
    let json = if needs_json {
        serde_json::from_slice::<serde_json::Value>(body).ok()
    } else {
        None
    };

    let (delivery_id, id_origin) = match &settings.id {
        IdLocation::Header(name) => (
            optional_header(headers, name).ok_or(VerifyError::MissingDeliveryId)?,
            IdOrigin::Header,
        ),
        IdLocation::JsonPointer(pointer) => {
            let json = json.as_ref().ok_or(VerifyError::InvalidJson)?;
            (
                json_id(json, pointer).ok_or(VerifyError::MissingDeliveryId)?,
                IdOrigin::Body,
            )
        }
        IdLocation::BodySha256 => (hex::encode(Sha256::digest(body)), IdOrigin::BodySha256),
    };
    let event_type = match (&json, &settings.event_type_pointer) {
        (Some(json), Some(pointer)) => json_string(json, pointer),
        _ => None,
    };
    Ok(Verified {
        delivery_id,
        id_origin,
        event_type,
    })
}

/// The header's value, or `MissingHeader` when it is absent or not visible ASCII.
fn required_header<'a>(headers: &'a HeaderMap, name: &str) -> Result<&'a str, VerifyError> {
    // `get` with a name that is not a valid header name finds nothing; it does not panic.
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .ok_or_else(|| VerifyError::MissingHeader(name.to_owned()))
}

/// The header's value when present, visible ASCII and not empty.
fn optional_header(headers: &HeaderMap, name: &str) -> Option<String> {
    let value = headers.get(name)?.to_str().ok()?;
    (!value.is_empty()).then(|| value.to_owned())
}

/// Splits a signature header into its entries, or `None` when it has more than
/// `MAX_SIGNATURE_ENTRIES`.
fn bounded_entries(value: &str, separator: char) -> Option<Vec<&str>> {
    let entries: Vec<&str> = value
        .split(separator)
        .take(MAX_SIGNATURE_ENTRIES + 1)
        .collect();
    (entries.len() <= MAX_SIGNATURE_ENTRIES).then_some(entries)
}

/// Unix seconds written as plain decimal digits. Rejects `+`/`-` signs (which `i64::from_str`
/// would accept), fractions, spaces and values that overflow `i64`.
fn parse_unix_seconds(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A hex signature that decodes to exactly 32 bytes (either letter case).
fn decode_hex_tag(text: &str) -> Option<Tag> {
    let bytes = hex::decode(text).ok()?;
    Tag::try_from(bytes.as_slice()).ok()
}

/// A standard, padded base64 signature that decodes to exactly 32 bytes.
fn decode_base64_tag(text: &str) -> Option<Tag> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    Tag::try_from(bytes.as_slice()).ok()
}

/// True when the HMAC-SHA256 of the concatenated `signed` parts under any key equals any
/// candidate. Each key's MAC is computed once; every comparison is constant-time.
fn any_key_matches(keys: &[&[u8]], signed: &[&[u8]], candidates: &[Tag]) -> bool {
    keys.iter().any(|key| {
        let Some(expected) = hmac_sha256(key, signed) else {
            return false;
        };
        candidates
            .iter()
            .any(|candidate| bool::from(expected.ct_eq(candidate)))
    })
}

/// HMAC-SHA256 over the concatenation of `parts`. `None` cannot happen for HMAC (it takes keys
/// of any length), but the API is fallible and this module never panics.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> Option<Tag> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).ok()?;
    for part in parts {
        mac.update(part);
    }
    Some(mac.finalize().into_bytes().into())
}

/// A non-empty string at `pointer`.
fn json_string(json: &serde_json::Value, pointer: &str) -> Option<String> {
    let text = json.pointer(pointer)?.as_str()?;
    (!text.is_empty()).then(|| text.to_owned())
}

/// A generic sender's delivery id at `pointer`: a non-empty string, or an integer written in
/// decimal (integers have one canonical spelling; floats, booleans and objects do not count).
fn json_id(json: &serde_json::Value, pointer: &str) -> Option<String> {
    match json.pointer(pointer)? {
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => json_string(json, pointer),
    }
}

#[cfg(test)]
mod tests;
