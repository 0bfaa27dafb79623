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

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac as _};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::processor::{Delivery, ProcessError, Processor};
use crate::secret::Secret;
use crate::work::Work;

/// The header carrying the idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Standard Webhooks' id header: the idempotency key.
pub const WEBHOOK_ID: &str = "webhook-id";

/// Standard Webhooks' timestamp header: seconds since the epoch when the call was signed.
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";

/// Standard Webhooks' signature header: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";

/// Forwards deliveries to one URL (`FORWARD_URL`).
pub struct Forwarder {
    url: http::Uri,
    timeout: Duration,
    conflict: ForwardConflict,
    signing: Option<Secret>,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Forwarder {
    /// A forwarder to `url` (http or https; https verified against the system's roots).
    pub fn new(url: http::Uri, timeout: Duration) -> Result<Self, String> {
        let provider = rustls::crypto::ring::default_provider();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(|e| format!("cannot load the system's root certificates: {e}"))?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Forwarder {
            url,
            timeout,
            conflict: ForwardConflict::Retry,
            signing: None,
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    /// Signs every call with `secret` (a `whsec_` Standard Webhooks secret).
    pub fn with_signing(mut self, secret: Secret) -> Self {
        self.signing = Some(secret);
        self
    }

    /// Reads a 409 from the endpoint as `conflict` says (the default is [`ForwardConflict::Retry`]).
    pub fn with_conflict(mut self, conflict: ForwardConflict) -> Self {
        self.conflict = conflict;
        self
    }

    fn request(
        &self,
        d: &Delivery,
        body: Body,
        now: SystemTime,
    ) -> Result<http::Request<Full<Bytes>>, http::Error> {
        let (body, content_type) = match body {
            Body::Payload => (
                Bytes::from(d.payload.clone()),
                d.headers
                    .get("content-type")
                    .map_or("application/json", String::as_str),
            ),
            #[cfg(feature = "destinations")]
            Body::ClaimCheck(json) => (Bytes::from(json), "application/json"),
        };
        let mut req = http::Request::post(self.url.clone())
            .header(http::header::CONTENT_TYPE, content_type)
            .header(IDEMPOTENCY_KEY, d.idempotency_key())
            .header("x-hookclaim-source", &d.source)
            .header("x-hookclaim-attempt", d.attempt.to_string());
        // Ids and types are visible ASCII for every provider; anything else is left out rather
        // than failing the delivery.
        if let Ok(v) = http::HeaderValue::from_str(&d.delivery_id) {
            req = req.header("x-hookclaim-delivery-id", v);
        }
        if let Some(Ok(v)) = d.event_type.as_deref().map(http::HeaderValue::from_str) {
            req = req.header("x-hookclaim-event-type", v);
        }
        if let Some(secret) = &self.signing {
            let id = d.idempotency_key();
            let timestamp = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
            req = req
                .header(WEBHOOK_SIGNATURE, sign(secret, &id, timestamp, &body))
                .header(WEBHOOK_ID, id)
                .header(WEBHOOK_TIMESTAMP, timestamp.to_string());
        }
        req.body(Full::new(body))
    }

    /// Posts `body` for `d`, within the timeout: the endpoint's status, or why there is none.
    pub(crate) async fn post(&self, d: &Delivery, body: Body) -> Result<http::StatusCode, Outcome> {
        let req = self
            .request(d, body, SystemTime::now())
            .map_err(|e| Outcome::Permanent(format!("cannot build the request: {e}")))?;
        let call = async {
            let resp = self.client.request(req).await?;
            let status = resp.status();
            // Read the answer to the end so the connection can be reused.
            let _ = resp.into_body().collect().await;
            Ok::<_, hyper_util::client::legacy::Error>(status)
        };
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(Outcome::Retry("forward endpoint timed out".into())),
            Ok(Err(e)) => Err(Outcome::Retry(format!("forward failed: {e}"))),
            Ok(Ok(status)) => Ok(status),
        }
    }

    /// How this forwarder reads an endpoint's status.
    pub(crate) fn outcome(&self, status: http::StatusCode) -> Outcome {
        outcome_of(status, self.conflict)
    }
}

/// The `webhook-signature` value for a call: `v1,` and the base64 HMAC-SHA256 of
/// `"{id}.{timestamp}.{body}"` under the secret's bytes, as the Standard Webhooks specification
/// has a sender sign.
pub fn sign(secret: &Secret, id: &str, timestamp: u64, body: &[u8]) -> String {
    // HMAC takes a key of any length: this never falls back to the empty key.
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.expose())
        .unwrap_or_else(|_| Hmac::<sha2::Sha256>::new(&Default::default()));
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(tag))
}

/// What a call carries.
pub(crate) enum Body {
    /// The delivery's payload, with its content type.
    Payload,
    /// A JSON claim check standing in for it.
    #[cfg(feature = "destinations")]
    ClaimCheck(String),
}

/// How an endpoint's answer, or its absence, is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Taken.
    Done,
    /// Worth trying again later.
    Retry(String),
    /// Never accepted.
    Permanent(String),
}

impl Outcome {
    /// The processor's result for it.
    fn into_result(self) -> Result<(), ProcessError> {
        match self {
            Outcome::Done => Ok(()),
            Outcome::Retry(why) => Err(ProcessError::new(why)),
            Outcome::Permanent(why) => Err(ProcessError::permanent(why)),
        }
    }
}

/// What a 409 ForwardConflict from the endpoint means (`FORWARD_CONFLICT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardConflict {
    /// A request with this key is still being processed (Stripe-style APIs): try again later.
    Retry,
    /// A request with this key was already done: the delivery is done.
    Done,
}

/// How the endpoint's answer is read: 2xx is done; 409 as `conflict` says; 408, 429 and 5xx are
/// worth retrying; any other 4xx will never succeed.
pub(crate) fn outcome_of(status: http::StatusCode, conflict: ForwardConflict) -> Outcome {
    match (status.as_u16(), conflict) {
        (200..=299, _) | (409, ForwardConflict::Done) => Outcome::Done,
        (408 | 409 | 429 | 500..=599, _) => {
            Outcome::Retry(format!("forward endpoint answered {status}"))
        }
        _ => Outcome::Permanent(format!("forward endpoint answered {status}")),
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
        match self.post(delivery, Body::Payload).await {
            Ok(status) => self.outcome(status),
            Err(outcome) => outcome,
        }
        .into_result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_answers_map_to_outcomes() {
        let status = |s: u16| http::StatusCode::from_u16(s).unwrap();
        let retry = |o: Outcome| matches!(o, Outcome::Retry(_));
        let permanent = |o: Outcome| matches!(o, Outcome::Permanent(_));
        for conflict in [ForwardConflict::Retry, ForwardConflict::Done] {
            for s in [200, 201, 204] {
                assert_eq!(outcome_of(status(s), conflict), Outcome::Done, "{s}");
            }
            for s in [408, 429, 500, 502, 503] {
                assert!(retry(outcome_of(status(s), conflict)), "{s}");
            }
            for s in [400, 401, 403, 404, 410, 422] {
                assert!(permanent(outcome_of(status(s), conflict)), "{s}");
            }
        }
        // A 409 means "in flight with this key" unless configured to mean "already done".
        assert!(retry(outcome_of(status(409), ForwardConflict::Retry)));
        assert_eq!(outcome_of(status(409), ForwardConflict::Done), Outcome::Done);
    }
}
