//! Providers' handshakes: the requests a provider sends to prove that an endpoint is its own
//! before (or besides) sending events, recognised and answered exactly as each provider
//! requires. Pure: the caller authenticates the request first where the provider signs it, and
//! a handshake is never stored as a delivery.

use http::HeaderMap;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use crate::secret::Secret;
use crate::Incoming;

/// Which handshakes a source answers: its preset's [`Preset::handshake`](crate::presets::Preset::handshake).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Handshake {
    /// Slack: `url_verification` (Events API) and `ssl_check` (slash commands).
    Slack,
    /// Zoom: `endpoint.url_validation`.
    Zoom,
    /// Twitch EventSub: `webhook_callback_verification`, and `revocation` notices.
    Twitch,
    /// Meta (WhatsApp, Messenger, Instagram): `GET ?hub.mode=subscribe&hub.verify_token=…`,
    /// compared in constant time with the source's verify token ([`Secret::verify_token`],
    /// among its secrets); without one, every subscription request is refused.
    Meta,
    /// Discord interactions: `PING` (type 1).
    Discord,
}

/// A handshake found in a request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Challenge {
    /// Slack's `{"type":"url_verification","challenge":…}`.
    SlackUrlVerification {
        /// Echoed back.
        challenge: String,
    },
    /// Slack's `ssl_check=1` form post.
    SlackSslCheck,
    /// Zoom's `endpoint.url_validation` with `payload.plainToken`.
    ZoomUrlValidation {
        /// Returned with its HMAC.
        plain_token: String,
    },
    /// Twitch's `webhook_callback_verification` with `challenge`.
    TwitchVerification {
        /// Echoed back.
        challenge: String,
    },
    /// Twitch's notice that a subscription was revoked.
    TwitchRevocation {
        /// `subscription.type`, for the log.
        subscription_type: Option<String>,
        /// `subscription.status` (the reason), for the log.
        reason: Option<String>,
    },
    /// Meta's subscription request.
    MetaSubscribe {
        /// `hub.verify_token`.
        verify_token: String,
        /// `hub.challenge`, echoed back.
        challenge: String,
    },
    /// Discord's `{"type":1}`.
    DiscordPing,
}

/// Longest challenge echoed back; providers send a few dozen characters.
const MAX_CHALLENGE_LEN: usize = 1024;

impl Challenge {
    /// Its name in logs and metrics (the delivery line's event type).
    pub fn name(&self) -> &'static str {
        match self {
            Challenge::SlackUrlVerification { .. } => "url_verification",
            Challenge::SlackSslCheck => "ssl_check",
            Challenge::ZoomUrlValidation { .. } => "endpoint.url_validation",
            Challenge::TwitchVerification { .. } => "webhook_callback_verification",
            Challenge::TwitchRevocation { .. } => "revocation",
            Challenge::MetaSubscribe { .. } => "subscribe",
            Challenge::DiscordPing => "ping",
        }
    }

    /// Whether the request must be authenticated first. Every signed handshake is; Slack's
    /// `ssl_check` is answered as Slack's own framework does, without a signature (the answer
    /// is empty and nothing is stored), and Meta's subscription is proved by its verify token.
    pub fn needs_signature(&self) -> bool {
        !matches!(
            self,
            Challenge::SlackSslCheck | Challenge::MetaSubscribe { .. }
        )
    }
}

/// The exact answer to a handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`, when there is a body.
    pub content_type: Option<&'static str>,
    /// The body.
    pub body: String,
    /// The outcome in logs and metrics: `handshake`, `revoked` or `handshake_refused`.
    pub outcome: &'static str,
}

/// The handshake in `req`, if it is one for `handshake`. Never fails: anything else is `None`
/// and goes on as a delivery (or, for a GET, is refused by the caller).
pub fn detect(handshake: &Handshake, req: &Incoming<'_>) -> Option<Challenge> {
    let json = || serde_json::from_slice::<serde_json::Value>(req.body).ok();
    let text = |v: &serde_json::Value, pointer: &str| -> Option<String> {
        let s = v.pointer(pointer)?.as_str()?;
        (!s.is_empty() && s.len() <= MAX_CHALLENGE_LEN).then(|| s.to_owned())
    };
    match handshake {
        _ if req.method == "GET" => match handshake {
            Handshake::Meta => meta_subscribe(req.query),
            _ => None,
        },
        Handshake::Slack => {
            if is_form(req.headers) {
                let ssl_check =
                    form_urlencoded::parse(req.body).any(|(k, v)| k == "ssl_check" && v == "1");
                return ssl_check.then_some(Challenge::SlackSslCheck);
            }
            let v = json()?;
            (v["type"] == "url_verification").then_some(())?;
            Some(Challenge::SlackUrlVerification {
                challenge: text(&v, "/challenge")?,
            })
        }
        Handshake::Zoom => {
            let v = json()?;
            (v["event"] == "endpoint.url_validation").then_some(())?;
            Some(Challenge::ZoomUrlValidation {
                plain_token: text(&v, "/payload/plainToken")?,
            })
        }
        Handshake::Twitch => {
            let kind = req
                .headers
                .get("twitch-eventsub-message-type")?
                .to_str()
                .ok()?;
            match kind {
                "webhook_callback_verification" => Some(Challenge::TwitchVerification {
                    challenge: text(&json()?, "/challenge")?,
                }),
                // The message-type header is not signed: only a body shaped like a revocation
                // makes one, so a notification re-sent with the header rewritten is not taken
                // for a revoked subscription (it goes on as a delivery, a duplicate).
                "revocation" => {
                    let v = json()?;
                    is_revocation(&v).then(|| Challenge::TwitchRevocation {
                        subscription_type: text(&v, "/subscription/type"),
                        reason: text(&v, "/subscription/status"),
                    })
                }
                _ => None,
            }
        }
        Handshake::Meta => None,
        Handshake::Discord => {
            let v = json()?;
            (v["type"] == 1).then_some(Challenge::DiscordPing)
        }
    }
}

/// Twitch's revocation body: a `subscription` with a type and a status saying why it ended
/// (`authorization_revoked`, `user_removed`, `notification_failures_exceeded`,
/// `version_removed`…), and no event or challenge, which a notification or a verification has.
fn is_revocation(v: &serde_json::Value) -> bool {
    let status = v.pointer("/subscription/status").and_then(|s| s.as_str());
    let kind = v.pointer("/subscription/type").and_then(|s| s.as_str());
    let ended = status.is_some_and(|s| {
        !s.is_empty() && s != "enabled" && s != "webhook_callback_verification_pending"
    });
    ended
        && kind.is_some_and(|k| !k.is_empty())
        && ["event", "events", "challenge"]
            .iter()
            .all(|key| v.get(key).is_none())
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
        })
}

fn meta_subscribe(query: &str) -> Option<Challenge> {
    let mut mode = None;
    let mut verify_token = None;
    let mut challenge = None;
    for (k, v) in form_urlencoded::parse(query.as_bytes()).take(64) {
        match k.as_ref() {
            "hub.mode" => mode = Some(v.into_owned()),
            "hub.verify_token" => verify_token = Some(v.into_owned()),
            "hub.challenge" => challenge = Some(v.into_owned()),
            _ => {}
        }
    }
    let challenge = challenge.filter(|c| !c.is_empty() && c.len() <= MAX_CHALLENGE_LEN)?;
    (mode.as_deref() == Some("subscribe")).then_some(Challenge::MetaSubscribe {
        verify_token: verify_token.unwrap_or_default(),
        challenge,
    })
}

/// The answer to `challenge`, as its provider requires. `secrets` are the source's, newest
/// first: Zoom's answer is an HMAC under the newest key; Meta's compares the verify token.
pub fn answer(challenge: &Challenge, handshake: &Handshake, secrets: &[Secret]) -> Response {
    let plain = |body: &str| Response {
        status: 200,
        content_type: Some("text/plain"),
        body: body.to_owned(),
        outcome: "handshake",
    };
    match challenge {
        // Slack accepts the challenge as plain text, form or JSON; plain text is the simplest.
        Challenge::SlackUrlVerification { challenge } => plain(challenge),
        Challenge::SlackSslCheck => Response {
            status: 200,
            content_type: None,
            body: String::new(),
            outcome: "handshake",
        },
        Challenge::ZoomUrlValidation { plain_token } => {
            let key = secrets
                .iter()
                .find(|s| !s.expose().is_empty() && s.is_key());
            let encrypted = key.map(|key| zoom_encrypted_token(key, plain_token));
            Response {
                status: 200,
                content_type: Some("application/json"),
                body: serde_json::json!({
                    "plainToken": plain_token,
                    "encryptedToken": encrypted.unwrap_or_default(),
                })
                .to_string(),
                outcome: "handshake",
            }
        }
        // Twitch requires the raw challenge, as text/plain.
        Challenge::TwitchVerification { challenge } => plain(challenge),
        Challenge::TwitchRevocation { .. } => Response {
            status: 204,
            content_type: None,
            body: String::new(),
            outcome: "revoked",
        },
        Challenge::MetaSubscribe {
            verify_token,
            challenge,
        } => {
            let expected = match handshake {
                Handshake::Meta => secrets.iter().find(|s| s.is_verify_token()),
                _ => None,
            };
            // Hashed first, so neither the content nor the length of the token shows in time.
            let matches = expected.is_some_and(|expected| {
                bool::from(
                    Sha256::digest(expected.expose())
                        .ct_eq(&Sha256::digest(verify_token.as_bytes())),
                )
            });
            if matches {
                plain(challenge)
            } else {
                Response {
                    status: 403,
                    content_type: Some("application/json"),
                    body: serde_json::json!({
                        "status": "forbidden",
                        "error": "verify token does not match",
                    })
                    .to_string(),
                    outcome: "handshake_refused",
                }
            }
        }
        Challenge::DiscordPing => Response {
            status: 200,
            content_type: Some("application/json"),
            body: r#"{"type":1}"#.to_owned(),
            outcome: "handshake",
        },
    }
}

/// Zoom's `encryptedToken`: the hex HMAC-SHA256 of the plain token under the secret token.
fn zoom_encrypted_token(key: &Secret, plain_token: &str) -> String {
    use hmac::Mac as _;
    let mut mac = match hmac::Hmac::<Sha256>::new_from_slice(key.expose()) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(plain_token.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests;
