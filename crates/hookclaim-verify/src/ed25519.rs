//! Ed25519 signatures: Discord's interactions (`X-Signature-Ed25519` over the timestamp and the
//! body) and, for `standard`, Standard Webhooks' `v1a` entries.

use ed25519_dalek::{Signature, VerifyingKey};

use super::locate::{locate_event_type, locate_id, Body, Field, IdLocation};
use super::timestamp::{parse_millis, TimestampUnit, Tolerance};
use super::{required_header, Incoming, Keys, Verified, VerifyError};

/// Ed25519 over `timestamp ‖ body`, with the signature in hex (Discord).
///
/// The public keys are the source's secrets (64 hex digits each: Discord's application public
/// key). The signature header holds exactly 128 hex digits (`MalformedHeader` otherwise); the
/// timestamp header is unix seconds within the tolerance. Verification is strict (RFC 8032
/// with canonical encodings and no small-order keys), as libsodium, which Discord's examples
/// use, is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ed25519Scheme {
    /// Header with the hex signature, e.g. `X-Signature-Ed25519`.
    pub signature_header: String,
    /// Header with the signed unix timestamp, e.g. `X-Signature-Timestamp`.
    pub timestamp_header: String,
    /// How far the timestamp may be from now.
    pub tolerance: Tolerance,
    /// Where the delivery id comes from.
    pub id: IdLocation,
    /// Where the event type comes from, if anywhere.
    pub event_type: Option<Field>,
}

impl Ed25519Scheme {
    pub(super) fn header_names(&self) -> Vec<String> {
        let mut names = vec![self.signature_header.clone(), self.timestamp_header.clone()];
        names.extend(self.id.header_names());
        if let Some(field) = &self.event_type {
            names.extend(field.header_names());
        }
        names
    }

    /// The hex signature under the first Ed25519 key and the timestamp, with the id and event
    /// type headers where there are some.
    #[cfg(feature = "sign")]
    pub(super) fn sign(
        &self,
        keys: &[crate::sign::SigningKey],
        request: &crate::sign::Outgoing<'_>,
        signed: &mut crate::sign::Signed,
    ) -> Result<(), crate::sign::SignError> {
        let key = crate::sign::first_ed25519(keys)?;
        let timestamp = request.timestamp(TimestampUnit::Seconds);
        let signature = sign(key, &[timestamp.as_bytes(), request.body]);
        signed.set(&self.signature_header, hex::encode(signature));
        signed.set(&self.timestamp_header, timestamp);
        signed.set_id(&self.id, request)?;
        signed.set_event_type(self.event_type.as_ref(), request);
        Ok(())
    }

    pub(super) fn verify(
        &self,
        keys: &Keys<'_>,
        req: &Incoming<'_>,
        now: i64,
    ) -> Result<Verified, VerifyError> {
        let signature_text = required_header(req.headers, &self.signature_header)?;
        let timestamp_text = required_header(req.headers, &self.timestamp_header)?;
        let signature = hex::decode(signature_text)
            .ok()
            .and_then(|s| <[u8; 64]>::try_from(s).ok())
            .ok_or_else(|| VerifyError::MalformedHeader(self.signature_header.clone()))?;
        let at = parse_millis(timestamp_text, TimestampUnit::Seconds)
            .ok_or_else(|| VerifyError::MalformedHeader(self.timestamp_header.clone()))?;
        if !any_key_verifies(
            &keys.public,
            &[timestamp_text.as_bytes(), req.body],
            &[signature],
        ) {
            return Err(VerifyError::InvalidSignature);
        }
        if !self.tolerance.accepts(at, now) {
            return Err(VerifyError::TimestampOutOfTolerance);
        }
        let body = Body::new(req.body);
        let (delivery_id, id_origin) = locate_id(&self.id, req.headers, &body)?;
        Ok(Verified {
            delivery_id,
            id_origin,
            event_type: locate_event_type(self.event_type.as_ref(), req.headers, &body),
        })
    }
}

/// The signature of the concatenated `parts` under `key`.
#[cfg(feature = "sign")]
pub(super) fn sign(key: &ed25519_dalek::SigningKey, parts: &[&[u8]]) -> [u8; 64] {
    use ed25519_dalek::Signer as _;
    key.sign(&parts.concat()).to_bytes()
}

/// True when any signature verifies the concatenated `parts` under any public key. Keys that
/// are not valid curve points never verify.
pub(super) fn any_key_verifies(keys: &[&[u8]], parts: &[&[u8]], signatures: &[[u8; 64]]) -> bool {
    if signatures.is_empty() || keys.is_empty() {
        return false;
    }
    let message = parts.concat();
    keys.iter().any(|key| {
        let Some(key) = <[u8; 32]>::try_from(*key)
            .ok()
            .and_then(|k| VerifyingKey::from_bytes(&k).ok())
        else {
            return false;
        };
        signatures.iter().any(|signature| {
            key.verify_strict(&message, &Signature::from_bytes(signature))
                .is_ok()
        })
    })
}
