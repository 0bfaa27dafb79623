//! Handshake detection and answers: one row per provider request, and the requests that look
//! alike but are not handshakes.

use http::{HeaderMap, HeaderName, HeaderValue};

use super::*;

fn req<'a>(
    method: &'a str,
    query: &'a str,
    headers: &'a HeaderMap,
    body: &'a [u8],
) -> Incoming<'a> {
    Incoming {
        method,
        query,
        headers,
        body,
    }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            )
        })
        .collect()
}

/// An answer as the provider must get it: status, content type, body, and the logged outcome.
type Expected<'a> = (u16, Option<&'a str>, String, &'a str);

const ZOOM_SECRET: &str = "hookclaim-zoom-test-secret";

/// A Meta source's secrets: its app secret and, when it has one, its verify token.
fn meta_secrets(token: Option<&str>) -> Vec<Secret> {
    let mut secrets = vec![Secret::from_bytes("hookclaim-meta-app-secret")];
    secrets.extend(token.map(Secret::verify_token));
    secrets
}

#[test]
fn each_provider_handshake_is_recognised_and_answered_exactly() {
    let none = HeaderMap::new();
    let form = headers(&[("content-type", "application/x-www-form-urlencoded")]);
    let verification = headers(&[(
        "twitch-eventsub-message-type",
        "webhook_callback_verification",
    )]);
    let revocation = headers(&[("twitch-eventsub-message-type", "revocation")]);
    let zoom = vec![Secret::from_bytes(ZOOM_SECRET)];
    // (handshake, the source's secrets, request, expected (status, content type, body, outcome))
    let table: Vec<(Handshake, Vec<Secret>, Incoming<'_>, Expected<'_>)> = vec![
        (
            Handshake::Slack,
            zoom.clone(),
            req("POST", "", &none, br#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#),
            (200, Some("text/plain"), "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into(), "handshake"),
        ),
        (
            Handshake::Slack,
            zoom.clone(),
            req("POST", "", &form, b"ssl_check=1&token=t"),
            (200, None, String::new(), "handshake"),
        ),
        (
            // Zoom's documented example; the expected token is the hex HMAC-SHA256 of the plain
            // token under the secret, as @zoom/rivet 0.4.0 computes it.
            Handshake::Zoom,
            zoom.clone(),
            req("POST", "", &none, br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#),
            (
                200,
                Some("application/json"),
                r#"{"encryptedToken":"1b52607efd5eac8ae825b9bc51123137710111efe8f95af52e3bdb8b4085f6a4","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}"#.into(),
                "handshake",
            ),
        ),
        (
            Handshake::Twitch,
            zoom.clone(),
            req("POST", "", &verification, br#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"type":"channel.follow"}}"#),
            (200, Some("text/plain"), "pogchamp-kappa-360noscope-vohiyo".into(), "handshake"),
        ),
        (
            Handshake::Twitch,
            zoom.clone(),
            req("POST", "", &revocation, br#"{"subscription":{"type":"channel.follow","status":"authorization_revoked"}}"#),
            (204, None, String::new(), "revoked"),
        ),
        (
            Handshake::Meta,
            meta_secrets(Some("meatyhamhock")),
            req("GET", "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock", &none, b""),
            (200, Some("text/plain"), "1158201444".into(), "handshake"),
        ),
        (
            Handshake::Meta,
            meta_secrets(Some("meatyhamhock")),
            req("GET", "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhoc", &none, b""),
            (403, Some("application/json"), r#"{"error":"verify token does not match","status":"forbidden"}"#.into(), "handshake_refused"),
        ),
        (
            // The app secret is not a verify token.
            Handshake::Meta,
            meta_secrets(None),
            req("GET", "hub.mode=subscribe&hub.challenge=1&hub.verify_token=hookclaim-meta-app-secret", &none, b""),
            (403, Some("application/json"), r#"{"error":"verify token does not match","status":"forbidden"}"#.into(), "handshake_refused"),
        ),
        (
            Handshake::Meta,
            meta_secrets(None),
            req("GET", "hub.mode=subscribe&hub.challenge=1&hub.verify_token=", &none, b""),
            (403, Some("application/json"), r#"{"error":"verify token does not match","status":"forbidden"}"#.into(), "handshake_refused"),
        ),
        (
            Handshake::Discord,
            zoom.clone(),
            req("POST", "", &none, br#"{"type":1,"id":"1","application_id":"2","token":"t","version":1}"#),
            (200, Some("application/json"), r#"{"type":1}"#.into(), "handshake"),
        ),
    ];
    for (shake, secrets, request, (status, content_type, body, outcome)) in table {
        let challenge =
            detect(&shake, &request).unwrap_or_else(|| panic!("{shake:?}: not recognised"));
        let got = answer(&challenge, &shake, &secrets);
        assert_eq!(
            (got.status, got.content_type, got.body.as_str(), got.outcome),
            (status, content_type, body.as_str(), outcome),
            "{shake:?} {}",
            challenge.name()
        );
    }
}

#[test]
fn look_alikes_are_not_handshakes() {
    let none = HeaderMap::new();
    let notification = headers(&[("twitch-eventsub-message-type", "notification")]);
    let table: Vec<(Handshake, Incoming<'_>)> = vec![
        // An Events API event, a JSON body with ssl_check, a url_verification without challenge.
        (
            Handshake::Slack,
            req(
                "POST",
                "",
                &none,
                br#"{"type":"event_callback","event_id":"Ev1"}"#,
            ),
        ),
        (Handshake::Slack, req("POST", "", &none, b"ssl_check=1")),
        (
            Handshake::Slack,
            req("POST", "", &none, br#"{"type":"url_verification"}"#),
        ),
        (
            Handshake::Zoom,
            req(
                "POST",
                "",
                &none,
                br#"{"event":"meeting.started","payload":{"plainToken":"x"}}"#,
            ),
        ),
        (
            Handshake::Zoom,
            req(
                "POST",
                "",
                &none,
                br#"{"event":"endpoint.url_validation","payload":{}}"#,
            ),
        ),
        (
            Handshake::Twitch,
            req("POST", "", &notification, br#"{"challenge":"x"}"#),
        ),
        (
            Handshake::Twitch,
            req("POST", "", &none, br#"{"challenge":"x"}"#),
        ),
        (
            Handshake::Discord,
            req("POST", "", &none, br#"{"type":2,"id":"1"}"#),
        ),
        (
            Handshake::Discord,
            req("POST", "", &none, br#"{"type":"1"}"#),
        ),
        (
            Handshake::Meta,
            req(
                "GET",
                "hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=t",
                &none,
                b"",
            ),
        ),
        (
            Handshake::Meta,
            req("GET", "hub.mode=subscribe&hub.verify_token=t", &none, b""),
        ),
        (
            Handshake::Meta,
            req(
                "POST",
                "hub.mode=subscribe&hub.challenge=1&hub.verify_token=t",
                &none,
                b"{}",
            ),
        ),
        // A GET is only ever Meta's.
        (
            Handshake::Slack,
            req("GET", "hub.mode=subscribe&hub.challenge=1", &none, b""),
        ),
    ];
    for (shake, request) in table {
        assert_eq!(
            detect(&shake, &request),
            None,
            "{shake:?} {:?}",
            request.body
        );
    }
}

#[test]
fn a_twitch_revocation_header_counts_only_with_a_revocation_body() {
    let revocation = headers(&[("twitch-eventsub-message-type", "revocation")]);
    let revoked = |status: &str| {
        format!(
            r#"{{"subscription":{{"id":"f1c2a387","status":"{status}","type":"channel.follow","version":"2","condition":{{"broadcaster_user_id":"1337"}}}}}}"#
        )
    };
    // (body, recognised as a revocation)
    let table: Vec<(String, bool)> = vec![
        (revoked("authorization_revoked"), true),
        (revoked("user_removed"), true),
        (revoked("notification_failures_exceeded"), true),
        (revoked("version_removed"), true),
        // A captured notification re-sent with the header rewritten: it has an event, and its
        // subscription is enabled.
        (
            r#"{"subscription":{"id":"f1c2a387","status":"enabled","type":"channel.follow","version":"2"},"event":{"user_id":"1234"}}"#.into(),
            false,
        ),
        (
            r#"{"subscription":{"status":"authorization_revoked","type":"channel.follow"},"event":{"user_id":"1234"}}"#.into(),
            false,
        ),
        (
            r#"{"subscription":{"status":"authorization_revoked","type":"channel.follow"},"events":[]}"#.into(),
            false,
        ),
        // A callback verification under the wrong header.
        (
            r#"{"challenge":"x","subscription":{"status":"webhook_callback_verification_pending","type":"channel.follow"}}"#.into(),
            false,
        ),
        (revoked("enabled"), false),
        (revoked(""), false),
        (
            r#"{"subscription":{"status":"authorization_revoked"}}"#.into(),
            false,
        ),
        (
            r#"{"subscription":{"status":"authorization_revoked","type":""}}"#.into(),
            false,
        ),
        (r#"{"subscription":{"status":7,"type":"channel.follow"}}"#.into(), false),
        ("{}".into(), false),
        ("not json".into(), false),
        (String::new(), false),
    ];
    for (body, expected) in table {
        let got = detect(
            &Handshake::Twitch,
            &req("POST", "", &revocation, body.as_bytes()),
        );
        assert_eq!(
            matches!(got, Some(Challenge::TwitchRevocation { .. })),
            expected,
            "{body}: {got:?}"
        );
        if !expected {
            assert_eq!(got, None, "{body}");
        }
    }
}

#[test]
fn challenges_are_bounded_and_only_ssl_check_and_meta_skip_the_signature() {
    let none = HeaderMap::new();
    let long = format!(
        r#"{{"type":"url_verification","challenge":"{}"}}"#,
        "x".repeat(1025)
    );
    assert_eq!(
        detect(&Handshake::Slack, &req("POST", "", &none, long.as_bytes())),
        None
    );
    let unsigned = [
        Challenge::SlackSslCheck,
        Challenge::MetaSubscribe {
            verify_token: String::new(),
            challenge: "1".into(),
        },
    ];
    assert!(unsigned.iter().all(|c| !c.needs_signature()));
    assert!(Challenge::DiscordPing.needs_signature());
    assert!(Challenge::ZoomUrlValidation {
        plain_token: "p".into()
    }
    .needs_signature());
}
