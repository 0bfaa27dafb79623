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
mod tests {
    use super::*;
    use http::{HeaderName, HeaderValue};

    /// The one clock every test uses: the Standard Webhooks test vector's timestamp.
    const NOW: i64 = 1_614_265_330;

    // ---------------------------------------------------------------------------------------
    // Table machinery
    // ---------------------------------------------------------------------------------------

    /// One row: a request, the secrets configured, and the answer `verify` must give.
    struct Case {
        name: &'static str,
        secrets: Vec<Secret>,
        headers: Vec<(&'static str, Vec<u8>)>,
        body: Vec<u8>,
        expected: Result<Verified, VerifyError>,
    }

    fn case(
        name: &'static str,
        secrets: Vec<Secret>,
        headers: Vec<(&'static str, Vec<u8>)>,
        body: impl AsRef<[u8]>,
        expected: Result<Verified, VerifyError>,
    ) -> Case {
        Case {
            name,
            secrets,
            headers,
            body: body.as_ref().to_vec(),
            expected,
        }
    }

    /// A header as raw bytes, so rows can carry non-ASCII values.
    fn h(name: &'static str, value: impl AsRef<[u8]>) -> (&'static str, Vec<u8>) {
        (name, value.as_ref().to_vec())
    }

    fn header_map(pairs: &[(&'static str, Vec<u8>)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    fn run(scheme: &Scheme, cases: Vec<Case>, now: i64) {
        for c in cases {
            let got = verify(scheme, &c.secrets, &header_map(&c.headers), &c.body, now);
            assert_eq!(got, c.expected, "case: {}", c.name);
        }
    }

    fn ok(id: &str, origin: IdOrigin, event_type: Option<&str>) -> Result<Verified, VerifyError> {
        Ok(Verified {
            delivery_id: id.to_owned(),
            id_origin: origin,
            event_type: event_type.map(str::to_owned),
        })
    }

    fn missing(name: &str) -> Result<Verified, VerifyError> {
        Err(VerifyError::MissingHeader(name.to_owned()))
    }

    fn malformed(name: &str) -> Result<Verified, VerifyError> {
        Err(VerifyError::MalformedHeader(name.to_owned()))
    }

    fn raw(secret: &str) -> Secret {
        Secret::from_bytes(secret)
    }

    fn standard_secret(secret: &str) -> Secret {
        Secret::parse(secret, true).unwrap()
    }

    /// A test-only HMAC-SHA256, used to sign rows whose timestamps or bodies vary. It is
    /// anchored to the published vectors by `test_signer_reproduces_published_vectors`; the
    /// rows that prove interoperability use literal signatures instead.
    fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().to_vec()
    }

    fn base64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    // ---------------------------------------------------------------------------------------
    // Stripe
    // ---------------------------------------------------------------------------------------

    const STRIPE: Scheme = Scheme::Stripe {
        tolerance_secs: DEFAULT_TOLERANCE_SECS,
    };
    const STRIPE_SECRET: &str = "whsec_test_secret";
    const STRIPE_OLD_SECRET: &str = "whsec_old_secret";
    const STRIPE_BODY: &str = r#"{"id":"evt_test_webhook","object":"event","type":"invoice.paid"}"#;
    // The literal signatures below were computed outside this crate, with
    //   printf '%s' "1614265330.$BODY" | openssl dgst -sha256 -hmac "$SECRET"
    // following Stripe's published scheme: HMAC-SHA256 of "{t}.{raw body}", hex.
    const STRIPE_SIG: &str = "94a95a585251b387d383b81fdde1a4608d680d84c35b091be61e884cfac66034";
    const STRIPE_OLD_SIG: &str = "77b75aad35f81c30a2654b29a5fb791f018e97ec3be501d6ed1e831d98bbbaca";
    const STRIPE_UTF8_BODY: &str =
        r#"{"id":"evt_utf8","type":"customer.updated","name":"Zoë 東京"}"#;
    const STRIPE_UTF8_SIG: &str =
        "6558a2792faaa0fb6b71bc84b970e66e2be327a17f9b86a32e992b86754d8b5f";
    const STRIPE_INVALID_UTF8_BODY: &[u8] = b"\xff\xfe{";
    const STRIPE_INVALID_UTF8_SIG: &str =
        "cea4e3492323bd4b71a2f3e54f03792fa57a3c7089e20606ad97e80db740c142";

    fn stripe_sig(secret: &str, t: i64, body: &[u8]) -> String {
        hex::encode(hmac(
            secret.as_bytes(),
            &[t.to_string().as_bytes(), b".", body],
        ))
    }

    /// `Stripe-Signature: t=NOW,v1=<v1>`.
    fn stripe_header(v1: &str) -> Vec<(&'static str, Vec<u8>)> {
        vec![h("Stripe-Signature", format!("t={NOW},v1={v1}"))]
    }

    fn stripe_only() -> Vec<Secret> {
        vec![raw(STRIPE_SECRET)]
    }

    #[test]
    fn stripe_accepts_genuine_signatures() {
        let paid = ok("evt_test_webhook", IdOrigin::Body, Some("invoice.paid"));
        let rotated = || vec![raw(STRIPE_SECRET), raw(STRIPE_OLD_SECRET)];
        let at = |t: i64| {
            vec![h(
                "Stripe-Signature",
                format!(
                    "t={t},v1={}",
                    stripe_sig(STRIPE_SECRET, t, STRIPE_BODY.as_bytes())
                ),
            )]
        };
        let no_type = br#"{"id":"evt_no_type"}"#;
        run(
            &STRIPE,
            vec![
                case(
                    "v1 computed independently with openssl",
                    stripe_only(),
                    stripe_header(STRIPE_SIG),
                    STRIPE_BODY,
                    paid.clone(),
                ),
                case(
                    "header name in upper case",
                    stripe_only(),
                    vec![h("STRIPE-SIGNATURE", format!("t={NOW},v1={STRIPE_SIG}"))],
                    STRIPE_BODY,
                    paid.clone(),
                ),
                case(
                    "new secret of a rotated pair",
                    rotated(),
                    stripe_header(STRIPE_SIG),
                    STRIPE_BODY,
                    paid.clone(),
                ),
                case(
                    "old secret of a rotated pair",
                    rotated(),
                    stripe_header(STRIPE_OLD_SIG),
                    STRIPE_BODY,
                    paid.clone(),
                ),
                case(
                    "only the second v1 matches",
                    stripe_only(),
                    vec![h(
                        "Stripe-Signature",
                        format!("t={NOW},v1={STRIPE_OLD_SIG},v1={STRIPE_SIG}"),
                    )],
                    STRIPE_BODY,
                    paid.clone(),
                ),
                case(
                    "v0 and unknown schemes beside v1 are ignored",
                    stripe_only(),
                    vec![h(
                        "Stripe-Signature",
                        format!("t={NOW},v0={},v1={STRIPE_SIG},v9=zz", "0".repeat(64)),
                    )],
                    STRIPE_BODY,
                    paid.clone(),
                ),
                case(
                    "upper-case hex digits",
                    stripe_only(),
                    stripe_header(&STRIPE_SIG.to_uppercase()),
                    STRIPE_BODY,
                    paid.clone(),
                ),
                case(
                    "UTF-8 body",
                    stripe_only(),
                    stripe_header(STRIPE_UTF8_SIG),
                    STRIPE_UTF8_BODY,
                    ok("evt_utf8", IdOrigin::Body, Some("customer.updated")),
                ),
                case(
                    "t exactly at tolerance in the past",
                    stripe_only(),
                    at(NOW - 300),
                    STRIPE_BODY,
                    paid.clone(),
                ),
                case(
                    "t past tolerance in the future: Stripe only checks age",
                    stripe_only(),
                    at(NOW + 301),
                    STRIPE_BODY,
                    paid.clone(),
                ),
                case(
                    "body without type",
                    stripe_only(),
                    stripe_header(&stripe_sig(STRIPE_SECRET, NOW, no_type)),
                    no_type,
                    ok("evt_no_type", IdOrigin::Body, None),
                ),
            ],
            NOW,
        );
    }

    #[test]
    fn stripe_rejects_unauthentic_requests() {
        let with = |value: String| vec![h("Stripe-Signature", value)];
        let sixteen_v1 = format!(",v1={STRIPE_SIG}").repeat(16);
        let too_old = NOW - 301;
        run(
            &STRIPE,
            vec![
                case(
                    "body tampered",
                    stripe_only(),
                    stripe_header(STRIPE_SIG),
                    STRIPE_BODY.replace("paid", "void"),
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "wrong secret",
                    vec![raw(STRIPE_OLD_SECRET)],
                    stripe_header(STRIPE_SIG),
                    STRIPE_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "t changed after signing",
                    stripe_only(),
                    with(format!("t={},v1={STRIPE_SIG}", NOW + 1)),
                    STRIPE_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "t one second past tolerance",
                    stripe_only(),
                    with(format!(
                        "t={too_old},v1={}",
                        stripe_sig(STRIPE_SECRET, too_old, STRIPE_BODY.as_bytes())
                    )),
                    STRIPE_BODY,
                    Err(VerifyError::TimestampOutOfTolerance),
                ),
                case(
                    "t past tolerance with a bad signature: signature is checked first",
                    stripe_only(),
                    with(format!("t={too_old},v1={STRIPE_SIG}")),
                    STRIPE_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "header missing",
                    stripe_only(),
                    vec![],
                    STRIPE_BODY,
                    missing("stripe-signature"),
                ),
                case(
                    "header value with UTF-8 (not visible ASCII)",
                    stripe_only(),
                    with(format!("t={NOW},v1={STRIPE_SIG},x=é")),
                    STRIPE_BODY,
                    missing("stripe-signature"),
                ),
                case(
                    "header value with invalid UTF-8",
                    stripe_only(),
                    vec![h(
                        "Stripe-Signature",
                        [format!("t={NOW},v1=").as_bytes(), b"\xff"].concat(),
                    )],
                    STRIPE_BODY,
                    missing("stripe-signature"),
                ),
                case(
                    "no t",
                    stripe_only(),
                    with(format!("v1={STRIPE_SIG}")),
                    STRIPE_BODY,
                    malformed("stripe-signature"),
                ),
                case(
                    "empty t",
                    stripe_only(),
                    with(format!("t=,v1={STRIPE_SIG}")),
                    STRIPE_BODY,
                    malformed("stripe-signature"),
                ),
                case(
                    "non-numeric t",
                    stripe_only(),
                    with(format!("t=yesterday,v1={STRIPE_SIG}")),
                    STRIPE_BODY,
                    malformed("stripe-signature"),
                ),
                case(
                    "fractional t",
                    stripe_only(),
                    with(format!("t={NOW}.0,v1={STRIPE_SIG}")),
                    STRIPE_BODY,
                    malformed("stripe-signature"),
                ),
                case(
                    "negative t",
                    stripe_only(),
                    with(format!("t=-1,v1={STRIPE_SIG}")),
                    STRIPE_BODY,
                    malformed("stripe-signature"),
                ),
                case(
                    "t with a plus sign",
                    stripe_only(),
                    with(format!("t=+{NOW},v1={STRIPE_SIG}")),
                    STRIPE_BODY,
                    malformed("stripe-signature"),
                ),
                case(
                    "t overflowing i64",
                    stripe_only(),
                    with(format!("t=9223372036854775808,v1={STRIPE_SIG}")),
                    STRIPE_BODY,
                    malformed("stripe-signature"),
                ),
                case(
                    "two t entries",
                    stripe_only(),
                    with(format!("t={NOW},t={NOW},v1={STRIPE_SIG}")),
                    STRIPE_BODY,
                    malformed("stripe-signature"),
                ),
                case(
                    "more than 16 entries",
                    stripe_only(),
                    with(format!("t={NOW}{sixteen_v1}")),
                    STRIPE_BODY,
                    malformed("stripe-signature"),
                ),
                case(
                    "only v0, even with the right value",
                    stripe_only(),
                    with(format!("t={NOW},v0={STRIPE_SIG}")),
                    STRIPE_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "empty v1",
                    stripe_only(),
                    with(format!("t={NOW},v1=")),
                    STRIPE_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "v1 truncated to 31 bytes",
                    stripe_only(),
                    stripe_header(&STRIPE_SIG[..62]),
                    STRIPE_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "v1 of odd length",
                    stripe_only(),
                    stripe_header(&STRIPE_SIG[..63]),
                    STRIPE_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "v1 too long",
                    stripe_only(),
                    stripe_header(&format!("{STRIPE_SIG}00")),
                    STRIPE_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "v1 not hex",
                    stripe_only(),
                    stripe_header(&"zz".repeat(32)),
                    STRIPE_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "no secret configured",
                    vec![],
                    stripe_header(STRIPE_SIG),
                    STRIPE_BODY,
                    Err(VerifyError::NoSecret),
                ),
                case(
                    "only an empty secret configured",
                    vec![raw("")],
                    stripe_header(STRIPE_SIG),
                    STRIPE_BODY,
                    Err(VerifyError::NoSecret),
                ),
                case(
                    "bad signature on a non-JSON body is 401, not 400",
                    stripe_only(),
                    stripe_header(STRIPE_SIG),
                    "not json",
                    Err(VerifyError::InvalidSignature),
                ),
            ],
            NOW,
        );
    }

    #[test]
    fn stripe_signed_body_without_json_id_is_a_bad_request() {
        let signed = |body: &[u8]| stripe_header(&stripe_sig(STRIPE_SECRET, NOW, body));
        run(
            &STRIPE,
            vec![
                case(
                    "invalid UTF-8 body (openssl signature)",
                    stripe_only(),
                    stripe_header(STRIPE_INVALID_UTF8_SIG),
                    STRIPE_INVALID_UTF8_BODY,
                    Err(VerifyError::InvalidJson),
                ),
                case(
                    "body is not JSON",
                    stripe_only(),
                    signed(b"id=evt_1"),
                    "id=evt_1",
                    Err(VerifyError::InvalidJson),
                ),
                case(
                    "no id",
                    stripe_only(),
                    signed(br#"{"type":"invoice.paid"}"#),
                    r#"{"type":"invoice.paid"}"#,
                    Err(VerifyError::MissingDeliveryId),
                ),
                case(
                    "empty id",
                    stripe_only(),
                    signed(br#"{"id":""}"#),
                    r#"{"id":""}"#,
                    Err(VerifyError::MissingDeliveryId),
                ),
                case(
                    "numeric id",
                    stripe_only(),
                    signed(br#"{"id":7}"#),
                    r#"{"id":7}"#,
                    Err(VerifyError::MissingDeliveryId),
                ),
                case(
                    "JSON array",
                    stripe_only(),
                    signed(b"[1]"),
                    "[1]",
                    Err(VerifyError::MissingDeliveryId),
                ),
            ],
            NOW,
        );
    }

    // ---------------------------------------------------------------------------------------
    // GitHub
    // ---------------------------------------------------------------------------------------

    // GitHub's worked example, "Validating webhook deliveries" (docs.github.com), section
    // "Testing the webhook payload validation".
    const GITHUB_DOC_SECRET: &str = "It's a Secret to Everybody";
    const GITHUB_DOC_BODY: &str = "Hello, World!";
    const GITHUB_DOC_SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    const GITHUB_OTHER_SECRET: &str = "rotated-github-secret";
    // Computed with `printf '%s' "$BODY" | openssl dgst -sha256 -hmac "It's a Secret to Everybody"`.
    const GITHUB_UTF8_BODY: &str = "Grüße, 世界!";
    const GITHUB_UTF8_SIGNATURE: &str =
        "sha256=12573b9b071cd2bf21bd6a47afa972728fa1eac6f30551b4ba37657e32eafd5d";
    const GITHUB_INVALID_UTF8_BODY: &[u8] = b"\xff\xfe\xfd";
    const GITHUB_INVALID_UTF8_SIGNATURE: &str =
        "sha256=3f3cfa248997f515818093671997dc0987ac197b05fa6770409118d95a80b5b4";
    const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

    /// The signature header plus the delivery and event headers GitHub always sends.
    fn github_headers(signature: impl AsRef<[u8]>) -> Vec<(&'static str, Vec<u8>)> {
        vec![
            h("X-Hub-Signature-256", signature),
            h("X-GitHub-Delivery", DELIVERY),
            h("X-GitHub-Event", "ping"),
        ]
    }

    fn github_doc_secret() -> Vec<Secret> {
        vec![raw(GITHUB_DOC_SECRET)]
    }

    #[test]
    fn github_accepts_documented_example_and_genuine_signatures() {
        let ping = ok(DELIVERY, IdOrigin::Header, Some("ping"));
        let other_sig = format!(
            "sha256={}",
            hex::encode(hmac(
                GITHUB_OTHER_SECRET.as_bytes(),
                &[GITHUB_DOC_BODY.as_bytes()]
            ))
        );
        let names_lower = vec![
            h("x-hub-signature-256", GITHUB_DOC_SIGNATURE),
            h("x-github-delivery", DELIVERY),
            h("x-github-event", "ping"),
        ];
        let names_upper = vec![
            h("X-HUB-SIGNATURE-256", GITHUB_DOC_SIGNATURE),
            h("X-GITHUB-DELIVERY", DELIVERY),
            h("X-GITHUB-EVENT", "ping"),
        ];
        run(
            &Scheme::Github,
            vec![
                case(
                    "GitHub's documented example",
                    github_doc_secret(),
                    github_headers(GITHUB_DOC_SIGNATURE),
                    GITHUB_DOC_BODY,
                    ping.clone(),
                ),
                case(
                    "header names in lower case",
                    github_doc_secret(),
                    names_lower,
                    GITHUB_DOC_BODY,
                    ping.clone(),
                ),
                case(
                    "header names in upper case",
                    github_doc_secret(),
                    names_upper,
                    GITHUB_DOC_BODY,
                    ping.clone(),
                ),
                case(
                    "documented secret second in a rotated pair",
                    vec![raw(GITHUB_OTHER_SECRET), raw(GITHUB_DOC_SECRET)],
                    github_headers(GITHUB_DOC_SIGNATURE),
                    GITHUB_DOC_BODY,
                    ping.clone(),
                ),
                case(
                    "other secret of a rotated pair",
                    vec![raw(GITHUB_DOC_SECRET), raw(GITHUB_OTHER_SECRET)],
                    github_headers(&other_sig),
                    GITHUB_DOC_BODY,
                    ping.clone(),
                ),
                case(
                    "upper-case hex digits",
                    github_doc_secret(),
                    github_headers(format!(
                        "sha256={}",
                        GITHUB_DOC_SIGNATURE["sha256=".len()..].to_uppercase()
                    )),
                    GITHUB_DOC_BODY,
                    ping.clone(),
                ),
                case(
                    "UTF-8 body",
                    github_doc_secret(),
                    github_headers(GITHUB_UTF8_SIGNATURE),
                    GITHUB_UTF8_BODY,
                    ping.clone(),
                ),
                case(
                    "invalid UTF-8 body",
                    github_doc_secret(),
                    github_headers(GITHUB_INVALID_UTF8_SIGNATURE),
                    GITHUB_INVALID_UTF8_BODY,
                    ping.clone(),
                ),
                case(
                    "no event header",
                    github_doc_secret(),
                    vec![
                        h("X-Hub-Signature-256", GITHUB_DOC_SIGNATURE),
                        h("X-GitHub-Delivery", DELIVERY),
                    ],
                    GITHUB_DOC_BODY,
                    ok(DELIVERY, IdOrigin::Header, None),
                ),
            ],
            NOW,
        );
    }

    #[test]
    fn github_rejects_unauthentic_requests() {
        let hex = &GITHUB_DOC_SIGNATURE["sha256=".len()..];
        run(
            &Scheme::Github,
            vec![
                case(
                    "body tampered",
                    github_doc_secret(),
                    github_headers(GITHUB_DOC_SIGNATURE),
                    "Hello, World?",
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "wrong secret",
                    vec![raw(GITHUB_OTHER_SECRET)],
                    github_headers(GITHUB_DOC_SIGNATURE),
                    GITHUB_DOC_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "signature header missing",
                    github_doc_secret(),
                    vec![h("X-GitHub-Delivery", DELIVERY)],
                    GITHUB_DOC_BODY,
                    missing("x-hub-signature-256"),
                ),
                case(
                    "only the legacy SHA-1 header",
                    github_doc_secret(),
                    vec![
                        h("X-Hub-Signature", format!("sha1={}", "0".repeat(40))),
                        h("X-GitHub-Delivery", DELIVERY),
                    ],
                    GITHUB_DOC_BODY,
                    missing("x-hub-signature-256"),
                ),
                case(
                    "empty hex after sha256=",
                    github_doc_secret(),
                    github_headers("sha256="),
                    GITHUB_DOC_BODY,
                    malformed("x-hub-signature-256"),
                ),
                case(
                    "hex without the sha256= prefix",
                    github_doc_secret(),
                    github_headers(hex),
                    GITHUB_DOC_BODY,
                    malformed("x-hub-signature-256"),
                ),
                case(
                    "sha1= prefix",
                    github_doc_secret(),
                    github_headers(format!("sha1={hex}")),
                    GITHUB_DOC_BODY,
                    malformed("x-hub-signature-256"),
                ),
                case(
                    "hex truncated to 31 bytes",
                    github_doc_secret(),
                    github_headers(&GITHUB_DOC_SIGNATURE[..GITHUB_DOC_SIGNATURE.len() - 2]),
                    GITHUB_DOC_BODY,
                    malformed("x-hub-signature-256"),
                ),
                case(
                    "hex of odd length",
                    github_doc_secret(),
                    github_headers(&GITHUB_DOC_SIGNATURE[..GITHUB_DOC_SIGNATURE.len() - 1]),
                    GITHUB_DOC_BODY,
                    malformed("x-hub-signature-256"),
                ),
                case(
                    "hex too long",
                    github_doc_secret(),
                    github_headers(format!("{GITHUB_DOC_SIGNATURE}00")),
                    GITHUB_DOC_BODY,
                    malformed("x-hub-signature-256"),
                ),
                case(
                    "not hex",
                    github_doc_secret(),
                    github_headers(format!("sha256={}", "zz".repeat(32))),
                    GITHUB_DOC_BODY,
                    malformed("x-hub-signature-256"),
                ),
                case(
                    "two signatures: GitHub sends exactly one",
                    github_doc_secret(),
                    github_headers(format!("sha256={},{GITHUB_DOC_SIGNATURE}", "0".repeat(64))),
                    GITHUB_DOC_BODY,
                    malformed("x-hub-signature-256"),
                ),
                case(
                    "header value with UTF-8",
                    github_doc_secret(),
                    github_headers(format!("{GITHUB_DOC_SIGNATURE}é")),
                    GITHUB_DOC_BODY,
                    missing("x-hub-signature-256"),
                ),
                case(
                    "header value with invalid UTF-8",
                    github_doc_secret(),
                    github_headers([GITHUB_DOC_SIGNATURE.as_bytes(), b"\xff"].concat()),
                    GITHUB_DOC_BODY,
                    missing("x-hub-signature-256"),
                ),
                case(
                    "no secret configured",
                    vec![],
                    github_headers(GITHUB_DOC_SIGNATURE),
                    GITHUB_DOC_BODY,
                    Err(VerifyError::NoSecret),
                ),
                case(
                    "bad signature and no delivery header is 401, not 400",
                    github_doc_secret(),
                    vec![h("X-Hub-Signature-256", GITHUB_DOC_SIGNATURE)],
                    "Hello, World?",
                    Err(VerifyError::InvalidSignature),
                ),
            ],
            NOW,
        );
    }

    #[test]
    fn github_signed_request_without_delivery_header_is_a_bad_request() {
        let signed_with = |delivery: &[u8]| {
            vec![
                h("X-Hub-Signature-256", GITHUB_DOC_SIGNATURE),
                h("X-GitHub-Delivery", delivery),
            ]
        };
        run(
            &Scheme::Github,
            vec![
                case(
                    "delivery header missing",
                    github_doc_secret(),
                    vec![h("X-Hub-Signature-256", GITHUB_DOC_SIGNATURE)],
                    GITHUB_DOC_BODY,
                    Err(VerifyError::MissingDeliveryId),
                ),
                case(
                    "delivery header empty",
                    github_doc_secret(),
                    signed_with(b""),
                    GITHUB_DOC_BODY,
                    Err(VerifyError::MissingDeliveryId),
                ),
                case(
                    "delivery header not visible ASCII",
                    github_doc_secret(),
                    signed_with("déjà".as_bytes()),
                    GITHUB_DOC_BODY,
                    Err(VerifyError::MissingDeliveryId),
                ),
            ],
            NOW,
        );
    }

    // ---------------------------------------------------------------------------------------
    // Standard Webhooks
    // ---------------------------------------------------------------------------------------

    const STANDARD: Scheme = Scheme::Standard {
        tolerance_secs: DEFAULT_TOLERANCE_SECS,
    };
    // The Standard Webhooks test vector, published in the reference libraries' tests
    // (standard-webhooks/standard-webhooks, libraries/php/tests/WebhookTest.php,
    // `testSignFunctionWorks`; the same values appear in Svix's libraries).
    const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SW_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const SW_TIMESTAMP: i64 = 1_614_265_330;
    const SW_BODY: &str = r#"{"test": 2432232314}"#;
    const SW_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    // Another published secret (from svix/svix-webhooks rust/src/webhooks.rs), used as the
    // second key of a rotation.
    const SW_OTHER_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    // Computed with openssl over "{SW_ID}.{SW_TIMESTAMP}.{body}", key = base64-decoded SW_SECRET
    // (`openssl dgst -sha256 -mac HMAC -macopt hexkey:… -binary | base64`).
    const SW_UTF8_BODY: &str = r#"{"type":"user.created","name":"Zoë 東京"}"#;
    const SW_UTF8_SIGNATURE: &str = "v1,MwqAOGMYckyd9Qt5eg86w69EY+0pN4u8efWvDJ8lRdk=";
    const SW_INVALID_UTF8_BODY: &[u8] = b"\xff\xfe\xfd";
    const SW_INVALID_UTF8_SIGNATURE: &str = "v1,lzb0htapYgTTpRUuEjKNzl6f8W/+EMiVtjqf9WKbKFQ=";
    // Polar-style raw secret (not `whsec_`): the key is the string's bytes. Signed with
    // `openssl dgst -sha256 -hmac polar_raw_secret -binary | base64` over the vector's content.
    const POLAR_RAW_SECRET: &str = "polar_raw_secret";
    const POLAR_SIGNATURE: &str = "v1,nAg6D34QL/tVyBs+Bh49D4RnAWSJyMoBp407UibT6+U=";

    fn sw_headers(
        id: impl AsRef<[u8]>,
        timestamp: impl AsRef<[u8]>,
        signature: impl AsRef<[u8]>,
    ) -> Vec<(&'static str, Vec<u8>)> {
        vec![
            h("webhook-id", id),
            h("webhook-timestamp", timestamp),
            h("webhook-signature", signature),
        ]
    }

    /// The vector's id and timestamp with the given signature header value.
    fn sw_signed(signature: impl AsRef<[u8]>) -> Vec<(&'static str, Vec<u8>)> {
        sw_headers(SW_ID, SW_TIMESTAMP.to_string(), signature)
    }

    fn sw_sig(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
        let key = standard_secret(secret);
        let tag = hmac(
            key.expose(),
            &[
                id.as_bytes(),
                b".",
                timestamp.to_string().as_bytes(),
                b".",
                body,
            ],
        );
        format!("v1,{}", base64(&tag))
    }

    fn sw_only() -> Vec<Secret> {
        vec![standard_secret(SW_SECRET)]
    }

    #[test]
    fn standard_accepts_published_vector_and_genuine_signatures() {
        let vector = ok(SW_ID, IdOrigin::Header, None);
        let other_sig = sw_sig(SW_OTHER_SECRET, SW_ID, SW_TIMESTAMP, SW_BODY.as_bytes());
        let at = |t: i64| {
            sw_headers(
                SW_ID,
                t.to_string(),
                sw_sig(SW_SECRET, SW_ID, t, SW_BODY.as_bytes()),
            )
        };
        let numeric_type = br#"{"type":5}"#;
        run(
            &STANDARD,
            vec![
                case(
                    "published test vector",
                    sw_only(),
                    sw_signed(SW_SIGNATURE),
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "header names in upper case",
                    sw_only(),
                    vec![
                        h("WEBHOOK-ID", SW_ID),
                        h("WEBHOOK-TIMESTAMP", SW_TIMESTAMP.to_string()),
                        h("WEBHOOK-SIGNATURE", SW_SIGNATURE),
                    ],
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "svix- header names (Clerk, Resend)",
                    sw_only(),
                    vec![
                        h("svix-id", SW_ID),
                        h("svix-timestamp", SW_TIMESTAMP.to_string()),
                        h("svix-signature", SW_SIGNATURE),
                    ],
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "vector secret second in a rotated pair",
                    vec![standard_secret(SW_OTHER_SECRET), standard_secret(SW_SECRET)],
                    sw_signed(SW_SIGNATURE),
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "other secret of a rotated pair",
                    vec![standard_secret(SW_SECRET), standard_secret(SW_OTHER_SECRET)],
                    sw_signed(&other_sig),
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "only the second signature matches",
                    sw_only(),
                    sw_signed(format!("{other_sig} {SW_SIGNATURE}")),
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "v1a and v2 entries are skipped",
                    sw_only(),
                    sw_signed(format!("v1a,{0} v2,{0} {SW_SIGNATURE}", &SW_SIGNATURE[3..])),
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "timestamp exactly at tolerance in the past",
                    sw_only(),
                    at(NOW - 300),
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "timestamp exactly at tolerance in the future",
                    sw_only(),
                    at(NOW + 300),
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "UTF-8 body with a type",
                    sw_only(),
                    sw_signed(SW_UTF8_SIGNATURE),
                    SW_UTF8_BODY,
                    ok(SW_ID, IdOrigin::Header, Some("user.created")),
                ),
                case(
                    "invalid UTF-8 body: not JSON, so no type",
                    sw_only(),
                    sw_signed(SW_INVALID_UTF8_SIGNATURE),
                    SW_INVALID_UTF8_BODY,
                    vector.clone(),
                ),
                case(
                    "raw (Polar) secret",
                    vec![standard_secret(POLAR_RAW_SECRET)],
                    sw_signed(POLAR_SIGNATURE),
                    SW_BODY,
                    vector.clone(),
                ),
                case(
                    "type that is not a string",
                    sw_only(),
                    sw_signed(sw_sig(SW_SECRET, SW_ID, SW_TIMESTAMP, numeric_type)),
                    numeric_type,
                    vector.clone(),
                ),
            ],
            NOW,
        );
    }

    /// Svix's own Rust library test vector (svix/svix-webhooks, rust/src/webhooks.rs,
    /// `test_sign`), checked at its own timestamp.
    #[test]
    fn standard_accepts_svix_library_vector_at_its_timestamp() {
        let headers = sw_headers(
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
            "1649367553",
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
        );
        let body = br#"{"email":"test@example.com","username":"test_user"}"#;
        let got = verify(
            &STANDARD,
            &[standard_secret(SW_OTHER_SECRET)],
            &header_map(&headers),
            body,
            1_649_367_553,
        );
        assert_eq!(
            got,
            ok("msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", IdOrigin::Header, None)
        );
    }

    #[test]
    fn standard_rejects_unauthentic_requests() {
        let b64 = &SW_SIGNATURE["v1,".len()..];
        let signed_at = |t: i64| {
            sw_headers(
                SW_ID,
                t.to_string(),
                sw_sig(SW_SECRET, SW_ID, t, SW_BODY.as_bytes()),
            )
        };
        let with_timestamp = |t: &str| sw_headers(SW_ID, t, SW_SIGNATURE);
        let seventeen = format!("{} {SW_SIGNATURE}", vec!["v1a,x"; 16].join(" "));
        run(
            &STANDARD,
            vec![
                case(
                    "body tampered",
                    sw_only(),
                    sw_signed(SW_SIGNATURE),
                    r#"{"test": 2432232315}"#,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "wrong secret",
                    vec![standard_secret(SW_OTHER_SECRET)],
                    sw_signed(SW_SIGNATURE),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "id changed after signing",
                    sw_only(),
                    sw_headers("msg_other", SW_TIMESTAMP.to_string(), SW_SIGNATURE),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "timestamp changed after signing",
                    sw_only(),
                    with_timestamp(&(NOW + 1).to_string()),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "timestamp one second past tolerance in the past",
                    sw_only(),
                    signed_at(NOW - 301),
                    SW_BODY,
                    Err(VerifyError::TimestampOutOfTolerance),
                ),
                case(
                    "timestamp one second past tolerance in the future",
                    sw_only(),
                    signed_at(NOW + 301),
                    SW_BODY,
                    Err(VerifyError::TimestampOutOfTolerance),
                ),
                case(
                    "timestamp past tolerance with a bad signature: signature is checked first",
                    sw_only(),
                    with_timestamp(&(NOW - 301).to_string()),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "signature header missing",
                    sw_only(),
                    vec![
                        h("webhook-id", SW_ID),
                        h("webhook-timestamp", SW_TIMESTAMP.to_string()),
                    ],
                    SW_BODY,
                    missing("webhook-signature"),
                ),
                case(
                    "id header missing",
                    sw_only(),
                    vec![
                        h("webhook-timestamp", SW_TIMESTAMP.to_string()),
                        h("webhook-signature", SW_SIGNATURE),
                    ],
                    SW_BODY,
                    missing("webhook-id"),
                ),
                case(
                    "timestamp header missing",
                    sw_only(),
                    vec![h("webhook-id", SW_ID), h("webhook-signature", SW_SIGNATURE)],
                    SW_BODY,
                    missing("webhook-timestamp"),
                ),
                case(
                    "spellings mixed: webhook-signature with svix-id",
                    sw_only(),
                    vec![
                        h("svix-id", SW_ID),
                        h("webhook-timestamp", SW_TIMESTAMP.to_string()),
                        h("webhook-signature", SW_SIGNATURE),
                    ],
                    SW_BODY,
                    missing("webhook-id"),
                ),
                case(
                    "empty v1,",
                    sw_only(),
                    sw_signed("v1,"),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "v1 truncated to 30 bytes",
                    sw_only(),
                    sw_signed(&SW_SIGNATURE[..SW_SIGNATURE.len() - 4]),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "v1 without base64 padding",
                    sw_only(),
                    sw_signed(SW_SIGNATURE.trim_end_matches('=')),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "v1 not base64",
                    sw_only(),
                    sw_signed("v1,***"),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "entry without a comma",
                    sw_only(),
                    sw_signed(format!("v1{b64}")),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "only v1a, even with the right value",
                    sw_only(),
                    sw_signed(format!("v1a,{b64}")),
                    SW_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "non-numeric timestamp",
                    sw_only(),
                    with_timestamp("now"),
                    SW_BODY,
                    malformed("webhook-timestamp"),
                ),
                case(
                    "fractional timestamp",
                    sw_only(),
                    with_timestamp("1614265330.0"),
                    SW_BODY,
                    malformed("webhook-timestamp"),
                ),
                case(
                    "negative timestamp",
                    sw_only(),
                    with_timestamp("-1614265330"),
                    SW_BODY,
                    malformed("webhook-timestamp"),
                ),
                case(
                    "timestamp overflowing i64",
                    sw_only(),
                    with_timestamp("99999999999999999999"),
                    SW_BODY,
                    malformed("webhook-timestamp"),
                ),
                case(
                    "more than 16 entries",
                    sw_only(),
                    sw_signed(seventeen),
                    SW_BODY,
                    malformed("webhook-signature"),
                ),
                case(
                    "signature header with UTF-8",
                    sw_only(),
                    sw_signed(format!("{SW_SIGNATURE} v1,é")),
                    SW_BODY,
                    missing("webhook-signature"),
                ),
                case(
                    "id header with invalid UTF-8",
                    sw_only(),
                    sw_headers(b"msg_\xff", SW_TIMESTAMP.to_string(), SW_SIGNATURE),
                    SW_BODY,
                    missing("webhook-id"),
                ),
                case(
                    "no secret configured",
                    vec![],
                    sw_signed(SW_SIGNATURE),
                    SW_BODY,
                    Err(VerifyError::NoSecret),
                ),
            ],
            NOW,
        );
    }

    #[test]
    fn standard_signed_request_with_empty_id_is_a_bad_request() {
        let signature = sw_sig(SW_SECRET, "", NOW, SW_BODY.as_bytes());
        run(
            &STANDARD,
            vec![case(
                "empty webhook-id",
                sw_only(),
                sw_headers("", NOW.to_string(), signature),
                SW_BODY,
                Err(VerifyError::MissingDeliveryId),
            )],
            NOW,
        );
    }

    // ---------------------------------------------------------------------------------------
    // Generic HMAC
    // ---------------------------------------------------------------------------------------

    const HMAC_SECRET: &str = "generic-secret";
    const HMAC_OTHER_SECRET: &str = "generic-secret-2";
    const HMAC_BODY: &str = r#"{"event":"order.created","delivery":"dlv_1"}"#;
    // Computed with `printf '%s' "$HMAC_BODY" | openssl dgst -sha256 -hmac generic-secret`
    // (hex; and `-binary | base64`), and `openssl dgst -sha256` for the body hash.
    const HMAC_HEX: &str = "663e11732f420e85c5025319ec05c057bc677a1cbd0ccd0555e12b02ea9db175";
    const HMAC_BASE64: &str = "Zj4Rcy9CDoXFAlMZ7AXAV7xnehy9DM0FVeErAuqdsXU=";
    const HMAC_BODY_SHA256: &str =
        "ed601c46f19be3403d314552967fb2a08692b702fd99329187fb8f35e75ba2e8";
    const HMAC_INVALID_UTF8_BODY: &[u8] = b"\xff\xfe\xfd";
    const HMAC_INVALID_UTF8_HEX: &str =
        "52e365da2d0859b813ba2d46c8fb5ddf550caf437c67ff9b77783f070449b653";
    const INVALID_UTF8_BODY_SHA256: &str =
        "8ca9f8c269c0a4b1d8bf0efc67d97df8ad5e0ea93630fd9099860d36c0fe75ea";

    fn generic(
        header: &str,
        prefix: &str,
        encoding: SignatureEncoding,
        id: IdLocation,
        event_type_pointer: Option<&str>,
    ) -> Scheme {
        Scheme::Hmac(HmacScheme {
            signature_header: header.to_owned(),
            prefix: prefix.to_owned(),
            encoding,
            id,
            event_type_pointer: event_type_pointer.map(str::to_owned),
        })
    }

    fn hmac_only() -> Vec<Secret> {
        vec![raw(HMAC_SECRET)]
    }

    fn generic_hex(secret: &str, body: &[u8]) -> String {
        hex::encode(hmac(secret.as_bytes(), &[body]))
    }

    #[test]
    fn generic_hmac_hex_with_prefix_reads_id_header() {
        let scheme = generic(
            "X-Signature",
            "sha256=",
            SignatureEncoding::Hex,
            IdLocation::Header("X-Delivery-Id".to_owned()),
            Some("/event"),
        );
        let signed = |sig: &str| vec![h("X-Signature", sig), h("X-Delivery-Id", "dlv_header")];
        let created = ok("dlv_header", IdOrigin::Header, Some("order.created"));
        let other = format!(
            "sha256={}",
            generic_hex(HMAC_OTHER_SECRET, HMAC_BODY.as_bytes())
        );
        let numeric_event = br#"{"event":5}"#;
        let rotated = || vec![raw(HMAC_SECRET), raw(HMAC_OTHER_SECRET)];
        run(
            &scheme,
            vec![
                case(
                    "hex computed with openssl",
                    hmac_only(),
                    signed(&format!("sha256={HMAC_HEX}")),
                    HMAC_BODY,
                    created.clone(),
                ),
                case(
                    "header names in any case",
                    hmac_only(),
                    vec![
                        h("x-signature", format!("sha256={HMAC_HEX}")),
                        h("X-DELIVERY-ID", "dlv_header"),
                    ],
                    HMAC_BODY,
                    created.clone(),
                ),
                case(
                    "upper-case hex digits",
                    hmac_only(),
                    signed(&format!("sha256={}", HMAC_HEX.to_uppercase())),
                    HMAC_BODY,
                    created.clone(),
                ),
                case(
                    "first secret of a rotated pair",
                    rotated(),
                    signed(&format!("sha256={HMAC_HEX}")),
                    HMAC_BODY,
                    created.clone(),
                ),
                case(
                    "second secret of a rotated pair",
                    rotated(),
                    signed(&other),
                    HMAC_BODY,
                    created.clone(),
                ),
                case(
                    "event type that is not a string",
                    hmac_only(),
                    signed(&format!(
                        "sha256={}",
                        generic_hex(HMAC_SECRET, numeric_event)
                    )),
                    numeric_event,
                    ok("dlv_header", IdOrigin::Header, None),
                ),
                case(
                    "body tampered",
                    hmac_only(),
                    signed(&format!("sha256={HMAC_HEX}")),
                    HMAC_BODY.replace("created", "deleted"),
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "wrong secret",
                    vec![raw(HMAC_OTHER_SECRET)],
                    signed(&format!("sha256={HMAC_HEX}")),
                    HMAC_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "signature header missing",
                    hmac_only(),
                    vec![h("X-Delivery-Id", "dlv_header")],
                    HMAC_BODY,
                    missing("X-Signature"),
                ),
                case(
                    "prefix missing",
                    hmac_only(),
                    signed(HMAC_HEX),
                    HMAC_BODY,
                    malformed("X-Signature"),
                ),
                case(
                    "empty after the prefix",
                    hmac_only(),
                    signed("sha256="),
                    HMAC_BODY,
                    malformed("X-Signature"),
                ),
                case(
                    "hex truncated to 31 bytes",
                    hmac_only(),
                    signed(&format!("sha256={}", &HMAC_HEX[..62])),
                    HMAC_BODY,
                    malformed("X-Signature"),
                ),
                case(
                    "hex of odd length",
                    hmac_only(),
                    signed(&format!("sha256={}", &HMAC_HEX[..63])),
                    HMAC_BODY,
                    malformed("X-Signature"),
                ),
                case(
                    "two signatures: the scheme carries one",
                    hmac_only(),
                    signed(&format!("sha256={},{HMAC_HEX}", "0".repeat(64))),
                    HMAC_BODY,
                    malformed("X-Signature"),
                ),
                case(
                    "header value with UTF-8",
                    hmac_only(),
                    signed(&format!("sha256={HMAC_HEX}é")),
                    HMAC_BODY,
                    missing("X-Signature"),
                ),
                case(
                    "no secret configured",
                    vec![],
                    signed(&format!("sha256={HMAC_HEX}")),
                    HMAC_BODY,
                    Err(VerifyError::NoSecret),
                ),
                case(
                    "signed, id header missing",
                    hmac_only(),
                    vec![h("X-Signature", format!("sha256={HMAC_HEX}"))],
                    HMAC_BODY,
                    Err(VerifyError::MissingDeliveryId),
                ),
                case(
                    "signed, id header empty",
                    hmac_only(),
                    vec![
                        h("X-Signature", format!("sha256={HMAC_HEX}")),
                        h("X-Delivery-Id", ""),
                    ],
                    HMAC_BODY,
                    Err(VerifyError::MissingDeliveryId),
                ),
            ],
            NOW,
        );
    }

    #[test]
    fn generic_hmac_base64_reads_id_from_json_pointer() {
        let scheme = generic(
            "x-signature",
            "",
            SignatureEncoding::Base64,
            IdLocation::JsonPointer("/delivery".to_owned()),
            None,
        );
        let signed = |sig: &str| vec![h("x-signature", sig)];
        let sign = |body: &[u8]| {
            vec![h(
                "x-signature",
                base64(&hmac(HMAC_SECRET.as_bytes(), &[body])),
            )]
        };
        run(
            &scheme,
            vec![
                case(
                    "base64 computed with openssl",
                    hmac_only(),
                    signed(HMAC_BASE64),
                    HMAC_BODY,
                    ok("dlv_1", IdOrigin::Body, None),
                ),
                case(
                    "integer id is written in decimal",
                    hmac_only(),
                    sign(br#"{"delivery":42}"#),
                    r#"{"delivery":42}"#,
                    ok("42", IdOrigin::Body, None),
                ),
                case(
                    "body tampered",
                    hmac_only(),
                    signed(HMAC_BASE64),
                    HMAC_BODY.replace("dlv_1", "dlv_2"),
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "wrong secret",
                    vec![raw(HMAC_OTHER_SECRET)],
                    signed(HMAC_BASE64),
                    HMAC_BODY,
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "empty signature",
                    hmac_only(),
                    signed(""),
                    HMAC_BODY,
                    malformed("x-signature"),
                ),
                case(
                    "base64 truncated",
                    hmac_only(),
                    signed(&HMAC_BASE64[..40]),
                    HMAC_BODY,
                    malformed("x-signature"),
                ),
                case(
                    "base64 without padding",
                    hmac_only(),
                    signed(HMAC_BASE64.trim_end_matches('=')),
                    HMAC_BODY,
                    malformed("x-signature"),
                ),
                case(
                    "not base64",
                    hmac_only(),
                    signed("***"),
                    HMAC_BODY,
                    malformed("x-signature"),
                ),
                case(
                    "hex where base64 is configured",
                    hmac_only(),
                    signed(HMAC_HEX),
                    HMAC_BODY,
                    malformed("x-signature"),
                ),
                case(
                    "signed, body not JSON",
                    hmac_only(),
                    sign(b"delivery=dlv_1"),
                    "delivery=dlv_1",
                    Err(VerifyError::InvalidJson),
                ),
                case(
                    "signed, body invalid UTF-8",
                    hmac_only(),
                    sign(HMAC_INVALID_UTF8_BODY),
                    HMAC_INVALID_UTF8_BODY,
                    Err(VerifyError::InvalidJson),
                ),
                case(
                    "signed, id field missing",
                    hmac_only(),
                    sign(br#"{"event":"x"}"#),
                    r#"{"event":"x"}"#,
                    Err(VerifyError::MissingDeliveryId),
                ),
                case(
                    "signed, id empty",
                    hmac_only(),
                    sign(br#"{"delivery":""}"#),
                    r#"{"delivery":""}"#,
                    Err(VerifyError::MissingDeliveryId),
                ),
                case(
                    "signed, id a float",
                    hmac_only(),
                    sign(br#"{"delivery":4.2}"#),
                    r#"{"delivery":4.2}"#,
                    Err(VerifyError::MissingDeliveryId),
                ),
                case(
                    "signed, id a boolean",
                    hmac_only(),
                    sign(br#"{"delivery":true}"#),
                    r#"{"delivery":true}"#,
                    Err(VerifyError::MissingDeliveryId),
                ),
            ],
            NOW,
        );
    }

    #[test]
    fn generic_hmac_without_sender_id_uses_body_sha256() {
        let scheme = generic(
            "x-signature",
            "",
            SignatureEncoding::Hex,
            IdLocation::BodySha256,
            Some("/event"),
        );
        let signed = |sig: &str| vec![h("x-signature", sig)];
        run(
            &scheme,
            vec![
                case(
                    "JSON body",
                    hmac_only(),
                    signed(HMAC_HEX),
                    HMAC_BODY,
                    ok(
                        HMAC_BODY_SHA256,
                        IdOrigin::BodySha256,
                        Some("order.created"),
                    ),
                ),
                case(
                    "invalid UTF-8 body: no JSON, no type, still an id",
                    hmac_only(),
                    signed(HMAC_INVALID_UTF8_HEX),
                    HMAC_INVALID_UTF8_BODY,
                    ok(INVALID_UTF8_BODY_SHA256, IdOrigin::BodySha256, None),
                ),
                case(
                    "body tampered",
                    hmac_only(),
                    signed(HMAC_HEX),
                    format!("{HMAC_BODY} "),
                    Err(VerifyError::InvalidSignature),
                ),
                case(
                    "signature header missing",
                    hmac_only(),
                    vec![],
                    HMAC_BODY,
                    missing("x-signature"),
                ),
            ],
            NOW,
        );
    }

    #[test]
    fn generic_hmac_invalid_configured_header_name_is_missing_not_a_panic() {
        let scheme = generic(
            "not a header name",
            "",
            SignatureEncoding::Hex,
            IdLocation::BodySha256,
            None,
        );
        let got = verify(
            &scheme,
            &hmac_only(),
            &header_map(&[h("x-signature", HMAC_HEX)]),
            HMAC_BODY.as_bytes(),
            NOW,
        );
        assert_eq!(got, missing("not a header name"));
    }

    // ---------------------------------------------------------------------------------------
    // Cross-cutting
    // ---------------------------------------------------------------------------------------

    /// The test-only signer agrees with every published or independently computed vector, so
    /// rows it signs are as trustworthy as the literal ones.
    #[test]
    fn test_signer_reproduces_published_vectors() {
        let github = format!(
            "sha256={}",
            hex::encode(hmac(
                GITHUB_DOC_SECRET.as_bytes(),
                &[GITHUB_DOC_BODY.as_bytes()]
            ))
        );
        assert_eq!(github, GITHUB_DOC_SIGNATURE);
        assert_eq!(
            sw_sig(SW_SECRET, SW_ID, SW_TIMESTAMP, SW_BODY.as_bytes()),
            SW_SIGNATURE
        );
        assert_eq!(
            stripe_sig(STRIPE_SECRET, NOW, STRIPE_BODY.as_bytes()),
            STRIPE_SIG
        );
    }

    #[test]
    fn errors_never_contain_secrets_or_signatures() {
        let secrets = [raw("super-secret-value")];
        let failures = [
            verify(
                &STRIPE,
                &secrets,
                &header_map(&stripe_header(STRIPE_SIG)),
                STRIPE_BODY.as_bytes(),
                NOW,
            ),
            verify(
                &Scheme::Github,
                &secrets,
                &header_map(&github_headers("sha256=zz")),
                b"",
                NOW,
            ),
            verify(
                &STANDARD,
                &secrets,
                &header_map(&sw_signed(SW_SIGNATURE)),
                SW_BODY.as_bytes(),
                NOW,
            ),
        ];
        for failure in failures {
            let error = failure.unwrap_err();
            for text in [error.to_string(), format!("{error:?}")] {
                assert!(!text.contains("super-secret-value"), "{text}");
                assert!(!text.contains(STRIPE_SIG), "{text}");
                assert!(!text.contains(&SW_SIGNATURE[3..]), "{text}");
            }
        }
    }

    #[test]
    fn only_id_and_json_errors_are_bad_requests() {
        assert!(!VerifyError::MissingDeliveryId.is_unauthorized());
        assert!(!VerifyError::InvalidJson.is_unauthorized());
        for unauthorized in [
            VerifyError::MissingHeader("x".to_owned()),
            VerifyError::MalformedHeader("x".to_owned()),
            VerifyError::InvalidSignature,
            VerifyError::TimestampOutOfTolerance,
            VerifyError::NoSecret,
        ] {
            assert!(unauthorized.is_unauthorized(), "{unauthorized:?}");
        }
    }

    #[test]
    fn signed_ids_that_cannot_be_stored_are_refused_and_bad_event_types_dropped() {
        let ok = |id: &str, t: Option<&str>| Verified {
            delivery_id: id.into(),
            id_origin: IdOrigin::Header,
            event_type: t.map(String::from),
        };
        assert!(storable(ok("evt_'\"quoted", Some("push"))).is_ok());
        assert_eq!(
            storable(ok("a\0b", None)),
            Err(VerifyError::InvalidDeliveryId)
        );
        assert_eq!(
            storable(ok(&"x".repeat(MAX_ID_LEN + 1), None)),
            Err(VerifyError::InvalidDeliveryId)
        );
        assert!(storable(ok(&"x".repeat(MAX_ID_LEN), None)).is_ok());
        let dropped = storable(ok("id", Some("bad\0type"))).unwrap();
        assert_eq!(dropped.event_type, None);
        assert!(!VerifyError::InvalidDeliveryId.is_unauthorized());
    }
}
