//! Stripe: `Stripe-Signature: t=…,v1=…` over `"{t}.{body}"`; id and type in the JSON body.

use super::locate::{json_string, Body};
use super::mac::{self, Algorithm, SignatureEncoding};
use super::timestamp::parse_digits;
use super::{bounded_entries, required_header, IdOrigin, Incoming, Keys, Verified, VerifyError};

pub(super) const SIGNATURE: &str = "stripe-signature";

pub(super) fn verify(
    tolerance_secs: u64,
    keys: &Keys<'_>,
    req: &Incoming<'_>,
    now: i64,
) -> Result<Verified, VerifyError> {
    let header = required_header(req.headers, SIGNATURE)?;
    let malformed = || VerifyError::MalformedHeader(SIGNATURE.to_owned());

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
            Some(("v1", value)) => {
                candidates.extend(mac::decode(value, SignatureEncoding::Hex, 32));
            }
            // Stripe's libraries verify `v1` only; `v0` and unknown schemes are skipped.
            _ => {}
        }
    }
    let timestamp_text = timestamp_text.ok_or_else(malformed)?;
    let timestamp = parse_digits(timestamp_text).ok_or_else(malformed)?;

    // Stripe signs "{t}.{body}"; the `t` text is used exactly as received.
    let signed = [timestamp_text.as_bytes(), b".", req.body];
    if !mac::any_key_matches(Algorithm::Sha256, &keys.hmac, &signed, &candidates) {
        return Err(VerifyError::InvalidSignature);
    }
    // Only age is checked (see `verify`). Widened to i128 so the subtraction cannot overflow.
    if i128::from(now) - i128::from(timestamp) > i128::from(tolerance_secs) {
        return Err(VerifyError::TimestampOutOfTolerance);
    }

    let body = Body::new(req.body);
    let json = body.json().ok_or(VerifyError::InvalidJson)?;
    let delivery_id = json_string(json, "/id").ok_or(VerifyError::MissingDeliveryId)?;
    Ok(Verified {
        delivery_id,
        id_origin: IdOrigin::Body,
        event_type: json_string(json, "/type"),
    })
}

/// `Stripe-Signature: t=…,v1=…`, one `v1` per key.
#[cfg(feature = "sign")]
pub(super) fn sign(
    keys: &[crate::sign::SigningKey],
    request: &crate::sign::Outgoing<'_>,
    signed: &mut crate::sign::Signed,
) -> Result<(), crate::sign::SignError> {
    let t = request.timestamp(crate::timestamp::TimestampUnit::Seconds);
    let tags =
        crate::sign::hmac_tags(keys, Algorithm::Sha256, &[t.as_bytes(), b".", request.body])?;
    let mut header = format!("t={t}");
    for tag in tags {
        header.push_str(",v1=");
        header.push_str(&hex::encode(tag));
    }
    signed.set(SIGNATURE, header);
    Ok(())
}
