//! An HTTP endpoint: the forwarder's POST, always signed with Standard Webhooks headers
//! (`webhook-id` is the idempotency key), so the receiver verifies it with any Standard Webhooks
//! library and deduplicates on `webhook-id`.

use std::time::Duration;

use super::{claim_check, DestinationError, Stand};
use crate::forward::{Body, ForwardConflict, Forwarder, Outcome};
use crate::processor::{BoxError, Delivery};
use crate::secret::Secret;

/// One endpoint.
pub(super) struct Http(Forwarder);

impl Http {
    pub(super) fn new(
        url: http::Uri,
        secret: Secret,
        conflict_is_done: bool,
        timeout: Duration,
    ) -> Result<Self, BoxError> {
        let conflict = match conflict_is_done {
            true => ForwardConflict::Done,
            false => ForwardConflict::Retry,
        };
        let forwarder = Forwarder::new(url, timeout)?
            .with_conflict(conflict)
            .with_signing(secret);
        Ok(Http(forwarder))
    }

    /// Posts `d` (the payload, or a claim check above `max_bytes`); the status it answered.
    pub(super) async fn send(
        &self,
        d: &Delivery,
        max_bytes: Option<usize>,
    ) -> Result<Option<String>, DestinationError> {
        let body = match max_bytes {
            Some(most) if d.payload.len() > most => {
                Body::ClaimCheck(claim_check(d, Stand::TooLarge))
            }
            _ => Body::Payload,
        };
        let status = self.0.post(d, body).await.map_err(failure)?;
        match self.0.outcome(status) {
            Outcome::Done => Ok(Some(format!("HTTP {}", status.as_u16()))),
            other => Err(failure(other)),
        }
    }
}

/// A forwarder's failure as a destination's: `Done` never comes here.
fn failure(outcome: Outcome) -> DestinationError {
    match outcome {
        Outcome::Permanent(why) => DestinationError::Permanent(why),
        Outcome::Retry(why) => DestinationError::Retry(why),
        Outcome::Done => DestinationError::Retry("the endpoint's answer was not read".into()),
    }
}
