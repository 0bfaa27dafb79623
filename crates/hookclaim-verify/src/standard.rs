//! Standard Webhooks (Svix, Polar, Clerk, Resend…): `webhook-id`, `webhook-timestamp` and
//! `webhook-signature` (or their `svix-` spellings), signing `"{id}.{timestamp}.{body}"` with
//! HMAC-SHA256 (`v1`) or Ed25519 (`v1a`).

use base64::Engine as _;

use super::locate::{json_string, Body};
use super::mac::{self, Algorithm, SignatureEncoding};
use super::timestamp::parse_digits;
use super::{
    bounded_entries, ed25519, required_header, IdOrigin, Incoming, Keys, Verified, VerifyError,
};

/// The three Standard Webhooks headers, under one of the two spellings senders use.
struct Names {
    id: &'static str,
    timestamp: &'static str,
    signature: &'static str,
}

/// The names the Standard Webhooks specification gives.
const STANDARD: Names = Names {
    id: "webhook-id",
    timestamp: "webhook-timestamp",
    signature: "webhook-signature",
};

/// The same headers as Svix sends them to most of its customers' endpoints (Clerk and Resend,
/// for instance): same format, `svix-` prefix. Svix's own libraries accept both spellings.
const SVIX: Names = Names {
    id: "svix-id",
    timestamp: "svix-timestamp",
    signature: "svix-signature",
};

pub(super) fn header_names() -> Vec<String> {
    [STANDARD, SVIX]
        .iter()
        .flat_map(|h| [h.id, h.timestamp, h.signature])
        .map(String::from)
        .collect()
}

pub(super) fn verify(
    tolerance_secs: u64,
    keys: &Keys<'_>,
    req: &Incoming<'_>,
    now: i64,
) -> Result<Verified, VerifyError> {
    let headers = req.headers;
    // Take all three headers from one spelling, so a request never mixes the two.
    let names = if !headers.contains_key(STANDARD.signature) && headers.contains_key(SVIX.signature)
    {
        &SVIX
    } else {
        &STANDARD
    };
    let signature = required_header(headers, names.signature)?;
    // The id is signed as the bytes received; whether it can be a key is settled after the
    // signature (a non-ASCII id is a bad request, not a missing header).
    let id = headers
        .get(names.id)
        .ok_or_else(|| VerifyError::MissingHeader(names.id.to_owned()))?
        .as_bytes();
    let timestamp_text = required_header(headers, names.timestamp)?;
    let timestamp = parse_digits(timestamp_text)
        .ok_or_else(|| VerifyError::MalformedHeader(names.timestamp.to_owned()))?;

    let entries = bounded_entries(signature, ' ')
        .ok_or_else(|| VerifyError::MalformedHeader(names.signature.to_owned()))?;
    // Entries are `<version>,<base64>`: `v1` is HMAC-SHA256, `v1a` Ed25519; anything unknown
    // is skipped, as the reference libraries do.
    let mut macs = Vec::new();
    let mut signatures = Vec::new();
    for entry in entries {
        match entry.split_once(',') {
            Some(("v1", value)) => macs.extend(mac::decode(value, SignatureEncoding::Base64, 32)),
            Some(("v1a", value)) => signatures.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(value)
                    .ok()
                    .and_then(|s| <[u8; 64]>::try_from(s).ok()),
            ),
            _ => {}
        }
    }

    let signed = [id, b".", timestamp_text.as_bytes(), b".", req.body];
    let genuine = mac::any_key_matches(Algorithm::Sha256, &keys.hmac, &signed, &macs)
        || ed25519::any_key_verifies(&keys.public, &signed, &signatures);
    if !genuine {
        return Err(VerifyError::InvalidSignature);
    }
    if now.abs_diff(timestamp) > tolerance_secs {
        return Err(VerifyError::TimestampOutOfTolerance);
    }

    let id = super::locate::id_header(headers, names.id)?.ok_or(VerifyError::MissingDeliveryId)?;
    // The type is a convenience: a body that is not JSON is still a valid delivery.
    let body = Body::new(req.body);
    let event_type = body.json().and_then(|json| json_string(json, "/type"));
    Ok(Verified {
        delivery_id: id,
        id_origin: IdOrigin::Header,
        event_type,
    })
}

/// `webhook-id`, `webhook-timestamp` and `webhook-signature`: a `v1` entry per HMAC key and a
/// `v1a` entry per Ed25519 key, in order.
#[cfg(feature = "sign")]
pub(super) fn sign(
    keys: &[crate::sign::SigningKey],
    request: &crate::sign::Outgoing<'_>,
    signed: &mut crate::sign::Signed,
) -> Result<(), crate::sign::SignError> {
    use crate::sign::{base64, Key, SignError};
    let id = request.required_id()?;
    let timestamp = request.timestamp(crate::timestamp::TimestampUnit::Seconds);
    let parts = [
        id.as_bytes(),
        b".",
        timestamp.as_bytes(),
        b".",
        request.body,
    ];
    let mut entries = Vec::with_capacity(keys.len());
    for key in keys {
        entries.push(match &key.inner {
            Key::Hmac(bytes) => match mac::compute(Algorithm::Sha256, bytes, &parts) {
                Some(tag) => format!("v1,{}", base64(&tag)),
                None => continue,
            },
            Key::Ed25519(key) => format!("v1a,{}", base64(&ed25519::sign(key, &parts))),
        });
    }
    if entries.is_empty() {
        return Err(SignError::NoKey);
    }
    signed.set(STANDARD.id, id);
    signed.set(STANDARD.timestamp, timestamp);
    signed.set(STANDARD.signature, entries.join(" "));
    Ok(())
}
