//! The generic HMAC kind: HMAC-SHA256 of the body in a configurable header.

use super::locate::{json_string, locate_id, Body, IdLocation};
use super::mac::{self, Algorithm, SignatureEncoding};
use super::{required_header, Incoming, Keys, Verified, VerifyError};

/// The generic HMAC scheme's settings.
///
/// The configured header holds the prefix followed by exactly one hex or base64 HMAC-SHA256 of
/// the body; a missing prefix or undecodable value is `MalformedHeader`. The id comes from a
/// header, a JSON pointer (a string, or an integer written in decimal; a JSON pointer on a
/// non-JSON body is `InvalidJson`) or the lower-case hex SHA-256 of the body. The event type
/// pointer only accepts strings, and yields `None` when the body is not JSON.
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

pub(super) fn verify(
    settings: &HmacScheme,
    keys: &Keys<'_>,
    req: &Incoming<'_>,
) -> Result<Verified, VerifyError> {
    let header_name = settings.signature_header.as_str();
    let header = required_header(req.headers, header_name)?;
    let tag = header
        .strip_prefix(settings.prefix.as_str())
        .and_then(|encoded| mac::decode(encoded, settings.encoding, 32))
        .ok_or_else(|| VerifyError::MalformedHeader(header_name.to_owned()))?;
    if !mac::any_key_matches(Algorithm::Sha256, &keys.hmac, &[req.body], &[tag]) {
        return Err(VerifyError::InvalidSignature);
    }

    let body = Body::new(req.body);
    let (delivery_id, id_origin) = locate_id(&settings.id, req.headers, &body)?;
    let event_type = settings
        .event_type_pointer
        .as_ref()
        .and_then(|pointer| json_string(body.json()?, pointer));
    Ok(Verified {
        delivery_id,
        id_origin,
        event_type,
    })
}

/// The prefix and the body's HMAC under the first key, with the id header where there is one.
#[cfg(feature = "sign")]
pub(super) fn sign(
    settings: &HmacScheme,
    keys: &[crate::sign::SigningKey],
    request: &crate::sign::Outgoing<'_>,
    signed: &mut crate::sign::Signed,
) -> Result<(), crate::sign::SignError> {
    let tag = crate::sign::hmac_tag(keys, Algorithm::Sha256, &[request.body])?;
    signed.set(
        &settings.signature_header,
        format!(
            "{}{}",
            settings.prefix,
            mac::encode(&tag, settings.encoding)
        ),
    );
    signed.set_id(&settings.id, request)
}
