//! Signing, for tests (the `sign` feature): the headers a sender sends with a request, for
//! every scheme this crate verifies, so that [`verify_request`](crate::verify_request) accepts
//! them. Each kind signs in its own file, beside its verification; this module holds the public
//! types and what the kinds share.

use std::fmt;

use base64::Engine as _;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::locate::{Field, IdLocation};
use crate::mac::{self, Algorithm};
use crate::secret::{Secret, SecretError, SecretFormat};
use crate::timestamp::{format_rfc3339, TimestampUnit};
use crate::{presets, Scheme, DEFAULT_TOLERANCE_SECS};

/// A key to sign with: an HMAC secret (or a static token), or an Ed25519 private key. Like a
/// [`Secret`], it prints `[redacted]`.
#[derive(Clone)]
pub struct SigningKey {
    pub(crate) inner: Key,
}

#[derive(Clone)]
pub(crate) enum Key {
    Hmac(Vec<u8>),
    Ed25519(ed25519_dalek::SigningKey),
}

impl SigningKey {
    /// An HMAC secret or static token: the exact bytes the verifying [`Secret`] holds.
    pub fn hmac(key: impl Into<Vec<u8>>) -> Self {
        SigningKey {
            inner: Key::Hmac(key.into()),
        }
    }

    /// An Ed25519 private key from its 32-byte seed (RFC 8032): Discord, and Standard Webhooks'
    /// `v1a`.
    pub fn ed25519(seed: [u8; 32]) -> Self {
        SigningKey {
            inner: Key::Ed25519(ed25519_dalek::SigningKey::from_bytes(&seed)),
        }
    }

    /// A key written as a scheme's secrets are configured ([`Scheme::secret_format`]), so a test
    /// signs with the text the receiver reads: `Raw` and `StandardWebhooks` as
    /// [`Secret::parse`] reads them (a `whpk_` public key cannot sign); `Ed25519Hex`, whose
    /// configured secret is the public key, takes the private key's seed in hex instead.
    pub fn parse(text: &str, format: SecretFormat) -> Result<Self, SignError> {
        if format == SecretFormat::Ed25519Hex {
            let seed = hex::decode(text)
                .ok()
                .and_then(|s| <[u8; 32]>::try_from(s).ok())
                .ok_or(SignError::InvalidPrivateKey)?;
            return Ok(SigningKey::ed25519(seed));
        }
        let secret = Secret::parse(text, format)?;
        if !secret.is_key() {
            return Err(SignError::PublicKey);
        }
        Ok(SigningKey::hmac(secret.expose()))
    }

    /// The [`Secret`] a receiver verifies this key's signatures with: the same HMAC secret, or
    /// the Ed25519 public key.
    pub fn verifying_secret(&self) -> Secret {
        match &self.inner {
            Key::Hmac(bytes) => Secret::from_bytes(bytes.clone()),
            Key::Ed25519(key) => Secret::ed25519_public_key(key.verifying_key().to_bytes()),
        }
    }
}

/// The first HMAC secret or token among `keys`: what a scheme that signs with one key uses.
pub(crate) fn first_hmac(keys: &[SigningKey]) -> Result<&[u8], SignError> {
    keys.iter()
        .find_map(|key| match &key.inner {
            Key::Hmac(bytes) => Some(bytes.as_slice()),
            Key::Ed25519(_) => None,
        })
        .ok_or(SignError::NoKey)
}

/// The first Ed25519 key among `keys`.
pub(crate) fn first_ed25519(keys: &[SigningKey]) -> Result<&ed25519_dalek::SigningKey, SignError> {
    keys.iter()
        .find_map(|key| match &key.inner {
            Key::Ed25519(key) => Some(key),
            Key::Hmac(_) => None,
        })
        .ok_or(SignError::NoKey)
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// What a sender signs besides the key: the request, when it is sent, and the delivery id and
/// event type where the scheme carries them in headers. Built with [`Outgoing::new`] and the
/// setters below; a setter a scheme has no use for is ignored by it.
#[derive(Debug, Clone)]
pub struct Outgoing<'a> {
    pub(crate) method: &'a str,
    pub(crate) url: Option<&'a str>,
    pub(crate) query: &'a str,
    pub(crate) body: &'a [u8],
    pub(crate) at_ms: i64,
    pub(crate) timestamp_text: Option<&'a str>,
    pub(crate) id: Option<&'a str>,
    pub(crate) event_type: Option<&'a str>,
    pub(crate) headers: Vec<(&'a str, &'a str)>,
}

impl<'a> Outgoing<'a> {
    /// A `POST` of `body` without a query string, sent at unix second `at`.
    pub fn new(body: &'a [u8], at: i64) -> Self {
        Outgoing {
            method: "POST",
            url: None,
            query: "",
            body,
            at_ms: at.saturating_mul(1000),
            timestamp_text: None,
            id: None,
            event_type: None,
            headers: Vec::new(),
        }
    }

    /// Sent at unix millisecond `at_ms`, for schemes that sign milliseconds or RFC 3339.
    pub fn at_millis(mut self, at_ms: i64) -> Self {
        self.at_ms = at_ms;
        self
    }

    /// The signed timestamp exactly as written, instead of one formatted from the time sent
    /// (Twitch's nanoseconds, or a malformed one).
    pub fn timestamp_text(mut self, text: &'a str) -> Self {
        self.timestamp_text = Some(text);
        self
    }

    /// The delivery id, for schemes that carry it in a header (required by them).
    pub fn id(mut self, id: &'a str) -> Self {
        self.id = Some(id);
        self
    }

    /// The event type, for schemes that carry it in a header.
    pub fn event_type(mut self, event_type: &'a str) -> Self {
        self.event_type = Some(event_type);
        self
    }

    /// The HTTP method, where it is not `POST` (signed by `method` message parts).
    pub fn method(mut self, method: &'a str) -> Self {
        self.method = method;
        self
    }

    /// The URL posted to, without query string (Twilio, Square, HubSpot, `url` message parts);
    /// without one, the scheme's public URL is signed.
    pub fn url(mut self, url: &'a str) -> Self {
        self.url = Some(url);
        self
    }

    /// The raw query string, without `?`.
    pub fn query(mut self, query: &'a str) -> Self {
        self.query = query;
        self
    }

    /// A header sent with the request (`Content-Type`, Twilio's signature settings, a header a
    /// message part signs); a header the scheme writes replaces one of the same name.
    pub fn header(mut self, name: &'a str, value: &'a str) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The signed timestamp's text, as `unit` writes the time sent.
    pub(crate) fn timestamp(&self, unit: TimestampUnit) -> String {
        if let Some(text) = self.timestamp_text {
            return text.to_owned();
        }
        match unit {
            TimestampUnit::Seconds => self.at_ms.div_euclid(1000).to_string(),
            TimestampUnit::Millis => self.at_ms.to_string(),
            TimestampUnit::Rfc3339 => format_rfc3339(self.at_ms),
        }
    }

    /// The delivery id, for a scheme that requires one in a header.
    pub(crate) fn required_id(&self) -> Result<&'a str, SignError> {
        self.id.ok_or(SignError::MissingId)
    }

    /// The URL as signed: the request's (or else `public_url`), then `?` and `query` when there
    /// is one.
    pub(crate) fn signed_url(
        &self,
        public_url: Option<&str>,
        query: &str,
    ) -> Result<String, SignError> {
        let url = self
            .url
            .or(public_url)
            .filter(|url| !url.is_empty())
            .ok_or(SignError::MissingUrl)?;
        Ok(if query.is_empty() {
            url.to_owned()
        } else {
            format!("{url}?{query}")
        })
    }
}

/// A signed request's headers and query string: what to send with the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    headers: Vec<(String, String)>,
    query: String,
}

impl Signed {
    /// The headers to send, as `(name, value)`: the request's own, then those the scheme wrote,
    /// names spelt as the scheme spells them.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The value of header `name` (any case), if it is sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The headers as an [`HeaderMap`], ready for [`Incoming`](crate::Incoming).
    pub fn header_map(&self) -> HeaderMap {
        // Every name and value was checked when the request was signed.
        self.headers
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    HeaderName::from_bytes(name.as_bytes()).ok()?,
                    HeaderValue::from_bytes(value.as_bytes()).ok()?,
                ))
            })
            .collect()
    }

    /// The query string to send, without `?`: the request's, plus what the scheme adds (Twilio's
    /// `bodySHA256` for a JSON body).
    pub fn query(&self) -> &str {
        &self.query
    }

    /// Sets header `name`, replacing any of the same name.
    pub(crate) fn set(&mut self, name: &str, value: impl Into<String>) {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.to_owned(), value.into()));
    }

    /// Appends `pair` to the query string.
    pub(crate) fn append_query(&mut self, pair: &str) {
        if !self.query.is_empty() {
            self.query.push('&');
        }
        self.query.push_str(pair);
    }

    /// Sets the id header at `location`, if the id lives in one.
    pub(crate) fn set_id(
        &mut self,
        location: &IdLocation,
        request: &Outgoing<'_>,
    ) -> Result<(), SignError> {
        let name = match location {
            IdLocation::Header(name) => name,
            IdLocation::FirstHeader(names) => match names.first() {
                Some(name) => name,
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
        self.set(name, request.required_id()?);
        Ok(())
    }

    /// Sets the event type header at `field`, if the request has an event type and the scheme
    /// reads it from a header.
    pub(crate) fn set_event_type(&mut self, field: Option<&Field>, request: &Outgoing<'_>) {
        let name = match field {
            Some(Field::Header(name)) => name,
            Some(Field::FirstHeader(names)) => match names.first() {
                Some(name) => name,
                None => return,
            },
            _ => return,
        };
        if let Some(event_type) = request.event_type {
            self.set(name, event_type);
        }
    }
}

/// Why a request could not be signed. Never carries a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignError {
    /// [`sign_as`] was given a name that is neither a preset nor `stripe`, `github` or
    /// `standard`.
    #[error("no provider named {0}")]
    UnknownProvider(String),
    /// No key of the kind the scheme signs with (an HMAC secret, or an Ed25519 private key).
    #[error("no key of the kind the scheme signs with")]
    NoKey,
    /// The key's text is not written as the scheme's secrets are.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// A public key verifies signatures but cannot make them.
    #[error("a public key cannot sign")]
    PublicKey,
    /// An Ed25519 private key that is not 64 hex digits.
    #[error("private key is not 32 bytes in hex")]
    InvalidPrivateKey,
    /// The scheme reads the delivery id from a header and the request has none.
    #[error("the scheme reads the delivery id from a header: the request needs an id")]
    MissingId,
    /// The scheme signs a URL and neither the request nor the scheme has one.
    #[error("the scheme signs the URL: the request needs a url")]
    MissingUrl,
    /// A message part signs the named header and the request does not send it.
    #[error("the scheme signs header {0}, which the request does not send")]
    MissingHeader(String),
    /// The scheme signs a timestamp read from the body, and the body has none at this pointer.
    #[error("the scheme signs the body's timestamp at {0}, which the body lacks")]
    MissingBodyTimestamp(String),
    /// The named header cannot carry its value (a control character, or a token that is not
    /// visible ASCII).
    #[error("header {0} cannot carry its value")]
    InvalidHeader(String),
}

/// Signs `request` as a sender of `scheme` does, with `keys` in order.
///
/// Where the signature header holds a list (Stripe's `v1`, Standard Webhooks' entries, a
/// `k=v` list such as Paddle's), each key adds an entry, as during a rotation; elsewhere the
/// first key of the kind the scheme uses signs. Standard Webhooks signs `v1` with HMAC keys and
/// `v1a` with Ed25519 keys. The timestamp is the time sent, written as the scheme writes it; a
/// timestamp read from the body (Linear's `webhookTimestamp`) is the body's own. Twilio signs
/// the form's parameters, or, when the request's `Content-Type` is JSON or its query already
/// has `bodySHA256`, the body's hash through the URL ([`Signed::query`] carries it).
pub fn sign(
    scheme: &Scheme,
    keys: &[SigningKey],
    request: &Outgoing<'_>,
) -> Result<Signed, SignError> {
    let mut signed = Signed {
        headers: Vec::new(),
        query: request.query.to_owned(),
    };
    for (name, value) in &request.headers {
        signed.set(name, *value);
    }
    match scheme {
        Scheme::Stripe { .. } => crate::stripe::sign(keys, request, &mut signed),
        Scheme::Github => crate::github::sign(keys, request, &mut signed),
        Scheme::Standard { .. } => crate::standard::sign(keys, request, &mut signed),
        Scheme::Hmac(settings) => crate::hmac::sign(settings, keys, request, &mut signed),
        Scheme::Signed(settings) => settings.sign(keys, request, &mut signed),
        Scheme::Ed25519(settings) => settings.sign(keys, request, &mut signed),
        Scheme::Token(settings) => settings.sign(keys, request, &mut signed),
        Scheme::Twilio(settings) => settings.sign(keys, request, &mut signed),
    }?;
    for (name, value) in &signed.headers {
        if HeaderName::from_bytes(name.as_bytes()).is_err()
            || HeaderValue::from_bytes(value.as_bytes()).is_err()
        {
            return Err(SignError::InvalidHeader(name.clone()));
        }
    }
    Ok(signed)
}

/// Signs `request` as the named provider does, with its default settings and one key:
/// `provider` is a preset's name, or `stripe`, `github` or `standard` (Standard Webhooks);
/// `secret` is written as the receiver's secret is configured (see [`SigningKey::parse`]; for
/// Discord, the private key's seed in hex). A preset that signs its URL takes it from
/// [`Outgoing::url`].
///
/// ```
/// use hookclaim_verify::{presets, sign_as, verify_request, Incoming, Outgoing, Secret};
///
/// let body = br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}"#;
/// let now = 1_767_225_600;
/// let signed = sign_as("slack", "slack-signing-secret", &Outgoing::new(body, now)).unwrap();
/// // X-Slack-Request-Timestamp: 1767225600, X-Slack-Signature: v0=…
/// assert_eq!(signed.header("x-slack-request-timestamp"), Some("1767225600"));
///
/// let scheme = presets::lookup("slack").unwrap().scheme(None, "");
/// let secrets = [Secret::from_bytes("slack-signing-secret")];
/// let headers = signed.header_map();
/// let incoming = Incoming { query: signed.query(), ..Incoming::post(&headers, body) };
/// let verified = verify_request(&scheme, &secrets, &incoming, now).unwrap();
/// assert_eq!(verified.delivery_id, "Ev1");
/// ```
pub fn sign_as(provider: &str, secret: &str, request: &Outgoing<'_>) -> Result<Signed, SignError> {
    let scheme = match provider {
        "stripe" => Scheme::Stripe {
            tolerance_secs: DEFAULT_TOLERANCE_SECS,
        },
        "github" => Scheme::Github,
        "standard" => Scheme::Standard {
            tolerance_secs: DEFAULT_TOLERANCE_SECS,
            raw_secrets: false,
        },
        name => presets::lookup(name)
            .ok_or_else(|| SignError::UnknownProvider(name.to_owned()))?
            .scheme(None, request.url.unwrap_or_default()),
    };
    let key = SigningKey::parse(secret, scheme.secret_format())?;
    sign(&scheme, &[key], request)
}

/// The HMAC of `parts` under each HMAC key, in order; `NoKey` when there is none.
pub(crate) fn hmac_tags(
    keys: &[SigningKey],
    algorithm: Algorithm,
    parts: &[&[u8]],
) -> Result<Vec<Vec<u8>>, SignError> {
    let tags: Vec<Vec<u8>> = keys
        .iter()
        .filter_map(|key| match &key.inner {
            Key::Hmac(bytes) => mac::compute(algorithm, bytes, parts),
            Key::Ed25519(_) => None,
        })
        .collect();
    if tags.is_empty() {
        return Err(SignError::NoKey);
    }
    Ok(tags)
}

/// The HMAC of `parts` under the first HMAC key.
pub(crate) fn hmac_tag(
    keys: &[SigningKey],
    algorithm: Algorithm,
    parts: &[&[u8]],
) -> Result<Vec<u8>, SignError> {
    let mut tags = hmac_tags(keys, algorithm, parts)?;
    Ok(tags.swap_remove(0))
}

/// Standard base64 with padding, as every base64 signature here is written.
pub(crate) fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
