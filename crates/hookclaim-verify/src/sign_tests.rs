//! Signing, against verification: every scheme signs what it verifies, a changed byte fails,
//! published vectors are reproduced, and each way a request cannot be signed is named. The
//! presets are signed against the providers' SDK vectors in `preset_tests`.

use crate::sign::{sign, sign_as, Outgoing, SignError, Signed, SigningKey};
use crate::tests::{
    GITHUB_DOC_BODY, GITHUB_DOC_SECRET, GITHUB_DOC_SIGNATURE, SW_BODY, SW_ID, SW_OTHER_SECRET,
    SW_SECRET, SW_SIGNATURE, SW_TIMESTAMP,
};
use crate::*;

const AT: i64 = 1_767_225_600;
const URL: &str = "https://hooks.example.com/webhooks/x";

fn key(text: &str) -> SigningKey {
    SigningKey::hmac(text)
}

fn ed25519(n: u8) -> SigningKey {
    SigningKey::ed25519([n; 32])
}

fn ok(id: &str, id_origin: IdOrigin, event_type: Option<&str>) -> Verified {
    Verified {
        delivery_id: id.into(),
        id_origin,
        event_type: event_type.map(Into::into),
    }
}

/// Verifies `signed` with the secrets that verify `keys`, at `AT`.
fn verify_signed(
    scheme: &Scheme,
    keys: &[SigningKey],
    message: &Outgoing<'_>,
    signed: &Signed,
    body: &[u8],
) -> Result<Verified, VerifyError> {
    let secrets: Vec<Secret> = keys.iter().map(SigningKey::verifying_secret).collect();
    let headers = signed.header_map();
    let incoming = Incoming {
        method: message.method,
        query: signed.query(),
        headers: &headers,
        body,
    };
    verify_request(scheme, &secrets, &incoming, AT)
}

/// `signed` with one character of header `name` changed, in the middle of its value.
fn tampered_header(signed: &Signed, name: &str) -> Signed {
    let mut signed = signed.clone();
    let mut value: Vec<char> = signed
        .header(name)
        .expect("the header is sent")
        .chars()
        .collect();
    let i = value.len() / 2;
    value[i] = if value[i] == '0' { '1' } else { '0' };
    signed.set(name, value.into_iter().collect::<String>());
    signed
}

fn signed_scheme(change: impl FnOnce(&mut SignedScheme)) -> Scheme {
    let mut s = SignedScheme {
        algorithm: Algorithm::Sha256,
        signature_header: "X-Sig".into(),
        other_signature_headers: Vec::new(),
        encoding: SignatureEncoding::Hex,
        format: SignatureFormat::Prefixed(String::new()),
        message: vec![MessagePart::Body],
        timestamp: None,
        id: IdLocation::BodySha256,
        event_type: None,
        public_url: None,
    };
    change(&mut s);
    assert_eq!(s.check(), Ok(()));
    Scheme::Signed(s)
}

/// One row: a scheme, the keys it is signed with, the message, the header carrying the
/// signature, and what verification proves.
struct Row<'a> {
    name: &'a str,
    scheme: Scheme,
    keys: Vec<SigningKey>,
    message: Outgoing<'a>,
    signature: &'a str,
    expected: Verified,
}

#[test]
fn every_scheme_signs_what_it_verifies_and_a_changed_byte_fails() {
    let json = br#"{"id":"evt_1","type":"invoice.paid","n":1}"#;
    let form = b"To=%2B15550001&From=%2B15550002&Body=hello+there";
    let timed = br#"{"ts":1767225600123,"kind":"ping"}"#;
    let body_sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(json));
    let rows = vec![
        Row {
            name: "stripe, a rotation: two v1 entries",
            scheme: Scheme::Stripe {
                tolerance_secs: 300,
            },
            keys: vec![key("whsec_new"), key("whsec_old")],
            message: Outgoing::new(json, AT),
            signature: "stripe-signature",
            expected: ok("evt_1", IdOrigin::Body, Some("invoice.paid")),
        },
        Row {
            name: "github",
            scheme: Scheme::Github,
            keys: vec![key("gh")],
            message: Outgoing::new(json, AT).id("d-1").event_type("push"),
            signature: "x-hub-signature-256",
            expected: ok("d-1", IdOrigin::Header, Some("push")),
        },
        Row {
            name: "standard, HMAC and Ed25519 keys: v1 and v1a entries",
            scheme: Scheme::Standard {
                tolerance_secs: 300,
                raw_secrets: false,
            },
            keys: vec![key("standard-key"), ed25519(7)],
            message: Outgoing::new(json, AT).id("msg_1"),
            signature: "webhook-signature",
            expected: ok("msg_1", IdOrigin::Header, Some("invoice.paid")),
        },
        Row {
            name: "hmac, hex behind a prefix, id header",
            scheme: Scheme::Hmac(HmacScheme {
                signature_header: "X-Acme-Signature".into(),
                prefix: "sha256=".into(),
                encoding: SignatureEncoding::Hex,
                id: IdLocation::Header("X-Acme-Delivery".into()),
                event_type_pointer: Some("/type".into()),
            }),
            keys: vec![key("acme")],
            message: Outgoing::new(json, AT).id("a-1"),
            signature: "X-Acme-Signature",
            expected: ok("a-1", IdOrigin::Header, Some("invoice.paid")),
        },
        Row {
            name: "hmac, base64, id from the body's hash",
            scheme: Scheme::Hmac(HmacScheme {
                signature_header: "X-Sig".into(),
                prefix: String::new(),
                encoding: SignatureEncoding::Base64,
                id: IdLocation::BodySha256,
                event_type_pointer: None,
            }),
            keys: vec![key("acme")],
            message: Outgoing::new(json, AT),
            signature: "X-Sig",
            expected: ok(&body_sha, IdOrigin::BodySha256, None),
        },
        Row {
            name: "signed, SHA-1 base64 over method, URL and query, a header, id and ms timestamp",
            scheme: signed_scheme(|s| {
                s.algorithm = Algorithm::Sha1;
                s.encoding = SignatureEncoding::Base64;
                s.message = vec![
                    MessagePart::Method,
                    MessagePart::Url,
                    MessagePart::Header("X-Account".into()),
                    MessagePart::Id,
                    MessagePart::Text("|".into()),
                    MessagePart::Timestamp,
                    MessagePart::Body,
                ];
                s.timestamp = Some(TimestampRule {
                    from: TimestampFrom::Header("X-Ts".into()),
                    unit: TimestampUnit::Millis,
                    tolerance: Tolerance::Both(300),
                });
                s.id = IdLocation::Header("X-Id".into());
                s.event_type = Some(Field::Header("X-Event".into()));
                s.public_url = Some(URL.into());
            }),
            keys: vec![key("signed")],
            message: Outgoing::new(json, AT)
                .at_millis(AT * 1000 - 250)
                .method("PUT")
                .query("a=1&b=2")
                .header("X-Account", "acct_1")
                .id("s-1")
                .event_type("thing.done"),
            signature: "X-Sig",
            expected: ok("s-1", IdOrigin::Header, Some("thing.done")),
        },
        Row {
            name: "signed, SHA-512 k=v list with its timestamp entry, a rotation",
            scheme: signed_scheme(|s| {
                s.algorithm = Algorithm::Sha512;
                s.format = SignatureFormat::List {
                    separator: ',',
                    signature_key: "v1".into(),
                    timestamp_key: Some("t".into()),
                };
                s.message = vec![
                    MessagePart::Timestamp,
                    MessagePart::Text(".".into()),
                    MessagePart::Body,
                ];
                s.timestamp = Some(TimestampRule {
                    from: TimestampFrom::Signature,
                    unit: TimestampUnit::Seconds,
                    tolerance: Tolerance::Past(300),
                });
                s.id = IdLocation::FirstHeader(vec!["X-Id".into(), "X-Old-Id".into()]);
            }),
            keys: vec![key("one"), key("two")],
            message: Outgoing::new(json, AT - 10).id("l-1"),
            signature: "X-Sig",
            expected: ok("l-1", IdOrigin::Header, None),
        },
        Row {
            name: "signed, RFC 3339 timestamp signed as a header part",
            scheme: signed_scheme(|s| {
                s.format = SignatureFormat::Prefixed("sha256=".into());
                s.message = vec![MessagePart::Header("X-When".into()), MessagePart::Body];
                s.timestamp = Some(TimestampRule {
                    from: TimestampFrom::Header("X-When".into()),
                    unit: TimestampUnit::Rfc3339,
                    tolerance: Tolerance::Both(600),
                });
                s.id = IdLocation::JsonPointer("/id".into());
            }),
            keys: vec![key("when")],
            message: Outgoing::new(json, AT).at_millis(AT * 1000 + 634),
            signature: "X-Sig",
            expected: ok("evt_1", IdOrigin::Body, None),
        },
        Row {
            name: "signed, the body's own millisecond timestamp",
            scheme: signed_scheme(|s| {
                s.message = vec![
                    MessagePart::Timestamp,
                    MessagePart::Text(":".into()),
                    MessagePart::Body,
                ];
                s.timestamp = Some(TimestampRule {
                    from: TimestampFrom::Body("/ts".into()),
                    unit: TimestampUnit::Millis,
                    tolerance: Tolerance::Both(60),
                });
                s.event_type = Some(Field::Pointer("/kind".into()));
            }),
            keys: vec![key("timed")],
            message: Outgoing::new(timed, 0),
            signature: "X-Sig",
            expected: ok(
                &hex::encode(<sha2::Sha256 as sha2::Digest>::digest(timed)),
                IdOrigin::BodySha256,
                Some("ping"),
            ),
        },
        Row {
            name: "ed25519",
            scheme: Scheme::Ed25519(Ed25519Scheme {
                signature_header: "X-Signature-Ed25519".into(),
                timestamp_header: "X-Signature-Timestamp".into(),
                tolerance: Tolerance::Both(300),
                id: IdLocation::JsonPointer("/id".into()),
                event_type: Some(Field::Pointer("/n".into())),
            }),
            keys: vec![key("ignored: not an Ed25519 key"), ed25519(9)],
            message: Outgoing::new(json, AT),
            signature: "X-Signature-Ed25519",
            expected: ok("evt_1", IdOrigin::Body, Some("1")),
        },
        Row {
            name: "token",
            scheme: Scheme::Token(TokenScheme {
                token_header: "X-Token".into(),
                id: IdLocation::FirstHeader(vec!["Idempotency-Key".into(), "X-Uuid".into()]),
                event_type: Some(Field::Header("X-Event".into())),
            }),
            keys: vec![key("static-token")],
            message: Outgoing::new(json, AT).id("t-1").event_type("Push Hook"),
            signature: "X-Token",
            expected: ok("t-1", IdOrigin::Header, Some("Push Hook")),
        },
        Row {
            name: "twilio, form parameters and a query string",
            scheme: Scheme::Twilio(TwilioScheme {
                public_url: URL.into(),
                id: IdLocation::Header("I-Twilio-Idempotency-Token".into()),
            }),
            keys: vec![key("auth-token")],
            message: Outgoing::new(form, AT).query("x=1").id("tw-1"),
            signature: "x-twilio-signature",
            expected: ok("tw-1", IdOrigin::Header, None),
        },
        Row {
            name: "twilio, a JSON body through bodySHA256",
            scheme: Scheme::Twilio(TwilioScheme {
                public_url: URL.into(),
                id: IdLocation::Header("I-Twilio-Idempotency-Token".into()),
            }),
            keys: vec![key("auth-token")],
            message: Outgoing::new(json, AT)
                .header("Content-Type", "application/json")
                .id("tw-2"),
            signature: "x-twilio-signature",
            expected: ok("tw-2", IdOrigin::Header, None),
        },
        Row {
            name: "twilio, HMAC-SHA256 under a shared key, at the message's own URL",
            scheme: Scheme::Twilio(TwilioScheme {
                public_url: URL.into(),
                id: IdLocation::Header("I-Twilio-Idempotency-Token".into()),
            }),
            keys: vec![key("shared-key")],
            message: Outgoing::new(form, AT)
                .url(URL)
                .header(
                    "X-Twilio-Webhooks-Signature-Settings",
                    "key=k1,algorithm=HMAC_SHA256",
                )
                .id("tw-3"),
            signature: "x-twilio-signature",
            expected: ok("tw-3", IdOrigin::Header, None),
        },
    ];
    let kinds: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| scheme_kind(&r.scheme)).collect();
    assert_eq!(kinds.len(), 8, "every kind has a row: {kinds:?}");

    for row in rows {
        let Row {
            name,
            scheme,
            keys,
            message,
            signature,
            expected,
        } = row;
        let signed = sign(&scheme, &keys, &message).unwrap_or_else(|e| panic!("{name}: {e}"));
        let body = message.body;
        assert_eq!(
            verify_signed(&scheme, &keys, &message, &signed, body),
            Ok(expected),
            "{name}: {signed:?}"
        );
        // Any one of the keys verifies on its own, as during a rotation.
        for key in &keys {
            let got = verify_signed(&scheme, std::slice::from_ref(key), &message, &signed, body);
            let usable =
                scheme_kind(&scheme) != "ed25519" || key.verifying_secret().is_public_key();
            assert_eq!(got.is_ok(), usable, "{name}: one key: {got:?}");
        }
        if !matches!(scheme, Scheme::Token(_)) {
            let mut changed = body.to_vec();
            changed[body.len() / 2] ^= 1;
            assert_eq!(
                verify_signed(&scheme, &keys, &message, &signed, &changed),
                Err(VerifyError::InvalidSignature),
                "{name}: a changed body byte"
            );
        }
        // One key, so that one signature is all the header holds.
        let last = std::slice::from_ref(keys.last().expect("a key"));
        let single = sign(&scheme, last, &message).unwrap();
        let got = verify_signed(
            &scheme,
            last,
            &message,
            &tampered_header(&single, signature),
            body,
        );
        assert!(
            got.as_ref().is_err_and(VerifyError::is_unauthorized),
            "{name}: a changed signature byte: {got:?}"
        );
    }
}

fn scheme_kind(scheme: &Scheme) -> &'static str {
    match scheme {
        Scheme::Stripe { .. } => "stripe",
        Scheme::Github => "github",
        Scheme::Standard { .. } => "standard",
        Scheme::Hmac(_) => "hmac",
        Scheme::Signed(_) => "signed",
        Scheme::Ed25519(_) => "ed25519",
        Scheme::Token(_) => "token",
        Scheme::Twilio(_) => "twilio",
    }
}

#[test]
fn signed_headers_are_written_as_each_scheme_writes_them() {
    let body = br#"{"id":"evt_1"}"#;
    let stripe = Scheme::Stripe {
        tolerance_secs: 300,
    };
    let signed = sign(&stripe, &[key("a"), key("b")], &Outgoing::new(body, AT)).unwrap();
    let header = signed.header("Stripe-Signature").unwrap();
    assert!(header.starts_with("t=1767225600,v1="), "{header}");
    assert_eq!(header.matches(",v1=").count(), 2);

    let twitch_like = signed_scheme(|s| {
        s.message = vec![MessagePart::Timestamp, MessagePart::Body];
        s.timestamp = Some(TimestampRule {
            from: TimestampFrom::Header("X-Ts".into()),
            unit: TimestampUnit::Rfc3339,
            tolerance: Tolerance::Past(600),
        });
    });
    let at = |m: Outgoing<'_>| {
        sign(&twitch_like, &[key("k")], &m)
            .unwrap()
            .header("X-Ts")
            .unwrap()
            .to_owned()
    };
    assert_eq!(at(Outgoing::new(body, AT)), "2026-01-01T00:00:00Z");
    assert_eq!(
        at(Outgoing::new(body, AT).at_millis(AT * 1000 + 5)),
        "2026-01-01T00:00:00.005Z"
    );
    assert_eq!(
        at(Outgoing::new(body, AT).timestamp_text("2026-01-01T00:00:00.000000001Z")),
        "2026-01-01T00:00:00.000000001Z"
    );

    // The message's headers come first and are sent; one the scheme writes is replaced.
    let signed = sign(
        &Scheme::Github,
        &[key("k")],
        &Outgoing::new(body, AT)
            .header("Content-Type", "application/json")
            .header("X-Hub-Signature-256", "sha256=stale")
            .id("d"),
    )
    .unwrap();
    let names: Vec<&str> = signed.headers().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["Content-Type", "x-hub-signature-256", "x-github-delivery"]
    );
    assert_eq!(signed.query(), "");
}

#[test]
fn signing_published_inputs_reproduces_their_signatures() {
    let github = sign_as(
        "github",
        GITHUB_DOC_SECRET,
        &Outgoing::new(GITHUB_DOC_BODY.as_bytes(), 0).id("d"),
    )
    .unwrap();
    assert_eq!(
        github.header("X-Hub-Signature-256"),
        Some(GITHUB_DOC_SIGNATURE)
    );

    let message = Outgoing::new(SW_BODY.as_bytes(), SW_TIMESTAMP).id(SW_ID);
    let standard = sign_as("standard", SW_SECRET, &message).unwrap();
    assert_eq!(standard.header("webhook-signature"), Some(SW_SIGNATURE));
    assert_eq!(standard.header("webhook-id"), Some(SW_ID));
    assert_eq!(standard.header("webhook-timestamp"), Some("1614265330"));

    // A rotation: one entry per key, in the order given.
    let format = SecretFormat::StandardWebhooks;
    let keys = [
        SigningKey::parse(SW_OTHER_SECRET, format).unwrap(),
        SigningKey::parse(SW_SECRET, format).unwrap(),
    ];
    let scheme = Scheme::Standard {
        tolerance_secs: 300,
        raw_secrets: false,
    };
    let rotated = sign(&scheme, &keys, &message).unwrap();
    let entries: Vec<&str> = rotated
        .header("webhook-signature")
        .unwrap()
        .split(' ')
        .collect();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1], SW_SIGNATURE);
}

#[test]
fn each_request_that_cannot_be_signed_names_why() {
    let body = br#"{"id":"evt_1"}"#;
    let m = || Outgoing::new(body, AT);
    let github = Scheme::Github;
    let discord = presets::lookup("discord").unwrap().scheme(None, "");
    let square = presets::lookup("square").unwrap().scheme(None, "");
    let linear = presets::lookup("linear").unwrap().scheme(None, "");
    let with_header_part = signed_scheme(|s| {
        s.message = vec![MessagePart::Header("X-Account".into()), MessagePart::Body]
    });
    let token = Scheme::Token(TokenScheme {
        token_header: "X-Token".into(),
        id: IdLocation::BodySha256,
        event_type: None,
    });
    let cases: Vec<(&str, Result<Signed, SignError>, SignError)> = vec![
        (
            "an id header without an id",
            sign(&github, &[key("k")], &m()),
            SignError::MissingId,
        ),
        (
            "no keys",
            sign(&github, &[], &m().id("d")),
            SignError::NoKey,
        ),
        (
            "an HMAC key for an Ed25519 scheme",
            sign(&discord, &[key("k")], &m()),
            SignError::NoKey,
        ),
        (
            "an Ed25519 key for an HMAC scheme",
            sign(&github, &[ed25519(1)], &m().id("d")),
            SignError::NoKey,
        ),
        (
            "a signed URL without one",
            sign(&square, &[key("k")], &m()),
            SignError::MissingUrl,
        ),
        (
            "a signed header the message does not send",
            sign(&with_header_part, &[key("k")], &m()),
            SignError::MissingHeader("X-Account".into()),
        ),
        (
            "a body without its signed timestamp",
            sign(&linear, &[key("k")], &m().id("d")),
            SignError::MissingBodyTimestamp("/webhookTimestamp".into()),
        ),
        (
            "an id that cannot be a header value",
            sign(&github, &[key("k")], &m().id("a\nb")),
            SignError::InvalidHeader("x-github-delivery".into()),
        ),
        (
            "a token that is not visible ASCII",
            sign(&token, &[key("tök")], &m()),
            SignError::InvalidHeader("X-Token".into()),
        ),
        (
            "an unknown provider",
            sign_as("nope", "k", &m()),
            SignError::UnknownProvider("nope".into()),
        ),
        (
            "a public key",
            sign_as("svix", &format!("whpk_{}", "A".repeat(43)), &m().id("d")),
            SignError::PublicKey,
        ),
        (
            "a Standard Webhooks secret that is not base64",
            sign_as("standard", "whsec_***", &m().id("d")),
            SignError::Secret(SecretError::InvalidBase64),
        ),
        (
            "a Discord private key that is not 64 hex digits",
            sign_as("discord", "abcd", &m()),
            SignError::InvalidPrivateKey,
        ),
    ];
    for (name, got, expected) in cases {
        assert_eq!(got, Err(expected), "{name}");
    }
}

#[test]
fn a_signing_key_never_prints_its_bytes() {
    for k in [key("hunter2"), ed25519(3)] {
        assert_eq!(format!("{k:?}"), "[redacted]");
    }
    // A token that cannot be sent is refused by its header's name, never its value.
    let token = Scheme::Token(TokenScheme {
        token_header: "X-Token".into(),
        id: IdLocation::BodySha256,
        event_type: None,
    });
    let err = sign(&token, &[key("hunter2\n")], &Outgoing::new(b"{}", AT)).unwrap_err();
    assert_eq!(err, SignError::InvalidHeader("X-Token".into()));
    assert!(!format!("{err} {err:?}").contains("hunter2"));
}
