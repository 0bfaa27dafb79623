//! A static token in a header, compared in constant time (GitLab's `X-Gitlab-Token`).

use sha2::{Digest as _, Sha256};

use super::locate::{locate_event_type, locate_id, Body, Field, IdLocation};
use super::mac::ct_eq;
use super::{required_header, Incoming, Keys, Verified, VerifyError};

/// The token header must equal one of the source's secrets.
///
/// Both sides are hashed with SHA-256 before the constant-time comparison, so neither the
/// token's content nor its length shows in the time taken. A token proves only that the sender
/// knows it: nothing ties it to the body, so use this kind only where the provider offers
/// nothing better.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenScheme {
    /// Header carrying the token, e.g. `X-Gitlab-Token`.
    pub token_header: String,
    /// Where the delivery id comes from.
    pub id: IdLocation,
    /// Where the event type comes from, if anywhere.
    pub event_type: Option<Field>,
}

impl TokenScheme {
    pub(super) fn header_names(&self) -> Vec<String> {
        // The token itself is a secret: it is never kept with the delivery.
        let mut names = self.id.header_names();
        if let Some(field) = &self.event_type {
            names.extend(field.header_names());
        }
        names
    }

    /// The first key as the token, with the id and event type headers where there are some.
    #[cfg(feature = "sign")]
    pub(super) fn sign(
        &self,
        keys: &[crate::sign::SigningKey],
        request: &crate::sign::Outgoing<'_>,
        signed: &mut crate::sign::Signed,
    ) -> Result<(), crate::sign::SignError> {
        let token = crate::sign::first_hmac(keys)?;
        // Verification reads the header as visible ASCII; anything else could never match.
        let token = std::str::from_utf8(token)
            .ok()
            .filter(|t| t.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
            .ok_or_else(|| crate::sign::SignError::InvalidHeader(self.token_header.clone()))?;
        signed.set(&self.token_header, token);
        signed.set_id(&self.id, request)?;
        signed.set_event_type(self.event_type.as_ref(), request);
        Ok(())
    }

    pub(super) fn verify(
        &self,
        keys: &Keys<'_>,
        req: &Incoming<'_>,
    ) -> Result<Verified, VerifyError> {
        let token = required_header(req.headers, &self.token_header)?;
        let received = Sha256::digest(token.as_bytes());
        let genuine = keys
            .hmac
            .iter()
            .any(|key| ct_eq(&Sha256::digest(key), &received));
        if !genuine {
            return Err(VerifyError::InvalidSignature);
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
