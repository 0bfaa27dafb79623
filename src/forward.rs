//! A shipped processor for Strategy B: forward each verified delivery to an HTTP endpoint of
//! yours (an internal service, a queue gateway), exactly once from that endpoint's point of view.
//!
//! Each call carries an `Idempotency-Key` derived from source and delivery id, the same on every
//! attempt. If the function crashes after the call and before the delivery is finished, the
//! re-drive calls again with the same key, and the endpoint recognises the repeat.
//!
//! With a signing secret, each call is also signed as a Standard Webhooks sender signs
//! (`webhook-id` is the idempotency key), so the endpoint verifies it with any Standard Webhooks
//! library and deduplicates on `webhook-id`.

use std::time::Duration;

use bytes::Bytes;

pub use crate::keyed::{ClientError, ForwardConflict};
use crate::keyed::KeyedClient;
use crate::processor::{Delivery, ProcessError, Processor};
use crate::secret::Secret;
use crate::work::Work;

/// Forwards deliveries to one URL (`FORWARD_URL`).
pub struct Forwarder {
    client: KeyedClient,
}

impl Forwarder {
    /// A forwarder to `url` (http or https; https verified against the system's roots).
    pub fn new(url: http::Uri, timeout: Duration) -> Result<Self, ClientError> {
        Ok(Forwarder {
            client: KeyedClient::new(url, timeout)?,
        })
    }

    /// Signs every call with `secret` (a `whsec_` Standard Webhooks secret).
    pub fn with_signing(mut self, secret: Secret) -> Self {
        self.client = self.client.with_signing(secret);
        self
    }

    /// Reads a 409 from the endpoint as `conflict` says (the default is [`ForwardConflict::Retry`]).
    pub fn with_conflict(mut self, conflict: ForwardConflict) -> Self {
        self.client = self.client.with_conflict(conflict);
        self
    }
}

impl Processor for Forwarder {
    fn name(&self) -> &'static str {
        "forward"
    }

    async fn process(
        &self,
        delivery: &Delivery,
        _work: &mut Work<'_>,
    ) -> Result<(), ProcessError> {
        let content_type = delivery
            .headers
            .get("content-type")
            .map_or("application/json", String::as_str);
        let body = Bytes::from(delivery.payload.clone());
        let answer = self.client.post(delivery, body, content_type).await;
        answer.into_result().map(|_| ())
    }
}
