//! Named presets: each provider's scheme, delivery id, event type and handshake, so that a
//! source is configured with `"kind": "<provider>"` alone (plus a public URL where the provider
//! signs it).

use super::ed25519::Ed25519Scheme;
use super::handshake::Handshake;
use super::locate::{Field, IdLocation};
use super::mac::{Algorithm, SignatureEncoding};
use super::signed::{MessagePart, SignatureFormat, SignedScheme, TimestampFrom, TimestampRule};
use super::timestamp::{TimestampUnit, Tolerance};
use super::token::TokenScheme;
use super::twilio::TwilioScheme;
use super::{Scheme, DEFAULT_TOLERANCE_SECS};

/// One provider's preset.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// The `kind` that selects it.
    pub name: &'static str,
    /// The provider's documentation of its signature.
    pub docs: &'static str,
    /// Whether the provider signs the URL it posts to, so `public_url` must be configured.
    pub needs_public_url: bool,
    /// The tolerance for its signed timestamp, in seconds (the provider's own libraries'
    /// default), or `None` when nothing is timestamped.
    pub default_tolerance_secs: Option<u64>,
    /// The handshake the provider sends besides its events, if any: answered with
    /// [`handshake::detect`](crate::handshake::detect) and
    /// [`handshake::answer`](crate::handshake::answer), never stored as a delivery.
    pub handshake: Option<Handshake>,
    build: fn(u64, &str) -> Scheme,
}

impl Preset {
    /// The scheme with a tolerance (`None`: the default) and a public URL (ignored by presets
    /// that sign no URL).
    pub fn scheme(&self, tolerance_secs: Option<u64>, public_url: &str) -> Scheme {
        let tolerance = tolerance_secs
            .or(self.default_tolerance_secs)
            .unwrap_or(DEFAULT_TOLERANCE_SECS);
        (self.build)(tolerance, public_url)
    }
}

/// The preset named `name`, if there is one.
pub fn lookup(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

fn text(s: &str) -> MessagePart {
    MessagePart::Text(s.to_owned())
}

fn header(s: &str) -> String {
    s.to_owned()
}

/// A body HMAC behind a prefix, with no timestamp: Bitbucket, Meta, Intercom.
fn body_mac(
    algorithm: Algorithm,
    signature_header: &str,
    encoding: SignatureEncoding,
    prefix: &str,
    id: IdLocation,
    event_type: Field,
) -> Scheme {
    Scheme::Signed(SignedScheme {
        algorithm,
        signature_header: header(signature_header),
        other_signature_headers: Vec::new(),
        encoding,
        format: SignatureFormat::Prefixed(prefix.to_owned()),
        message: vec![MessagePart::Body],
        timestamp: None,
        id,
        event_type: Some(event_type),
        public_url: None,
    })
}

/// Every preset, in the README's order.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "slack",
        docs: "https://docs.slack.dev/authentication/verifying-requests-from-slack/",
        needs_public_url: false,
        default_tolerance_secs: Some(300),
        handshake: Some(Handshake::Slack),
        // `X-Slack-Signature: v0=<hex>` over `v0:{timestamp}:{body}`; Events API event id.
        build: |tolerance, _| {
            Scheme::Signed(SignedScheme {
                algorithm: Algorithm::Sha256,
                signature_header: header("X-Slack-Signature"),
                other_signature_headers: Vec::new(),
                encoding: SignatureEncoding::Hex,
                format: SignatureFormat::Prefixed("v0=".into()),
                message: vec![text("v0:"), MessagePart::Timestamp, text(":"), MessagePart::Body],
                timestamp: Some(TimestampRule {
                    from: TimestampFrom::Header(header("X-Slack-Request-Timestamp")),
                    unit: TimestampUnit::Seconds,
                    tolerance: Tolerance::Both(tolerance),
                }),
                id: IdLocation::JsonPointer("/event_id".into()),
                event_type: Some(Field::Pointer("/event/type".into())),
                public_url: None,
            })
        },
    },
    Preset {
        name: "shopify",
        docs: "https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-2-validate-the-origin-of-your-webhook-to-ensure-its-coming-from-shopify",
        needs_public_url: false,
        default_tolerance_secs: None,
        handshake: None,
        // Base64 HMAC-SHA256 of the body. The id is the webhook (delivery) id, which retries
        // keep; the event id can be shared by several topics' webhooks for one event. Newer
        // deliveries may name the headers without the `X-Shopify-` prefix (`shopify-…`).
        build: |_, _| {
            Scheme::Signed(SignedScheme {
                algorithm: Algorithm::Sha256,
                signature_header: header("X-Shopify-Hmac-Sha256"),
                other_signature_headers: vec![header("shopify-hmac-sha256")],
                encoding: SignatureEncoding::Base64,
                format: SignatureFormat::Prefixed(String::new()),
                message: vec![MessagePart::Body],
                timestamp: None,
                id: IdLocation::FirstHeader(vec![
                    header("X-Shopify-Webhook-Id"),
                    header("shopify-webhook-id"),
                ]),
                event_type: Some(Field::FirstHeader(vec![
                    header("X-Shopify-Topic"),
                    header("shopify-topic"),
                ])),
                public_url: None,
            })
        },
    },
    Preset {
        name: "zoom",
        docs: "https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events",
        needs_public_url: false,
        default_tolerance_secs: Some(300),
        handshake: Some(Handshake::Zoom),
        // `x-zm-signature: v0=<hex>` over `v0:{timestamp}:{body}`. Zoom events carry no id:
        // the body (with its millisecond `event_ts`) is the identity, as retries resend it.
        build: |tolerance, _| {
            Scheme::Signed(SignedScheme {
                algorithm: Algorithm::Sha256,
                signature_header: header("x-zm-signature"),
                other_signature_headers: Vec::new(),
                encoding: SignatureEncoding::Hex,
                format: SignatureFormat::Prefixed("v0=".into()),
                message: vec![text("v0:"), MessagePart::Timestamp, text(":"), MessagePart::Body],
                timestamp: Some(TimestampRule {
                    from: TimestampFrom::Header(header("x-zm-request-timestamp")),
                    unit: TimestampUnit::Seconds,
                    tolerance: Tolerance::Both(tolerance),
                }),
                id: IdLocation::BodySha256,
                event_type: Some(Field::Pointer("/event".into())),
                public_url: None,
            })
        },
    },
    Preset {
        name: "paddle",
        docs: "https://developer.paddle.com/webhooks/signature-verification",
        needs_public_url: false,
        // Paddle's SDKs allow 5 s either side of now.
        default_tolerance_secs: Some(5),
        handshake: None,
        // `Paddle-Signature: ts=…;h1=…[;h1=…]` over `{ts}:{body}`.
        build: |tolerance, _| {
            Scheme::Signed(SignedScheme {
                algorithm: Algorithm::Sha256,
                signature_header: header("Paddle-Signature"),
                other_signature_headers: Vec::new(),
                encoding: SignatureEncoding::Hex,
                format: SignatureFormat::List {
                    separator: ';',
                    signature_key: "h1".into(),
                    timestamp_key: Some("ts".into()),
                },
                message: vec![MessagePart::Timestamp, text(":"), MessagePart::Body],
                timestamp: Some(TimestampRule {
                    from: TimestampFrom::Signature,
                    unit: TimestampUnit::Seconds,
                    tolerance: Tolerance::Both(tolerance),
                }),
                id: IdLocation::JsonPointer("/event_id".into()),
                event_type: Some(Field::Pointer("/event_type".into())),
                public_url: None,
            })
        },
    },
    Preset {
        name: "linear",
        docs: "https://linear.app/developers/webhooks#securing-webhooks",
        needs_public_url: false,
        default_tolerance_secs: Some(60),
        handshake: None,
        // Hex HMAC-SHA256 of the body; the signed body's `webhookTimestamp` (ms) within 60 s.
        build: |tolerance, _| {
            Scheme::Signed(SignedScheme {
                algorithm: Algorithm::Sha256,
                signature_header: header("Linear-Signature"),
                other_signature_headers: Vec::new(),
                encoding: SignatureEncoding::Hex,
                format: SignatureFormat::Prefixed(String::new()),
                message: vec![MessagePart::Body],
                timestamp: Some(TimestampRule {
                    from: TimestampFrom::Body("/webhookTimestamp".into()),
                    unit: TimestampUnit::Millis,
                    tolerance: Tolerance::Both(tolerance),
                }),
                id: IdLocation::Header(header("Linear-Delivery")),
                event_type: Some(Field::Pointer("/type".into())),
                public_url: None,
            })
        },
    },
    Preset {
        name: "twitch",
        docs: "https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message",
        needs_public_url: false,
        default_tolerance_secs: Some(600),
        handshake: Some(Handshake::Twitch),
        // `sha256=<hex>` over `{message id}{timestamp}{body}`, RFC 3339 timestamp; Twitch's docs
        // refuse messages older than 10 minutes (age only).
        build: |tolerance, _| {
            Scheme::Signed(SignedScheme {
                algorithm: Algorithm::Sha256,
                signature_header: header("Twitch-Eventsub-Message-Signature"),
                other_signature_headers: Vec::new(),
                encoding: SignatureEncoding::Hex,
                format: SignatureFormat::Prefixed("sha256=".into()),
                message: vec![MessagePart::Id, MessagePart::Timestamp, MessagePart::Body],
                timestamp: Some(TimestampRule {
                    from: TimestampFrom::Header(header("Twitch-Eventsub-Message-Timestamp")),
                    unit: TimestampUnit::Rfc3339,
                    tolerance: Tolerance::Past(tolerance),
                }),
                id: IdLocation::Header(header("Twitch-Eventsub-Message-Id")),
                event_type: Some(Field::Header(header("Twitch-Eventsub-Subscription-Type"))),
                public_url: None,
            })
        },
    },
    Preset {
        name: "discord",
        docs: "https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers",
        needs_public_url: false,
        default_tolerance_secs: Some(300),
        handshake: Some(Handshake::Discord),
        // Ed25519 over `{timestamp}{body}` under the application's public key.
        build: |tolerance, _| {
            Scheme::Ed25519(Ed25519Scheme {
                signature_header: header("X-Signature-Ed25519"),
                timestamp_header: header("X-Signature-Timestamp"),
                tolerance: Tolerance::Both(tolerance),
                id: IdLocation::JsonPointer("/id".into()),
                event_type: Some(Field::Pointer("/type".into())),
            })
        },
    },
    Preset {
        name: "gitlab",
        docs: "https://docs.gitlab.com/user/project/integrations/webhooks/#validate-requests-with-a-secret-token",
        needs_public_url: false,
        default_tolerance_secs: None,
        handshake: None,
        // The secret token, compared in constant time. `Idempotency-Key` stays the same across
        // retries (GitLab 17.4 and later); older GitLab sends only `X-Gitlab-Event-UUID`.
        build: |_, _| {
            Scheme::Token(TokenScheme {
                token_header: header("X-Gitlab-Token"),
                id: IdLocation::FirstHeader(vec![
                    header("Idempotency-Key"),
                    header("X-Gitlab-Event-UUID"),
                ]),
                event_type: Some(Field::Header(header("X-Gitlab-Event"))),
            })
        },
    },
    Preset {
        name: "bitbucket",
        docs: "https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/#Secure-webhooks",
        needs_public_url: false,
        default_tolerance_secs: None,
        handshake: None,
        // `X-Hub-Signature: sha256=<hex>` of the body; `X-Request-UUID` is the same across
        // attempts (`X-Attempt-Number` counts them).
        build: |_, _| {
            body_mac(
                Algorithm::Sha256,
                "X-Hub-Signature",
                SignatureEncoding::Hex,
                "sha256=",
                IdLocation::Header(header("X-Request-UUID")),
                Field::Header(header("X-Event-Key")),
            )
        },
    },
    Preset {
        name: "meta",
        docs: "https://developers.facebook.com/docs/graph-api/webhooks/getting-started#event-notifications",
        needs_public_url: false,
        default_tolerance_secs: None,
        // Its subscription GET; the verify token it compares is one of the source's secrets
        // (`Secret::verify_token`), in the secrets document with the app secret.
        handshake: Some(Handshake::Meta),
        // WhatsApp, Messenger and Instagram: `X-Hub-Signature-256: sha256=<hex>` of the body
        // under the app secret. Notifications carry no id of their own: the body is the
        // identity (a retry resends it).
        build: |_, _| {
            body_mac(
                Algorithm::Sha256,
                "X-Hub-Signature-256",
                SignatureEncoding::Hex,
                "sha256=",
                IdLocation::BodySha256,
                Field::Pointer("/object".into()),
            )
        },
    },
    Preset {
        name: "twilio",
        docs: "https://www.twilio.com/docs/usage/webhooks/webhooks-security#validating-signatures-from-twilio",
        needs_public_url: true,
        default_tolerance_secs: None,
        handshake: None,
        build: |_, url| {
            Scheme::Twilio(TwilioScheme {
                public_url: url.to_owned(),
                id: IdLocation::Header(header("I-Twilio-Idempotency-Token")),
            })
        },
    },
    Preset {
        name: "square",
        docs: "https://developer.squareup.com/docs/webhooks/step3validate",
        needs_public_url: true,
        default_tolerance_secs: None,
        handshake: None,
        // Base64 HMAC-SHA256 of `{notification URL}{body}`.
        build: |_, url| {
            Scheme::Signed(SignedScheme {
                algorithm: Algorithm::Sha256,
                signature_header: header("X-Square-HmacSha256-Signature"),
                other_signature_headers: Vec::new(),
                encoding: SignatureEncoding::Base64,
                format: SignatureFormat::Prefixed(String::new()),
                message: vec![MessagePart::Url, MessagePart::Body],
                timestamp: None,
                id: IdLocation::JsonPointer("/event_id".into()),
                event_type: Some(Field::Pointer("/type".into())),
                public_url: Some(url.to_owned()),
            })
        },
    },
    Preset {
        name: "hubspot",
        docs: "https://developers.hubspot.com/docs/apps/legacy-apps/authentication/validating-requests#validate-requests-using-the-v3-request-signature",
        needs_public_url: true,
        default_tolerance_secs: Some(300),
        handshake: None,
        // v3: base64 HMAC-SHA256 of `{method}{URL}{body}{timestamp}`, timestamp in ms, only
        // age checked (as hubspot-api-client does). A notification is a batch; HubSpot's
        // `eventId` alone is not unique, so the first event's portal, subscription, event id
        // and time together are the id (`attemptNumber`, which retries change, is left out).
        build: |tolerance, url| {
            Scheme::Signed(SignedScheme {
                algorithm: Algorithm::Sha256,
                signature_header: header("X-HubSpot-Signature-v3"),
                other_signature_headers: Vec::new(),
                encoding: SignatureEncoding::Base64,
                format: SignatureFormat::Prefixed(String::new()),
                message: vec![
                    MessagePart::Method,
                    MessagePart::Url,
                    MessagePart::Body,
                    MessagePart::Timestamp,
                ],
                timestamp: Some(TimestampRule {
                    from: TimestampFrom::Header(header("X-HubSpot-Request-Timestamp")),
                    unit: TimestampUnit::Millis,
                    tolerance: Tolerance::Past(tolerance),
                }),
                id: IdLocation::Composite(vec![
                    "/0/portalId".into(),
                    "/0/subscriptionId".into(),
                    "/0/eventId".into(),
                    "/0/occurredAt".into(),
                ]),
                event_type: Some(Field::Pointer("/0/subscriptionType".into())),
                public_url: Some(url.to_owned()),
            })
        },
    },
    Preset {
        name: "intercom",
        docs: "https://developers.intercom.com/docs/references/webhooks/webhook-models#signed-notifications",
        needs_public_url: false,
        default_tolerance_secs: None,
        handshake: None,
        // `X-Hub-Signature: sha1=<hex>` of the body; the notification id survives retries
        // (its `delivery_attempts` does not).
        build: |_, _| {
            body_mac(
                Algorithm::Sha1,
                "X-Hub-Signature",
                SignatureEncoding::Hex,
                "sha1=",
                IdLocation::JsonPointer("/id".into()),
                Field::Pointer("/topic".into()),
            )
        },
    },
    Preset {
        name: "clerk",
        docs: "https://clerk.com/docs/webhooks/verifying",
        needs_public_url: false,
        default_tolerance_secs: Some(300),
        handshake: None,
        build: |tolerance, _| Scheme::Standard {
            tolerance_secs: tolerance,
            raw_secrets: false,
        },
    },
    Preset {
        name: "resend",
        docs: "https://resend.com/docs/dashboard/webhooks/verify-webhooks-requests",
        needs_public_url: false,
        default_tolerance_secs: Some(300),
        handshake: None,
        build: |tolerance, _| Scheme::Standard {
            tolerance_secs: tolerance,
            raw_secrets: false,
        },
    },
    Preset {
        name: "polar",
        docs: "https://docs.polar.sh/integrate/webhooks/delivery#verify-signature",
        needs_public_url: false,
        default_tolerance_secs: Some(300),
        handshake: None,
        // Standard Webhooks, but Polar's secret is used as its raw bytes (Polar's SDK base64-
        // encodes it before handing it to the Standard Webhooks library).
        build: |tolerance, _| Scheme::Standard {
            tolerance_secs: tolerance,
            raw_secrets: true,
        },
    },
    Preset {
        name: "svix",
        docs: "https://docs.svix.com/receiving/verifying-payloads/how-manual",
        needs_public_url: false,
        default_tolerance_secs: Some(300),
        handshake: None,
        build: |tolerance, _| Scheme::Standard {
            tolerance_secs: tolerance,
            raw_secrets: false,
        },
    },
];
