//! An HTTP endpoint: the forwarder's POST, always signed with Standard Webhooks headers
//! (`webhook-id` is the idempotency key), so the receiver verifies it with any Standard Webhooks
//! library and deduplicates on `webhook-id`.

use std::time::Duration;

use bytes::Bytes;

use super::{claim_check, DestinationError, Stand};
use crate::keyed::{Answer, ClientError, ForwardConflict, KeyedClient};
use crate::processor::Delivery;
use crate::secret::Secret;

/// One endpoint.
pub(super) struct Http(KeyedClient);

impl Http {
    pub(super) fn new(
        url: http::Uri,
        secret: Secret,
        conflict_is_done: bool,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let conflict = match conflict_is_done {
            true => ForwardConflict::Done,
            false => ForwardConflict::Retry,
        };
        let client = KeyedClient::new(url, timeout)?
            .with_conflict(conflict)
            .with_signing(secret);
        Ok(Http(client))
    }

    /// Posts `d` (the payload, or a claim check above `max_bytes`); the status it answered.
    pub(super) async fn send(
        &self,
        d: &Delivery,
        max_bytes: Option<usize>,
    ) -> Result<Option<String>, DestinationError> {
        let (body, content_type) = match max_bytes {
            Some(most) if d.payload.len() > most => (
                Bytes::from(claim_check(d, Stand::TooLarge)),
                "application/json",
            ),
            _ => (
                Bytes::from(d.payload.clone()),
                d.headers
                    .get("content-type")
                    .map_or("application/json", String::as_str),
            ),
        };
        match self.0.post(d, body, content_type).await {
            Answer::Done(status) => Ok(Some(format!("HTTP {}", status.as_u16()))),
            Answer::Defer { why, after } => Err(DestinationError::Defer(why, after)),
            Answer::Retry { why, after: None } => Err(DestinationError::Retry(why)),
            Answer::Retry {
                why,
                after: Some(after),
            } => Err(DestinationError::RetryIn(why, after)),
            Answer::Permanent(why) => Err(DestinationError::Permanent(why)),
        }
    }
}
