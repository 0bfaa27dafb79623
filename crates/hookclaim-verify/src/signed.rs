//! The configurable signed-message kind: an HMAC (SHA-256, SHA-1 or SHA-512, hex or base64)
//! over a message built from parts of the request, with the signature behind a prefix or in a
//! `k=v` list, and an optional signed timestamp. Most providers' schemes are instances of it
//! (see `presets`).

use super::locate::{locate_event_type, locate_id, Body, Field, IdLocation};
use super::mac::{self, Algorithm, SignatureEncoding};
use super::timestamp::{parse_millis, TimestampUnit, Tolerance};
use super::{bounded_entries, required_header, Incoming, Keys, Verified, VerifyError};

/// One piece of the signed message, concatenated in order. In configuration: `"body"`,
/// `"timestamp"`, `"id"`, `"method"`, `"url"`, `{"header": NAME}` or `{"text": LITERAL}`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(rename_all = "lowercase")
)]
#[non_exhaustive]
pub enum MessagePart {
    /// The raw body.
    Body,
    /// The timestamp, exactly as received (for a body field: a string's text or an integer's
    /// digits).
    Timestamp,
    /// The delivery id header's raw bytes (needs the id in a header).
    Id,
    /// The HTTP method, e.g. `POST`.
    Method,
    /// The configured public URL, with `?` and the query string received when there is one.
    Url,
    /// A named header's raw bytes; `MissingHeader` when absent.
    Header(String),
    /// Literal text, e.g. `v0:`.
    Text(String),
}

/// How the signature header is written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureFormat {
    /// The prefix (possibly empty) followed by exactly one signature, e.g. `v0=<hex>`.
    Prefixed(String),
    /// `k=v` entries separated by `separator`, e.g. Paddle's `ts=…;h1=…;h1=…`. Every entry
    /// whose key is `signature_key` is a candidate (several during a rotation); entries with
    /// other keys are ignored. `timestamp_key`, when set, names the entry holding the timestamp
    /// (exactly one).
    List {
        /// Between entries, e.g. `;` or `,` (surrounding spaces are ignored).
        separator: char,
        /// The key of signature entries, e.g. `h1` or `v1`.
        signature_key: String,
        /// The key of the timestamp entry, e.g. `ts` or `t`.
        timestamp_key: Option<String>,
    },
}

/// Where the signed timestamp is read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimestampFrom {
    /// A request header.
    Header(String),
    /// A JSON pointer into the body (Linear's `webhookTimestamp`).
    Body(String),
    /// The signature header's `timestamp_key` entry.
    Signature,
}

/// A signed timestamp: where it is, how it is written, how far from now it may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampRule {
    /// Where it is read.
    pub from: TimestampFrom,
    /// How it is written.
    pub unit: TimestampUnit,
    /// How far from now it may be, and in which directions.
    pub tolerance: Tolerance,
}

/// The configurable signed-message scheme. Outside this crate it is built by
/// [`SignedScheme::new`], which checks the rules that span its parts, so a scheme that exists is
/// one that can be verified against.
///
/// Authenticity: the signature header is required; each candidate must decode (hex or base64)
/// to exactly the MAC's length, and the message is the concatenation of `message`'s parts. A
/// header without the prefix, or a list with no signature entry, two timestamp entries or more
/// than 16 entries, is `MalformedHeader`. A timestamp that cannot be read is `MissingHeader`/
/// `MalformedHeader` for headers and the signature header, `MalformedTimestamp` for a body
/// field; it is checked against the tolerance after the signature.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SignedScheme {
    /// The MAC's hash.
    pub algorithm: Algorithm,
    /// Header carrying the signature.
    pub signature_header: String,
    /// Other names the signature header may have, read in order when `signature_header` is
    /// absent (Shopify's newer `shopify-hmac-sha256`); usually empty.
    pub other_signature_headers: Vec<String>,
    /// How each signature is written.
    pub encoding: SignatureEncoding,
    /// How the signature header is laid out.
    pub format: SignatureFormat,
    /// The signed message.
    pub message: Vec<MessagePart>,
    /// The signed timestamp, if the scheme has one.
    pub timestamp: Option<TimestampRule>,
    /// Where the delivery id comes from.
    pub id: IdLocation,
    /// Where the event type comes from, if anywhere.
    pub event_type: Option<Field>,
    /// The URL the provider posts to, for schemes that sign it (`Url` parts).
    pub public_url: Option<String>,
}

/// What a [`SignedScheme`] is made of, before [`SignedScheme::new`] checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedParts {
    /// The MAC's hash.
    pub algorithm: Algorithm,
    /// Header carrying the signature.
    pub signature_header: String,
    /// How each signature is written.
    pub encoding: SignatureEncoding,
    /// How the signature header is laid out.
    pub format: SignatureFormat,
    /// The signed message.
    pub message: Vec<MessagePart>,
    /// The signed timestamp, if the scheme has one.
    pub timestamp: Option<TimestampRule>,
    /// Where the delivery id comes from.
    pub id: IdLocation,
    /// Where the event type comes from, if anywhere.
    pub event_type: Option<Field>,
    /// The URL the provider posts to; required by `Url` parts.
    pub public_url: Option<String>,
}

/// Why parts do not make a [`SignedScheme`]. Each names the setting at fault, in the words
/// hookclaim's configuration uses for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemeError {
    /// A header name that HTTP does not allow; the setting is named.
    #[error("{0} is not a valid header name")]
    HeaderName(&'static str),
    /// No `Body` part: a signature that does not cover the body proves nothing about it.
    #[error("message must include the body")]
    NoBody,
    /// A `Timestamp` part without a timestamp rule.
    #[error("a timestamp message part needs a timestamp setting")]
    TimestampPartWithoutTimestamp,
    /// An `Id` part without the id in a header.
    #[error("an id message part needs id_header")]
    IdPartWithoutIdHeader,
    /// A `Url` part without a public URL.
    #[error("a url message part needs public_url")]
    UrlPartWithoutPublicUrl,
    /// A public URL that is not http(s), or carries a query string or fragment.
    #[error("public_url must be an http(s) URL without query string or fragment")]
    PublicUrl,
    /// An empty key in a `k=v` signature list.
    #[error("signature_list keys must not be empty")]
    EmptyListKey,
    /// A timestamp the signature does not cover: a captured request with the timestamp
    /// rewritten would pass the tolerance check. The setting that names it is given.
    #[error(
        "{0} names a timestamp the signature does not cover: add \"timestamp\" (or the \
         timestamp header) to message, or remove the timestamp setting"
    )]
    UnsignedTimestamp(&'static str),
}

impl SignedScheme {
    /// The scheme made of `parts`, once they are checked: valid header names, a message that
    /// includes the body and only parts the scheme can fill in, and a timestamp (if any) that
    /// the signature covers.
    pub fn new(parts: SignedParts) -> Result<Self, SchemeError> {
        let scheme = SignedScheme {
            algorithm: parts.algorithm,
            signature_header: parts.signature_header,
            other_signature_headers: Vec::new(),
            encoding: parts.encoding,
            format: parts.format,
            message: parts.message,
            timestamp: parts.timestamp,
            id: parts.id,
            event_type: parts.event_type,
            public_url: parts.public_url,
        };
        scheme.check()?;
        Ok(scheme)
    }

    /// The rules [`SignedScheme::new`] enforces; every preset keeps them too.
    pub(crate) fn check(&self) -> Result<(), SchemeError> {
        let valid = |name: &str| http::HeaderName::from_bytes(name.as_bytes()).is_ok();
        if !valid(&self.signature_header) {
            return Err(SchemeError::HeaderName("signature_header"));
        }
        if let SignatureFormat::List {
            signature_key,
            timestamp_key,
            ..
        } = &self.format
        {
            if signature_key.is_empty() || timestamp_key.as_deref() == Some("") {
                return Err(SchemeError::EmptyListKey);
            }
        }
        if let Some(TimestampRule {
            from: TimestampFrom::Header(h),
            ..
        }) = &self.timestamp
        {
            if !valid(h) {
                return Err(SchemeError::HeaderName("timestamp_header"));
            }
        }
        for part in &self.message {
            match part {
                MessagePart::Header(h) if !valid(h) => {
                    return Err(SchemeError::HeaderName("message header"))
                }
                MessagePart::Timestamp if self.timestamp.is_none() => {
                    return Err(SchemeError::TimestampPartWithoutTimestamp)
                }
                MessagePart::Id if !matches!(self.id, IdLocation::Header(_)) => {
                    return Err(SchemeError::IdPartWithoutIdHeader)
                }
                MessagePart::Url if self.public_url.is_none() => {
                    return Err(SchemeError::UrlPartWithoutPublicUrl)
                }
                _ => {}
            }
        }
        if !self.message.contains(&MessagePart::Body) {
            return Err(SchemeError::NoBody);
        }
        if let Some(url) = &self.public_url {
            let ok = (url.starts_with("https://") || url.starts_with("http://"))
                && !url.contains(['?', '#'])
                && !url.chars().any(|c| c.is_whitespace() || c.is_control());
            if !ok {
                return Err(SchemeError::PublicUrl);
            }
        }
        if self.signs_timestamp() == Some(false) {
            return Err(SchemeError::UnsignedTimestamp(
                match self.timestamp.as_ref().map(|t| &t.from) {
                    Some(TimestampFrom::Signature) => "signature_list.timestamp_key",
                    _ => "timestamp_header",
                },
            ));
        }
        Ok(())
    }

    /// Whether the message includes the named header's raw bytes.
    fn signs_header(&self, name: &str) -> bool {
        self.message
            .iter()
            .any(|part| matches!(part, MessagePart::Header(h) if h.eq_ignore_ascii_case(name)))
    }

    /// Whether the signature covers the delivery id: an id read from the body (the message always
    /// includes it), or an id header the message includes (an `Id` part, or the same header).
    pub fn signs_delivery_id(&self) -> bool {
        match &self.id {
            id if id.is_in_body() => self.message.contains(&MessagePart::Body),
            IdLocation::Header(name) => {
                self.message.contains(&MessagePart::Id) || self.signs_header(name)
            }
            IdLocation::FirstHeader(names) => names.iter().all(|name| self.signs_header(name)),
            _ => false,
        }
    }

    /// Whether the timestamp rule, if any, reads a timestamp the signature covers: a body field
    /// (the message always includes the body), or a header or signature-list entry that the
    /// message includes (a `Timestamp` part, or the same header). `None` without a timestamp.
    pub fn signs_timestamp(&self) -> Option<bool> {
        let rule = self.timestamp.as_ref()?;
        let in_message = self.message.contains(&MessagePart::Timestamp);
        Some(match &rule.from {
            TimestampFrom::Body(_) => self.message.contains(&MessagePart::Body),
            TimestampFrom::Header(name) => in_message || self.signs_header(name),
            TimestampFrom::Signature => in_message,
        })
    }

    pub(super) fn header_names(&self) -> Vec<String> {
        let mut names = vec![self.signature_header.clone()];
        names.extend(self.other_signature_headers.iter().cloned());
        if let Some(TimestampRule {
            from: TimestampFrom::Header(h),
            ..
        }) = &self.timestamp
        {
            names.push(h.clone());
        }
        for part in &self.message {
            if let MessagePart::Header(h) = part {
                names.push(h.clone());
            }
        }
        names.extend(self.id.header_names());
        if let Some(field) = &self.event_type {
            names.extend(field.header_names());
        }
        names.sort();
        names.dedup();
        names
    }

    /// The signature header as the layout writes it (a list gets the timestamp entry when the
    /// timestamp lives there, then an entry per key), with the timestamp, id and event type
    /// headers where the scheme reads them.
    #[cfg(feature = "sign")]
    pub(super) fn sign(
        &self,
        keys: &[crate::sign::SigningKey],
        request: &crate::sign::Outgoing<'_>,
        signed: &mut crate::sign::Signed,
    ) -> Result<(), crate::sign::SignError> {
        use crate::sign::SignError;
        let timestamp = match &self.timestamp {
            None => None,
            Some(rule) => Some(match &rule.from {
                TimestampFrom::Body(pointer) => Body::new(request.body)
                    .json()
                    .and_then(|json| super::locate::json_id(json, pointer))
                    .ok_or_else(|| SignError::MissingBodyTimestamp(pointer.clone()))?,
                TimestampFrom::Header(name) => {
                    let text = request.timestamp(rule.unit);
                    signed.set(name, text.clone());
                    text
                }
                TimestampFrom::Signature => request.timestamp(rule.unit),
            }),
        };
        signed.set_id(&self.id, request)?;
        signed.set_event_type(self.event_type.as_ref(), request);
        let url = if self.message.contains(&MessagePart::Url) {
            request.signed_url(self.public_url.as_deref(), signed.query())?
        } else {
            String::new()
        };
        let mut parts: Vec<&[u8]> = Vec::with_capacity(self.message.len());
        for part in &self.message {
            parts.push(match part {
                MessagePart::Body => request.body,
                MessagePart::Timestamp => timestamp.as_deref().unwrap_or_default().as_bytes(),
                MessagePart::Id => request.required_id()?.as_bytes(),
                MessagePart::Method => request.method.as_bytes(),
                MessagePart::Url => url.as_bytes(),
                MessagePart::Header(name) => signed
                    .header(name)
                    .ok_or_else(|| SignError::MissingHeader(name.clone()))?
                    .as_bytes(),
                MessagePart::Text(text) => text.as_bytes(),
            });
        }
        let tags = crate::sign::hmac_tags(keys, self.algorithm, &parts)?;
        let header = match &self.format {
            SignatureFormat::Prefixed(prefix) => {
                format!("{prefix}{}", mac::encode(&tags[0], self.encoding))
            }
            SignatureFormat::List {
                separator,
                signature_key,
                timestamp_key,
            } => {
                let mut entries = Vec::with_capacity(tags.len() + 1);
                let in_list = self
                    .timestamp
                    .as_ref()
                    .is_some_and(|t| t.from == TimestampFrom::Signature);
                if let (Some(key), Some(text), true) = (timestamp_key, &timestamp, in_list) {
                    entries.push(format!("{key}={text}"));
                }
                for tag in &tags {
                    entries.push(format!(
                        "{signature_key}={}",
                        mac::encode(tag, self.encoding)
                    ));
                }
                entries.join(&separator.to_string())
            }
        };
        signed.set(&self.signature_header, header);
        Ok(())
    }

    pub(super) fn verify(
        &self,
        keys: &Keys<'_>,
        req: &Incoming<'_>,
        now: i64,
    ) -> Result<Verified, VerifyError> {
        // The first of the signature header's names that is present; a missing header is
        // reported under its main name.
        let signature_header = std::iter::once(&self.signature_header)
            .chain(&self.other_signature_headers)
            .find(|name| req.headers.contains_key(name.as_str()))
            .unwrap_or(&self.signature_header);
        let malformed = || VerifyError::MalformedHeader(signature_header.clone());
        let header = required_header(req.headers, signature_header)?;
        let len = self.algorithm.tag_len();
        let (candidates, list_timestamp) = match &self.format {
            SignatureFormat::Prefixed(prefix) => {
                let tag = header
                    .strip_prefix(prefix.as_str())
                    .and_then(|text| mac::decode(text, self.encoding, len))
                    .ok_or_else(malformed)?;
                (vec![tag], None)
            }
            SignatureFormat::List {
                separator,
                signature_key,
                timestamp_key,
            } => {
                let mut candidates = Vec::new();
                let mut signatures_seen = false;
                let mut timestamp = None;
                for entry in bounded_entries(header, *separator).ok_or_else(malformed)? {
                    let Some((key, value)) = entry.trim().split_once('=') else {
                        continue;
                    };
                    if key == signature_key {
                        signatures_seen = true;
                        candidates.extend(mac::decode(value, self.encoding, len));
                    } else if Some(key) == timestamp_key.as_deref() {
                        // Two timestamps leave it unclear which one was signed.
                        if timestamp.replace(value).is_some() {
                            return Err(malformed());
                        }
                    }
                }
                if !signatures_seen {
                    return Err(malformed());
                }
                (candidates, timestamp)
            }
        };

        let body = Body::new(req.body);
        // The timestamp's text as signed, and its value.
        let timestamp = match &self.timestamp {
            None => None,
            Some(rule) => {
                let (text, bad) = match &rule.from {
                    TimestampFrom::Header(name) => (
                        required_header(req.headers, name)?.to_owned(),
                        VerifyError::MalformedHeader(name.clone()),
                    ),
                    TimestampFrom::Signature => (
                        list_timestamp.ok_or_else(malformed)?.to_owned(),
                        malformed(),
                    ),
                    TimestampFrom::Body(pointer) => {
                        let bad = VerifyError::MalformedTimestamp(format!("body {pointer}"));
                        let text = body
                            .json()
                            .and_then(|json| super::locate::json_id(json, pointer))
                            .ok_or_else(|| bad.clone())?;
                        (text, bad)
                    }
                };
                let at = parse_millis(&text, rule.unit).ok_or(bad)?;
                Some((text, at, rule.tolerance))
            }
        };

        let url = self
            .message
            .contains(&MessagePart::Url)
            .then(|| req.url(self.public_url.as_deref().unwrap_or_default()));
        let mut parts: Vec<&[u8]> = Vec::with_capacity(self.message.len());
        for part in &self.message {
            parts.push(match part {
                MessagePart::Body => req.body,
                MessagePart::Timestamp => match &timestamp {
                    Some((text, _, _)) => text.as_bytes(),
                    None => b"",
                },
                MessagePart::Id => match &self.id {
                    IdLocation::Header(name) => req
                        .headers
                        .get(name)
                        .ok_or_else(|| VerifyError::MissingHeader(name.clone()))?
                        .as_bytes(),
                    _ => b"",
                },
                MessagePart::Method => req.method.as_bytes(),
                MessagePart::Url => url.as_deref().unwrap_or_default().as_bytes(),
                MessagePart::Header(name) => req
                    .headers
                    .get(name)
                    .ok_or_else(|| VerifyError::MissingHeader(name.clone()))?
                    .as_bytes(),
                MessagePart::Text(text) => text.as_bytes(),
            });
        }
        if !mac::any_key_matches(self.algorithm, &keys.hmac, &parts, &candidates) {
            return Err(VerifyError::InvalidSignature);
        }
        if let Some((_, at, tolerance)) = timestamp {
            if !tolerance.accepts(at, now) {
                return Err(VerifyError::TimestampOutOfTolerance);
            }
        }

        let (delivery_id, id_origin) = locate_id(&self.id, req.headers, &body)?;
        Ok(Verified {
            delivery_id,
            id_origin,
            event_type: locate_event_type(self.event_type.as_ref(), req.headers, &body),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timestamp::Tolerance;

    fn parts() -> SignedParts {
        SignedParts {
            algorithm: Algorithm::Sha256,
            signature_header: "X-Sig".into(),
            encoding: SignatureEncoding::Hex,
            format: SignatureFormat::Prefixed(String::new()),
            message: vec![MessagePart::Timestamp, MessagePart::Body],
            timestamp: Some(TimestampRule {
                from: TimestampFrom::Header("X-Ts".into()),
                unit: TimestampUnit::Seconds,
                tolerance: Tolerance::Both(300),
            }),
            id: IdLocation::Header("X-Id".into()),
            event_type: None,
            public_url: None,
        }
    }

    #[test]
    fn a_scheme_is_built_only_from_parts_that_keep_its_rules() {
        assert!(SignedScheme::new(parts()).is_ok());
        type Change = fn(&mut SignedParts);
        let cases: Vec<(Change, SchemeError)> = vec![
            (
                |p| p.signature_header = "a b".into(),
                SchemeError::HeaderName("signature_header"),
            ),
            (
                |p| p.message.push(MessagePart::Header("a b".into())),
                SchemeError::HeaderName("message header"),
            ),
            (
                |p| p.timestamp.as_mut().unwrap().from = TimestampFrom::Header("a b".into()),
                SchemeError::HeaderName("timestamp_header"),
            ),
            (
                |p| p.message.retain(|m| *m != MessagePart::Body),
                SchemeError::NoBody,
            ),
            (
                |p| p.timestamp = None,
                SchemeError::TimestampPartWithoutTimestamp,
            ),
            (
                |p| {
                    p.message.push(MessagePart::Id);
                    p.id = IdLocation::JsonPointer("/id".into());
                },
                SchemeError::IdPartWithoutIdHeader,
            ),
            (
                |p| p.message.push(MessagePart::Url),
                SchemeError::UrlPartWithoutPublicUrl,
            ),
            (
                |p| p.public_url = Some("https://example.com/hook?x=1".into()),
                SchemeError::PublicUrl,
            ),
            (
                |p| {
                    p.format = SignatureFormat::List {
                        separator: ',',
                        signature_key: String::new(),
                        timestamp_key: None,
                    }
                },
                SchemeError::EmptyListKey,
            ),
            (
                |p| p.message = vec![MessagePart::Body],
                SchemeError::UnsignedTimestamp("timestamp_header"),
            ),
            (
                |p| {
                    p.message = vec![MessagePart::Body];
                    p.format = SignatureFormat::List {
                        separator: ',',
                        signature_key: "v1".into(),
                        timestamp_key: Some("t".into()),
                    };
                    p.timestamp.as_mut().unwrap().from = TimestampFrom::Signature;
                },
                SchemeError::UnsignedTimestamp("signature_list.timestamp_key"),
            ),
        ];
        for (change, expected) in cases {
            let mut p = parts();
            change(&mut p);
            assert_eq!(SignedScheme::new(p).unwrap_err(), expected);
        }
        // The same timestamp header, signed as a header part rather than a timestamp part.
        let mut p = parts();
        p.message = vec![MessagePart::Header("x-ts".into()), MessagePart::Body];
        assert!(SignedScheme::new(p).is_ok());
    }

    #[test]
    fn every_preset_keeps_the_rules_new_checks() {
        for preset in crate::presets::PRESETS {
            if let crate::Scheme::Signed(s) = preset.scheme(None, "https://example.com/hook") {
                assert_eq!(s.check(), Ok(()), "{}", preset.name);
            }
        }
    }
}
