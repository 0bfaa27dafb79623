//! Webhook signature verification as a pure function of (scheme, secrets, request, now), for
//! Stripe, GitHub, Standard Webhooks (Svix, Polar, Clerk, Resend…), generic HMAC senders, a
//! configurable signed message, Ed25519, static tokens, Twilio, and named presets for each
//! provider; and the providers' handshakes (Slack, Zoom, Twitch, Meta, Discord).
//!
//! Nothing here logs, reads the clock, or does I/O: the caller passes the raw body, the headers
//! and the current unix time, so every rule can be tested with a fixed clock. Signatures are
//! computed over the exact bytes received and compared in constant time; a [`Secret`] never
//! prints its bytes.
//!
//! ```
//! use hookclaim_verify::{verify, Scheme, Secret};
//! use http::HeaderMap;
//!
//! let body = br#"{"zen":"Keep it logically awesome."}"#;
//! let mut headers = HeaderMap::new();
//! headers.insert(
//!     "x-hub-signature-256",
//!     "sha256=0000000000000000000000000000000000000000000000000000000000000000".parse().unwrap(),
//! );
//! headers.insert("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958".parse().unwrap());
//! let secrets = [Secret::from_bytes("It's a Secret to Everybody")];
//! let result = verify(&Scheme::Github, &secrets, &headers, body, 1_767_225_600);
//! assert!(result.unwrap_err().is_unauthorized());
//! ```
//!
//! The crate's README and `examples/verify_requests.rs` show a Stripe, a GitHub and a Slack
//! request verified and a Slack handshake answered, with plain `http` types.
//!
//! With the `sign` feature (for tests; off by default), the crate also signs: `sign` gives
//! the headers a sender of any scheme sends with an `Outgoing` request, under `SigningKey`s,
//! and `sign_as` signs as a named provider with its default settings (documented with the
//! feature on: `cargo doc --features sign`, as docs.rs builds it).
//!
//! One file per kind: `stripe`, `github`, `standard` (Standard Webhooks, `v1` and `v1a`),
//! `hmac` (generic HMAC of the body), `signed` (a configurable signed message), `ed25519`
//! (Discord), `token` (a static token), `twilio`. [`presets`] names the providers' settings;
//! `mac`, `timestamp` and `locate` are shared by the kinds; [`handshake`] recognises and
//! answers the providers' handshakes; `secret` holds the secret type and the secrets document;
//! `sign` holds the signing types (each kind signs in its own file).

#![warn(missing_docs)]

use http::HeaderMap;

mod ed25519;
mod github;
mod hmac;
mod locate;
mod mac;
pub mod presets;
mod signed;
mod standard;
mod stripe;
mod timestamp;
mod token;
mod twilio;

pub mod handshake;
pub mod secret;
#[cfg(feature = "sign")]
mod sign;

pub use ed25519::Ed25519Scheme;
pub use hmac::HmacScheme;
pub use locate::{Field, IdLocation};
pub use mac::{Algorithm, SignatureEncoding};
pub use signed::{
    MessagePart, SchemeError, SignatureFormat, SignedParts, SignedScheme, TimestampFrom,
    TimestampRule,
};
pub use timestamp::{TimestampUnit, Tolerance};
pub use token::TokenScheme;
pub use twilio::TwilioScheme;

pub use secret::{Secret, SecretError, SecretFormat, SecretsDocument};
#[cfg(feature = "sign")]
pub use sign::{sign, sign_as, Outgoing, SignError, Signed, SigningKey};

/// The tolerance the providers' own libraries use for signed timestamps: five minutes.
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;

/// How a source signs its deliveries and where its delivery id and event type live.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scheme {
    /// `Stripe-Signature: t=…,v1=…`; id and type in the JSON body.
    Stripe {
        /// Oldest accepted `t`, in seconds before now.
        tolerance_secs: u64,
    },
    /// `X-Hub-Signature-256: sha256=<hex>`; id and type in headers.
    Github,
    /// Standard Webhooks (Svix, Polar, Clerk, Resend…): `webhook-id`, `webhook-timestamp`,
    /// `webhook-signature` with `v1` (HMAC-SHA256) and `v1a` (Ed25519) entries.
    Standard {
        /// Largest accepted distance between `webhook-timestamp` and now, either direction.
        tolerance_secs: u64,
        /// Secrets are used as their raw bytes (Polar) instead of base64 as the specification
        /// says.
        raw_secrets: bool,
    },
    /// A generic HMAC-SHA256 of the body.
    Hmac(HmacScheme),
    /// An HMAC over a message built from parts of the request (Slack, Paddle, Zoom, HubSpot…).
    Signed(SignedScheme),
    /// Ed25519 over the timestamp and the body (Discord interactions).
    Ed25519(Ed25519Scheme),
    /// A static token in a header (GitLab).
    Token(TokenScheme),
    /// Twilio's HMAC over the public URL and the sorted form parameters.
    Twilio(TwilioScheme),
}

impl Scheme {
    /// Whether a request signed long ago is refused: the signature covers a timestamp that is
    /// checked against a tolerance. Without that, a captured request stays valid for as long as
    /// the secret does, and only its remembered key makes a replay a duplicate.
    pub fn refuses_old_requests(&self) -> bool {
        match self {
            Scheme::Stripe { .. } | Scheme::Standard { .. } | Scheme::Ed25519(_) => true,
            Scheme::Signed(s) => s.signs_timestamp() == Some(true),
            Scheme::Github | Scheme::Hmac(_) | Scheme::Token(_) | Scheme::Twilio(_) => false,
        }
    }

    /// Whether the signature covers the delivery id, so that a replayed request carries the id
    /// it was signed with. Where it does not (GitHub's `X-GitHub-Delivery`, a token, Twilio's
    /// idempotency header), a signed body can be sent again under any id and still verify.
    pub fn signs_delivery_id(&self) -> bool {
        match self {
            // Stripe's id is in the signed body; Standard Webhooks signs `webhook-id`.
            Scheme::Stripe { .. } | Scheme::Standard { .. } => true,
            Scheme::Github | Scheme::Token(_) => false,
            Scheme::Hmac(h) => h.id.is_in_body(),
            Scheme::Signed(s) => s.signs_delivery_id(),
            // Ed25519 here signs the timestamp and the body.
            Scheme::Ed25519(e) => e.id.is_in_body(),
            // Twilio signs the form's parameters sorted, not the raw body, so even an id taken
            // from the body could differ between two requests with one signature.
            Scheme::Twilio(_) => false,
        }
    }

    /// Whether a receiver should remember the signed body as well as the delivery id: the
    /// signature covers neither the id nor a checked timestamp, so nothing else stops a signed
    /// body from being replayed under a new id.
    pub fn needs_replay_guard(&self) -> bool {
        !self.signs_delivery_id() && !self.refuses_old_requests()
    }

    /// How this scheme's configured secrets are read.
    pub fn secret_format(&self) -> SecretFormat {
        match self {
            Scheme::Standard {
                raw_secrets: false, ..
            } => SecretFormat::StandardWebhooks,
            Scheme::Ed25519(_) => SecretFormat::Ed25519Hex,
            _ => SecretFormat::Raw,
        }
    }
}

/// The headers a scheme reads, lower-case: stored with each delivery so it can be re-verified
/// or replayed later.
pub fn scheme_headers(scheme: &Scheme) -> Vec<String> {
    let names: Vec<String> = match scheme {
        Scheme::Stripe { .. } => vec![stripe::SIGNATURE.into()],
        Scheme::Github => github::HEADERS.iter().map(|h| h.to_string()).collect(),
        Scheme::Standard { .. } => standard::header_names(),
        Scheme::Hmac(h) => {
            let mut names = vec![h.signature_header.clone()];
            names.extend(h.id.header_names());
            names
        }
        Scheme::Signed(s) => s.header_names(),
        Scheme::Ed25519(e) => e.header_names(),
        Scheme::Token(t) => t.header_names(),
        Scheme::Twilio(t) => t.header_names(),
    };
    names.into_iter().map(|n| n.to_ascii_lowercase()).collect()
}

/// Most entries parsed from one signature header. A sender puts one signature per active secret
/// (two during a rotation), so 16 is generous; the cap bounds the work one request can cause.
pub(crate) const MAX_SIGNATURE_ENTRIES: usize = 16;

/// What verification sees of a request besides its headers and body.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    /// The HTTP method, e.g. `POST` (signed by HubSpot v3, or a `method` message part).
    pub method: &'a str,
    /// The raw query string without `?`, empty when there is none (part of the URL that Twilio,
    /// Square and HubSpot sign).
    pub query: &'a str,
    /// The request headers.
    pub headers: &'a HeaderMap,
    /// The raw body, exactly as received.
    pub body: &'a [u8],
}

impl<'a> Incoming<'a> {
    /// A POST without a query string: what webhooks almost always are.
    pub fn post(headers: &'a HeaderMap, body: &'a [u8]) -> Self {
        Incoming {
            method: "POST",
            query: "",
            headers,
            body,
        }
    }

    /// The URL the sender signed: the configured public URL, and the query string received.
    pub(crate) fn url(&self, public_url: &str) -> String {
        if self.query.is_empty() {
            public_url.to_owned()
        } else {
            format!("{public_url}?{}", self.query)
        }
    }
}

/// Where a verified delivery's id came from; stored with the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdOrigin {
    /// A header the sender set.
    Header,
    /// A field of the JSON body (or several, joined).
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
    /// The sender's delivery id (or the body hash for id-less senders).
    pub delivery_id: String,
    /// Where `delivery_id` came from.
    pub id_origin: IdOrigin,
    /// The event type, where the scheme has one.
    pub event_type: Option<String>,
}

/// Why a request was refused. Never carries a secret, a signature or the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A header the scheme requires is absent (or not visible ASCII).
    #[error("missing header {0}")]
    MissingHeader(String),
    /// A signature or timestamp header is present but cannot be parsed.
    #[error("malformed header {0}")]
    MalformedHeader(String),
    /// A signed timestamp that lives in the body is missing or not written as configured.
    #[error("missing or malformed timestamp at {0}")]
    MalformedTimestamp(String),
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
    /// Signed, but the header holding the delivery id is not visible ASCII (HTTP header values
    /// are ASCII; a key must be exact).
    #[error("delivery id header {0} is not visible ASCII")]
    NonAsciiDeliveryId(String),
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
                | VerifyError::NonAsciiDeliveryId(_)
                | VerifyError::InvalidJson
                | VerifyError::InvalidDeliveryId
        )
    }
}

/// The configured secrets split by use: HMAC keys and Ed25519 public keys (a handshake's verify
/// token is neither, and never verifies a signature). Empty secrets are dropped: an empty key
/// would let anyone compute a valid MAC.
pub(crate) struct Keys<'s> {
    pub(crate) hmac: Vec<&'s [u8]>,
    pub(crate) public: Vec<&'s [u8]>,
}

impl<'s> Keys<'s> {
    fn from(secrets: &'s [Secret]) -> Option<Self> {
        let usable = || secrets.iter().filter(|s| !s.expose().is_empty());
        let keys = Keys {
            hmac: usable()
                .filter(|s| s.is_key())
                .map(Secret::expose)
                .collect(),
            public: usable()
                .filter(|s| s.is_public_key())
                .map(Secret::expose)
                .collect(),
        };
        (!keys.hmac.is_empty() || !keys.public.is_empty()).then_some(keys)
    }
}

/// Verifies a POST's `body` against `headers`: [`verify_request`] without a method or query
/// string to sign.
pub fn verify(
    scheme: &Scheme,
    secrets: &[Secret],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    verify_request(scheme, secrets, &Incoming::post(headers, body), now)
}

/// Verifies a request with any of `secrets`, at unix time `now`, and extracts the delivery id
/// and event type.
///
/// The MAC is always computed over the exact bytes received, and compared in constant time.
/// Authenticity is settled first (`MissingHeader`, `MalformedHeader`, `MalformedTimestamp`,
/// `InvalidSignature`, `TimestampOutOfTolerance`: 401); only a signed request is then read for
/// its id and type (`MissingDeliveryId`, `NonAsciiDeliveryId`, `InvalidJson`,
/// `InvalidDeliveryId`: 400).
///
/// Rules shared by all kinds:
/// - Several secrets mean a rotation: any one of them verifies. Empty secrets are ignored, and
///   with no non-empty secret the answer is `NoSecret`.
/// - A signature or timestamp header that is not visible ASCII counts as absent
///   (`MissingHeader`). A delivery id header that is present but not visible ASCII is
///   `NonAsciiDeliveryId` (where the id is signed, its raw bytes are what is signed).
/// - A signature counts only if it decodes to exactly the MAC's length: empty, truncated,
///   odd-length or over-long values never match.
/// - Timestamps in seconds or milliseconds are plain decimal digits; a sign, a fraction or a
///   value beyond `i64` is malformed. RFC 3339 timestamps are strict.
/// - The signature is checked before the timestamp, so `TimestampOutOfTolerance` always means
///   "genuinely signed, but too old (or too far ahead)".
/// - An empty delivery id is a missing one. An empty event type is `None`.
/// - Signature headers with more than 16 entries are `MalformedHeader`, to bound the work.
///
/// Per kind: see each kind's type ([`HmacScheme`], [`SignedScheme`], [`Ed25519Scheme`],
/// [`TokenScheme`], [`TwilioScheme`]) and, for the fixed kinds:
/// - `Stripe`: `Stripe-Signature` holds `t=` and one or more `v1=` (hex); `v0` and any other
///   entry is ignored, as Stripe's libraries do, and a header with no usable `v1` is
///   `InvalidSignature`. A `t` more than `tolerance_secs` in the past is rejected; a `t` in the
///   future is accepted, as Stripe's libraries only check age. The body must be JSON with a
///   string `id` (the delivery id); `type` is the event type if it is a string.
/// - `Github`: `X-Hub-Signature-256` holds exactly one `sha256=<hex>`; anything else in it is
///   `MalformedHeader`. The delivery id is `X-GitHub-Delivery` and the event type
///   `X-GitHub-Event` (optional).
/// - `Standard`: `webhook-id`, `webhook-timestamp` and `webhook-signature`; when
///   `webhook-signature` is absent, the `svix-` spellings of all three are used instead. The
///   signature header is a space-separated list of `<version>,<base64>`: `v1` entries are
///   HMAC-SHA256 under the secrets, `v1a` entries Ed25519 under `whpk_` public keys; other
///   versions are skipped. The timestamp must be within `tolerance_secs` of now in either
///   direction. The delivery id is `webhook-id`; the event type is the body's string `type`
///   when the body is JSON (a non-JSON body is not an error here).
pub fn verify_request(
    scheme: &Scheme,
    secrets: &[Secret],
    req: &Incoming<'_>,
    now: i64,
) -> Result<Verified, VerifyError> {
    let keys = Keys::from(secrets).ok_or(VerifyError::NoSecret)?;
    let verified = match scheme {
        Scheme::Stripe { tolerance_secs } => stripe::verify(*tolerance_secs, &keys, req, now),
        Scheme::Github => github::verify(&keys, req),
        Scheme::Standard { tolerance_secs, .. } => {
            standard::verify(*tolerance_secs, &keys, req, now)
        }
        Scheme::Hmac(settings) => hmac::verify(settings, &keys, req),
        Scheme::Signed(settings) => settings.verify(&keys, req, now),
        Scheme::Ed25519(settings) => settings.verify(&keys, req, now),
        Scheme::Token(settings) => settings.verify(&keys, req),
        Scheme::Twilio(settings) => settings.verify(&keys, req),
    }?;
    storable(verified)
}

/// Settles only whether a request is authentic, for handshakes: a request that is genuinely
/// signed but carries no usable delivery id (a provider's challenge has none) is authentic.
pub fn authenticate(
    scheme: &Scheme,
    secrets: &[Secret],
    req: &Incoming<'_>,
    now: i64,
) -> Result<(), VerifyError> {
    match verify_request(scheme, secrets, req, now) {
        Err(e) if e.is_unauthorized() => Err(e),
        _ => Ok(()),
    }
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

/// The header's value, or `MissingHeader` when it is absent or not visible ASCII.
pub(crate) fn required_header<'a>(
    headers: &'a HeaderMap,
    name: &str,
) -> Result<&'a str, VerifyError> {
    // `get` with a name that is not a valid header name finds nothing; it does not panic.
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .ok_or_else(|| VerifyError::MissingHeader(name.to_owned()))
}

/// Splits a signature header into its entries, or `None` when it has more than
/// `MAX_SIGNATURE_ENTRIES`.
pub(crate) fn bounded_entries(value: &str, separator: char) -> Option<Vec<&str>> {
    let entries: Vec<&str> = value
        .split(separator)
        .take(MAX_SIGNATURE_ENTRIES + 1)
        .collect();
    (entries.len() <= MAX_SIGNATURE_ENTRIES).then_some(entries)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod preset_tests;

#[cfg(all(test, feature = "sign"))]
mod sign_tests;

/// The README's code blocks, compiled as doctests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
