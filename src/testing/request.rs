//! Signed requests for the harness's webhook (the `testing` feature): a request to
//! `POST /webhooks/{source}` as API Gateway's HTTP API (payload format 2.0) delivers it to the
//! function, with the headers the source's sender sends, signed by hookclaim-verify's signer
//! with the source's configured secret.

use std::time::{SystemTime, UNIX_EPOCH};

use lambda_http::Request;
use serde_json::json;

use super::SigningKey;
use super::{Harness, HarnessError};
use crate::processor::Processor;
use crate::verify::{sign, Outgoing};

/// A request to the harness's [`Webhook`](crate::Webhook) from one source's sender, made by
/// [`Harness::request`]; [`RequestBuilder::build`] signs it.
///
/// ```no_run
/// # use hookclaim::testing::Harness;
/// # async fn test(harness: Harness<hookclaim::StoreOnly>) -> Result<(), Box<dyn std::error::Error>> {
/// let request = harness
///     .request("github")
///     .id("72d3162e-cc78-11e3-81ab-4c9367dc0958")
///     .event_type("push")
///     .body(r#"{"ref":"refs/heads/main"}"#)
///     .build()?;
/// let response = harness.webhook().handle(request).await;
/// assert_eq!(response.status(), 200);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RequestBuilder<'h> {
    source: String,
    key: Result<SigningKey, String>,
    scheme: Option<&'h crate::verify::Scheme>,
    body: Vec<u8>,
    id: Option<String>,
    event_type: Option<String>,
    headers: Vec<(String, String)>,
    at: SystemTime,
}

impl<P: Processor> Harness<P> {
    /// A request from `source`'s sender, signed with the source's first configured secret (as
    /// the builder's [`secrets`](super::HarnessBuilder::secrets) gives it) when built. A JSON
    /// `Content-Type` by default, sent now.
    pub fn request(&self, source: &str) -> RequestBuilder<'_> {
        let scheme = self.config.sources.get(source).map(|s| &s.scheme);
        let key = match (scheme, self.secrets.texts(source).and_then(|t| t.first())) {
            (None, _) => Err("not configured in HOOKCLAIM_SOURCES".to_owned()),
            (Some(_), None) => Err("no secret in HOOKCLAIM_SECRETS".to_owned()),
            (Some(scheme), Some(text)) => {
                SigningKey::parse(text, scheme.secret_format()).map_err(|e| e.to_string())
            }
        };
        RequestBuilder {
            source: source.to_owned(),
            key,
            scheme,
            body: Vec::new(),
            id: None,
            event_type: None,
            headers: vec![("content-type".into(), "application/json".into())],
            at: SystemTime::now(),
        }
    }
}

impl RequestBuilder<'_> {
    /// The body, sent and signed as these exact bytes.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The delivery id, for schemes that carry it in a header (`X-GitHub-Delivery`,
    /// `webhook-id`…); schemes that read it from the body take the body's.
    pub fn id(mut self, id: &str) -> Self {
        self.id = Some(id.to_owned());
        self
    }

    /// The event type, for schemes that carry it in a header (`X-GitHub-Event`…).
    pub fn event_type(mut self, event_type: &str) -> Self {
        self.event_type = Some(event_type.to_owned());
        self
    }

    /// A header of the request's own, sent (and signed where the scheme signs it) as given;
    /// replaces one of the same name.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Signed at `at` rather than now: a timestamp the webhook refuses as too old, say.
    pub fn signed_at(mut self, at: SystemTime) -> Self {
        self.at = at;
        self
    }

    /// Signs with `key` instead of the configured secret: an Ed25519 source's private key (its
    /// configured secret is the public key), or a wrong key for a request to be refused.
    pub fn signing_key(mut self, key: SigningKey) -> Self {
        self.key = Ok(key);
        self
    }

    /// The signed request, as the Lambda runtime hands an API Gateway HTTP API event to the
    /// function: `POST /webhooks/{source}` with the `source` path parameter.
    pub fn build(self) -> Result<Request, HarnessError> {
        let refused = |problem: String| HarnessError::Sign {
            name: self.source.clone(),
            problem,
        };
        let Some(scheme) = self.scheme else {
            return Err(refused("not configured in HOOKCLAIM_SOURCES".into()));
        };
        let key = self.key.clone().map_err(refused)?;
        let at_ms = self
            .at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut outgoing = Outgoing::new(&self.body, at_ms / 1000).at_millis(at_ms);
        for (name, value) in &self.headers {
            outgoing = outgoing.header(name, value);
        }
        if let Some(id) = &self.id {
            outgoing = outgoing.id(id);
        }
        if let Some(event_type) = &self.event_type {
            outgoing = outgoing.event_type(event_type);
        }
        let signed = sign(scheme, &[key], &outgoing).map_err(|e| refused(e.to_string()))?;
        let headers: serde_json::Map<String, serde_json::Value> = signed
            .headers()
            .iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), json!(value)))
            .collect();
        let path = format!("/webhooks/{}", self.source);
        let (body, base64) = match std::str::from_utf8(&self.body) {
            Ok(text) => (text.to_owned(), false),
            Err(_) => {
                use base64::Engine as _;
                let encoded = base64::engine::general_purpose::STANDARD.encode(&self.body);
                (encoded, true)
            }
        };
        let event = json!({
            "version": "2.0",
            "routeKey": "POST /webhooks/{source}",
            "rawPath": path,
            "rawQueryString": signed.query(),
            "headers": headers,
            "pathParameters": {"source": self.source},
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "hookclaim-testing",
                "domainName": "hookclaim-testing.execute-api.us-east-1.amazonaws.com",
                "domainPrefix": "hookclaim-testing",
                "http": {
                    "method": "POST",
                    "path": path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                    "userAgent": "hookclaim-testing",
                },
                "requestId": "hookclaim-testing",
                "routeKey": "POST /webhooks/{source}",
                "stage": "$default",
                "time": "01/Jan/2026:00:00:00 +0000",
                "timeEpoch": at_ms,
            },
            "body": body,
            "isBase64Encoded": base64,
        });
        lambda_http::request::from_str(&event.to_string())
            .map_err(|e| refused(format!("the event does not parse: {e}")))
    }
}
