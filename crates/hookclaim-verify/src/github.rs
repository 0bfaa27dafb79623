//! GitHub: `X-Hub-Signature-256: sha256=<hex>` over the body; id and type in headers.

use super::locate::{id_header, optional_header};
use super::mac::{self, Algorithm, SignatureEncoding};
use super::{required_header, IdOrigin, Incoming, Keys, Verified, VerifyError};

const SIGNATURE: &str = "x-hub-signature-256";
const DELIVERY: &str = "x-github-delivery";
const EVENT: &str = "x-github-event";

/// The headers GitHub's scheme reads.
pub(super) const HEADERS: [&str; 3] = [SIGNATURE, DELIVERY, EVENT];

pub(super) fn verify(keys: &Keys<'_>, req: &Incoming<'_>) -> Result<Verified, VerifyError> {
    let header = required_header(req.headers, SIGNATURE)?;
    let tag = header
        .strip_prefix("sha256=")
        .and_then(|hex| mac::decode(hex, SignatureEncoding::Hex, 32))
        .ok_or_else(|| VerifyError::MalformedHeader(SIGNATURE.to_owned()))?;
    if !mac::any_key_matches(Algorithm::Sha256, &keys.hmac, &[req.body], &[tag]) {
        return Err(VerifyError::InvalidSignature);
    }

    let delivery_id = id_header(req.headers, DELIVERY)?.ok_or(VerifyError::MissingDeliveryId)?;
    Ok(Verified {
        delivery_id,
        id_origin: IdOrigin::Header,
        event_type: optional_header(req.headers, EVENT),
    })
}

/// `X-Hub-Signature-256` under the first key, with the delivery id and event type headers.
#[cfg(feature = "sign")]
pub(super) fn sign(
    keys: &[crate::sign::SigningKey],
    request: &crate::sign::Outgoing<'_>,
    signed: &mut crate::sign::Signed,
) -> Result<(), crate::sign::SignError> {
    let tag = crate::sign::hmac_tag(keys, Algorithm::Sha256, &[request.body])?;
    signed.set(SIGNATURE, format!("sha256={}", hex::encode(tag)));
    signed.set(DELIVERY, request.required_id()?);
    if let Some(event_type) = request.event_type {
        signed.set(EVENT, event_type);
    }
    Ok(())
}
