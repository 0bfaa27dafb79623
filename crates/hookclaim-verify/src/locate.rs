//! Where a verified request's delivery id and event type are read from: headers, fields of the
//! JSON body (parsed at most once, and only when needed), several fields joined, or the body's
//! hash.

use std::cell::OnceCell;

use http::HeaderMap;
use sha2::{Digest as _, Sha256};

use super::{IdOrigin, VerifyError};

/// Where a scheme finds the delivery id.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdLocation {
    /// A request header.
    Header(String),
    /// The first of these headers that is present (GitLab sends `Idempotency-Key` since 17.4
    /// and `X-Gitlab-Event-UUID` before).
    FirstHeader(Vec<String>),
    /// A JSON pointer into the body.
    JsonPointer(String),
    /// Several JSON pointers whose values, joined with `:`, identify the event (HubSpot, whose
    /// event ids alone are not unique).
    Composite(Vec<String>),
    /// No id from the sender: the hex SHA-256 of the body is the id.
    BodySha256,
}

impl IdLocation {
    /// Whether the id is read from the body (a field, several fields, or its hash), so that a
    /// signature over the body covers it.
    pub fn is_in_body(&self) -> bool {
        matches!(
            self,
            IdLocation::JsonPointer(_) | IdLocation::Composite(_) | IdLocation::BodySha256
        )
    }

    /// The headers this location reads.
    pub fn header_names(&self) -> Vec<String> {
        match self {
            IdLocation::Header(name) => vec![name.clone()],
            IdLocation::FirstHeader(names) => names.clone(),
            _ => Vec::new(),
        }
    }
}

/// A single value in a request: a header, or a JSON pointer into the body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Field {
    /// A request header.
    Header(String),
    /// The first of these headers that is present (Shopify's `X-Shopify-Topic`, or the newer
    /// `shopify-topic`).
    FirstHeader(Vec<String>),
    /// A JSON pointer (RFC 6901) into the body.
    Pointer(String),
}

impl Field {
    /// The headers this field reads.
    pub fn header_names(&self) -> Vec<String> {
        match self {
            Field::Header(name) => vec![name.clone()],
            Field::FirstHeader(names) => names.clone(),
            Field::Pointer(_) => Vec::new(),
        }
    }
}

/// The raw body and, on first need, its JSON value.
pub(crate) struct Body<'a> {
    bytes: &'a [u8],
    json: OnceCell<Option<serde_json::Value>>,
}

impl<'a> Body<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Body {
            bytes,
            json: OnceCell::new(),
        }
    }

    /// The body as JSON, or `None` when it is not JSON.
    pub(crate) fn json(&self) -> Option<&serde_json::Value> {
        self.json
            .get_or_init(|| serde_json::from_slice(self.bytes).ok())
            .as_ref()
    }
}

/// A delivery id header: `None` when absent or empty, `NonAsciiDeliveryId` when present but not
/// visible ASCII (refused with its reason rather than reported as missing).
pub(crate) fn id_header(headers: &HeaderMap, name: &str) -> Result<Option<String>, VerifyError> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| VerifyError::NonAsciiDeliveryId(name.to_ascii_lowercase()))?;
    Ok((!text.is_empty()).then(|| text.to_owned()))
}

/// The delivery id at `location`.
pub(crate) fn locate_id(
    location: &IdLocation,
    headers: &HeaderMap,
    body: &Body<'_>,
) -> Result<(String, IdOrigin), VerifyError> {
    match location {
        IdLocation::Header(name) => Ok((
            id_header(headers, name)?.ok_or(VerifyError::MissingDeliveryId)?,
            IdOrigin::Header,
        )),
        IdLocation::FirstHeader(names) => {
            for name in names {
                if let Some(id) = id_header(headers, name)? {
                    return Ok((id, IdOrigin::Header));
                }
            }
            Err(VerifyError::MissingDeliveryId)
        }
        IdLocation::JsonPointer(pointer) => {
            let json = body.json().ok_or(VerifyError::InvalidJson)?;
            Ok((
                json_id(json, pointer).ok_or(VerifyError::MissingDeliveryId)?,
                IdOrigin::Body,
            ))
        }
        IdLocation::Composite(pointers) => {
            let json = body.json().ok_or(VerifyError::InvalidJson)?;
            let parts = pointers
                .iter()
                .map(|p| json_id(json, p))
                .collect::<Option<Vec<_>>>()
                .ok_or(VerifyError::MissingDeliveryId)?;
            Ok((parts.join(":"), IdOrigin::Body))
        }
        IdLocation::BodySha256 => Ok((
            hex::encode(Sha256::digest(body.bytes)),
            IdOrigin::BodySha256,
        )),
    }
}

/// An event type: a header, or a string or integer at a pointer (Discord's types are numbers).
/// Never an error: a missing or unusable type is `None`.
pub(crate) fn locate_event_type(
    field: Option<&Field>,
    headers: &HeaderMap,
    body: &Body<'_>,
) -> Option<String> {
    match field? {
        Field::Header(name) => optional_header(headers, name),
        Field::FirstHeader(names) => names
            .iter()
            .find(|name| headers.contains_key(name.as_str()))
            .and_then(|name| optional_header(headers, name)),
        Field::Pointer(pointer) => json_id(body.json()?, pointer),
    }
}

/// The header's value when present, visible ASCII and not empty.
pub(crate) fn optional_header(headers: &HeaderMap, name: &str) -> Option<String> {
    let value = headers.get(name)?.to_str().ok()?;
    (!value.is_empty()).then(|| value.to_owned())
}

/// A non-empty string at `pointer`.
pub(crate) fn json_string(json: &serde_json::Value, pointer: &str) -> Option<String> {
    let text = json.pointer(pointer)?.as_str()?;
    (!text.is_empty()).then(|| text.to_owned())
}

/// An id at `pointer`: a non-empty string, or an integer written in decimal (integers have one
/// canonical spelling; floats, booleans and objects do not count).
pub(crate) fn json_id(json: &serde_json::Value, pointer: &str) -> Option<String> {
    match json.pointer(pointer)? {
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => json_string(json, pointer),
    }
}
