//! A keyed HTTP call ([`KeyedHttp`]): one POST for one delivery, carrying the delivery's idempotency key (and,
//! with a signing secret, Standard Webhooks headers whose `webhook-id` is that key), made within
//! a timeout, and the endpoint's answer read as done, worth a retry (when, if it says) or never
//! accepted. The forwarder and the HTTP destination both call through it, and a processor's own
//! calls are made the same way.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac as _};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::processor::{Delivery, ProcessError};
use crate::secret::Secret;

/// The header carrying the idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Standard Webhooks' id header: the idempotency key.
pub const WEBHOOK_ID: &str = "webhook-id";

/// Standard Webhooks' timestamp header: seconds since the epoch when the call was signed.
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";

/// Standard Webhooks' signature header: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";

/// Why an HTTP client could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The system's root certificates, which HTTPS calls are verified against, are unreadable.
    #[error("cannot load the system's root certificates: {0}")]
    RootCertificates(#[source] std::io::Error),
}

/// What a 409 Conflict from the endpoint means (`FORWARD_CONFLICT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardConflict {
    /// A request with this key is still being processed (Stripe-style APIs): try again later.
    Retry,
    /// A request with this key was already done: the delivery is done.
    Done,
}

/// An endpoint answer, or its absence, as the delivery's outcome reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Taken, with this status.
    Done(http::StatusCode),
    /// Throttled: a 429, or a 503 with `Retry-After`, no sooner than that. Nothing was wrong
    /// with the delivery.
    Defer {
        /// What happened, for the attempt's recorded error.
        why: String,
        /// The endpoint's `Retry-After`.
        after: Duration,
    },
    /// Worth trying again later: no answer, 408, 5xx (and 409 unless it means done).
    Retry {
        /// What happened, for the attempt's recorded error.
        why: String,
        /// The endpoint's own `Retry-After`, when it gave one in seconds.
        after: Option<Duration>,
    },
    /// Never accepted: any other 4xx, or a request that cannot be built.
    Permanent(String),
}

impl Answer {
    /// The answer as a processor's result: done with the status, or the [`ProcessError`] that
    /// says when to try again.
    pub(crate) fn into_result(self) -> Result<http::StatusCode, ProcessError> {
        match self {
            Answer::Done(status) => Ok(status),
            Answer::Defer { why, after } => Err(ProcessError::defer(why, after)),
            Answer::Retry { why, after: None } => Err(ProcessError::new(why)),
            Answer::Retry {
                why,
                after: Some(after),
            } => Err(ProcessError::retry_in(why, after)),
            Answer::Permanent(why) => Err(ProcessError::permanent(why)),
        }
    }
}

/// How long a 429 without `Retry-After` is deferred: throttling, for an unsaid time.
pub(crate) const THROTTLED_WAIT: Duration = Duration::from_secs(60);

/// The bound on one call unless [`KeyedHttp::with_timeout`] says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Kept back from the processing's time left, so that a call that runs out of it still
/// returns an answer to record.
const CALL_RESERVE: Duration = Duration::from_millis(100);

/// The keyed HTTP call for a processor's own calls to other services, the one the shipped
/// forwarder and HTTP destination make: build it once (in `main`, or in the processor's
/// constructor) and call [`KeyedHttp::post`] from `process`.
///
/// Each call carries the delivery's [`Delivery::idempotency_key`] as `Idempotency-Key` (and,
/// with [`KeyedHttp::with_signing`], Standard Webhooks headers whose `webhook-id` is that key),
/// so a repeat after a crash is recognised by the service. It is bounded by its timeout and by
/// the time the invocation has left for processing. The answer is read for you:
///
/// | the service answers | `post` returns |
/// |---|---|
/// | 2xx | `Ok(status)` |
/// | 429, or 503 with `Retry-After` (seconds) | [`ProcessError::defer`] to its `Retry-After` (a minute when a 429 has none): no attempt spent |
/// | 408 or 5xx otherwise, no answer in time, a connection error | a retry ([`ProcessError::retry_in`] with its `Retry-After`, else the policy's backoff) |
/// | 409 | a retry, or `Ok` with [`ForwardConflict::Done`] |
/// | any other 4xx, a URL that does not parse | [`ProcessError::permanent`] |
#[derive(Clone)]
pub struct KeyedHttp {
    timeout: Duration,
    conflict: ForwardConflict,
    signing: Option<Secret>,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for KeyedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedHttp")
            .field("timeout", &self.timeout)
            .field("conflict", &self.conflict)
            .field("signing", &self.signing.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

impl KeyedHttp {
    /// A client for http and https URLs (https verified against the system's roots), each call
    /// bounded by 5 seconds.
    pub fn new() -> Result<Self, ClientError> {
        let provider = rustls::crypto::ring::default_provider();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(ClientError::RootCertificates)?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(KeyedHttp {
            timeout: DEFAULT_TIMEOUT,
            conflict: ForwardConflict::Retry,
            signing: None,
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    /// Bounds each call by `timeout` (and, always, by the invocation's time left).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Signs every call with `secret` (a `whsec_` Standard Webhooks secret).
    pub fn with_signing(mut self, secret: Secret) -> Self {
        self.signing = Some(secret);
        self
    }

    /// Reads a 409 as `conflict` says (the default is [`ForwardConflict::Retry`]).
    pub fn with_conflict(mut self, conflict: ForwardConflict) -> Self {
        self.conflict = conflict;
        self
    }

    /// POSTs `body` as JSON to `url` for `delivery`, keyed by its idempotency key, and reads
    /// the answer (see [`KeyedHttp`]): the 2xx status, or the error that says when to try again.
    pub async fn post(
        &self,
        url: &str,
        delivery: &Delivery,
        body: impl Into<Bytes>,
    ) -> Result<http::StatusCode, ProcessError> {
        self.post_as(url, delivery, body, "application/json")
            .await
    }

    /// [`KeyedHttp::post`] with a body of `content_type`.
    pub async fn post_as(
        &self,
        url: &str,
        delivery: &Delivery,
        body: impl Into<Bytes>,
        content_type: &str,
    ) -> Result<http::StatusCode, ProcessError> {
        let answer = match http::Uri::try_from(url) {
            Ok(url) => self.call(&url, delivery, body.into(), content_type).await,
            Err(e) => Answer::Permanent(format!("cannot call {url:?}: {e}")),
        };
        answer.into_result()
    }

    /// Posts `body` (of `content_type`) to `url` for `d` within the timeout, and reads the
    /// answer.
    pub(crate) async fn call(
        &self,
        url: &http::Uri,
        d: &Delivery,
        body: Bytes,
        content_type: &str,
    ) -> Answer {
        let req = match self.request(url, d, body, content_type, SystemTime::now()) {
            Ok(req) => req,
            Err(e) => return Answer::Permanent(format!("cannot build the request: {e}")),
        };
        let call = async {
            let resp = self.client.request(req).await?;
            let status = resp.status();
            let after = retry_after(resp.headers());
            // Read the answer to the end so the connection can be reused.
            let _ = resp.into_body().collect().await;
            Ok::<_, hyper_util::client::legacy::Error>((status, after))
        };
        let timeout = match crate::invocation::processing_time_left() {
            Some(left) => self.timeout.min(left.saturating_sub(CALL_RESERVE)),
            None => self.timeout,
        };
        match tokio::time::timeout(timeout, call).await {
            Err(_) => Answer::Retry {
                why: format!("{} gave no answer within {} ms", host(url), timeout.as_millis()),
                after: None,
            },
            Ok(Err(e)) => Answer::Retry {
                why: format!("calling {} failed: {e}", host(url)),
                after: None,
            },
            Ok(Ok((status, after))) => classify(status, after, self.conflict),
        }
    }

    fn request(
        &self,
        url: &http::Uri,
        d: &Delivery,
        body: Bytes,
        content_type: &str,
        now: SystemTime,
    ) -> Result<http::Request<Full<Bytes>>, http::Error> {
        let mut req = http::Request::post(url.clone())
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
}

/// The URL's host, for an error text (never its path or query, which may hold a token).
fn host(url: &http::Uri) -> &str {
    url.host().unwrap_or("the endpoint")
}

/// A keyed client for one URL: what the forwarder and the HTTP destination hold.
pub(crate) struct KeyedClient {
    url: http::Uri,
    http: KeyedHttp,
}

impl KeyedClient {
    /// A client for `url` (http or https; https verified against the system's roots).
    pub(crate) fn new(url: http::Uri, timeout: Duration) -> Result<Self, ClientError> {
        Ok(KeyedClient {
            url,
            http: KeyedHttp::new()?.with_timeout(timeout),
        })
    }

    /// Signs every call with `secret` (a `whsec_` Standard Webhooks secret).
    pub(crate) fn with_signing(mut self, secret: Secret) -> Self {
        self.http = self.http.with_signing(secret);
        self
    }

    /// Reads a 409 as `conflict` says.
    pub(crate) fn with_conflict(mut self, conflict: ForwardConflict) -> Self {
        self.http = self.http.with_conflict(conflict);
        self
    }

    /// Posts `body` (of `content_type`) for `d`, and reads the answer.
    pub(crate) async fn post(&self, d: &Delivery, body: Bytes, content_type: &str) -> Answer {
        self.http.call(&self.url, d, body, content_type).await
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

/// How an endpoint's status is read: 2xx is done; 409 as `conflict` says; 429, and 503 with a
/// `Retry-After`, are throttling, deferred to `after` ([`THROTTLED_WAIT`] when a 429 says
/// nothing); 408 and 5xx otherwise are worth retrying (no sooner than the endpoint's `after`,
/// when it said); any other 4xx will never succeed.
pub(crate) fn classify(
    status: http::StatusCode,
    after: Option<Duration>,
    conflict: ForwardConflict,
) -> Answer {
    match (status.as_u16(), conflict, after) {
        (200..=299, _, _) | (409, ForwardConflict::Done, _) => Answer::Done(status),
        (429, _, after) | (503, _, after @ Some(_)) => Answer::Defer {
            why: format!("endpoint throttled: {status}"),
            after: after.unwrap_or(THROTTLED_WAIT),
        },
        (408 | 409 | 500..=599, _, after) => Answer::Retry {
            why: format!("endpoint answered {status}"),
            after,
        },
        _ => Answer::Permanent(format!("endpoint answered {status}")),
    }
}

/// A `Retry-After` given in seconds (the HTTP-date form is left to the retry policy).
fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_answers_map_to_outcomes() {
        let status = |s: u16| http::StatusCode::from_u16(s).unwrap();
        let retry = |a: Answer| matches!(a, Answer::Retry { .. });
        let permanent = |a: Answer| matches!(a, Answer::Permanent(_));
        for conflict in [ForwardConflict::Retry, ForwardConflict::Done] {
            for s in [200, 201, 204] {
                assert_eq!(classify(status(s), None, conflict), Answer::Done(status(s)));
            }
            for s in [408, 500, 502, 503] {
                assert!(retry(classify(status(s), None, conflict)), "{s}");
            }
            // A 429 is throttling, whether it says for how long or not.
            assert_eq!(
                classify(status(429), None, conflict),
                Answer::Defer {
                    why: "endpoint throttled: 429 Too Many Requests".into(),
                    after: THROTTLED_WAIT
                }
            );
            for s in [400, 401, 403, 404, 410, 422] {
                assert!(permanent(classify(status(s), None, conflict)), "{s}");
            }
        }
        // A 409 means "in flight with this key" unless configured to mean "already done".
        assert!(retry(classify(status(409), None, ForwardConflict::Retry)));
        assert_eq!(
            classify(status(409), None, ForwardConflict::Done),
            Answer::Done(status(409))
        );
        // A throttling endpoint's own wait defers; a server error's is kept for a counted
        // retry; a permanent refusal has none.
        let minute = Some(Duration::from_secs(60));
        for s in [429, 503] {
            assert!(matches!(
                classify(status(s), minute, ForwardConflict::Retry),
                Answer::Defer { after, .. } if Some(after) == minute
            ));
        }
        assert!(matches!(
            classify(status(502), minute, ForwardConflict::Retry),
            Answer::Retry { after, .. } if after == minute
        ));
        assert!(permanent(classify(status(400), minute, ForwardConflict::Retry)));
    }

    #[test]
    fn retry_after_is_read_in_seconds_only() {
        let headers = |v: &'static str| {
            let mut h = http::HeaderMap::new();
            h.insert(http::header::RETRY_AFTER, http::HeaderValue::from_static(v));
            h
        };
        assert_eq!(retry_after(&headers("120")), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(&headers(" 5 ")), Some(Duration::from_secs(5)));
        assert_eq!(retry_after(&headers("Wed, 21 Oct 2026 07:28:00 GMT")), None);
        assert_eq!(retry_after(&http::HeaderMap::new()), None);
    }
}
