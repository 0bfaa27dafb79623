//! Every preset against requests signed (or accepted) by the provider's own SDK: the vectors in
//! `vectors.json`, written by `scripts/provider-vectors.py`, each with its provenance. From each
//! vector the table derives: valid, tampered body, wrong secret, rotation, both tolerance edges,
//! malformed and missing signature headers, and no secret.

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;

use super::presets::{self, PRESETS};
use super::*;

#[derive(Debug, Deserialize)]
struct File {
    vectors: Vec<Vector>,
}

#[derive(Debug, Deserialize)]
struct Vector {
    preset: String,
    provenance: String,
    secrets: Vec<String>,
    other_secret: String,
    public_url: Option<String>,
    method: String,
    query: String,
    headers: std::collections::BTreeMap<String, String>,
    body: String,
    now: i64,
    signed_at_ms: Option<i64>,
    tolerance: Option<ToleranceSpec>,
    tamper_detected: bool,
    malformed: Option<Malformed>,
    expected: Expected,
}

#[derive(Debug, Deserialize)]
struct ToleranceSpec {
    secs: i64,
    future: bool,
}

#[derive(Debug, Deserialize)]
struct Malformed {
    value: String,
    error: String,
}

#[derive(Debug, Deserialize)]
struct Expected {
    delivery_id: String,
    id_origin: String,
    event_type: Option<String>,
}

fn vectors() -> Vec<Vector> {
    let file: File = serde_json::from_str(include_str!("vectors.json")).expect("vectors.json");
    file.vectors
}

impl Vector {
    fn scheme(&self) -> Scheme {
        let preset = presets::lookup(&self.preset).expect("a preset");
        preset.scheme(None, self.public_url.as_deref().unwrap_or_default())
    }

    fn secrets(&self, texts: &[&str]) -> Vec<Secret> {
        let format = self.scheme().secret_format();
        texts
            .iter()
            .map(|t| Secret::parse(t, format).expect("a vector secret parses"))
            .collect()
    }

    fn own_secrets(&self) -> Vec<Secret> {
        let texts: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        self.secrets(&texts)
    }

    fn headers(&self) -> HeaderMap {
        self.headers
            .iter()
            .map(|(k, v)| {
                (
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                )
            })
            .collect()
    }

    /// The header carrying the signature (or token) in this vector.
    fn signature_header(&self) -> String {
        let names = [
            "x-slack-signature",
            "x-shopify-hmac-sha256",
            "x-zm-signature",
            "paddle-signature",
            "linear-signature",
            "twitch-eventsub-message-signature",
            "x-signature-ed25519",
            "x-gitlab-token",
            "x-hub-signature",
            "x-hub-signature-256",
            "x-twilio-signature",
            "x-square-hmacsha256-signature",
            "x-hubspot-signature-v3",
            "webhook-signature",
            "svix-signature",
        ];
        self.headers
            .keys()
            .map(|k| k.to_ascii_lowercase())
            .find(|k| names.contains(&k.as_str()))
            .expect("the vector has a signature header")
    }

    fn verify(
        &self,
        secrets: &[Secret],
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<Verified, VerifyError> {
        let req = Incoming {
            method: &self.method,
            query: &self.query,
            headers,
            body,
        };
        verify_request(&self.scheme(), secrets, &req, now)
    }

    fn expected(&self) -> Result<Verified, VerifyError> {
        Ok(Verified {
            delivery_id: self.expected.delivery_id.clone(),
            id_origin: match self.expected.id_origin.as_str() {
                "header" => IdOrigin::Header,
                "body" => IdOrigin::Body,
                _ => IdOrigin::BodySha256,
            },
            event_type: self.expected.event_type.clone(),
        })
    }
}

fn is_header_error(result: &Result<Verified, VerifyError>, malformed: bool, name: &str) -> bool {
    match result {
        Err(VerifyError::MalformedHeader(n)) if malformed => n.eq_ignore_ascii_case(name),
        Err(VerifyError::MissingHeader(n)) if !malformed => {
            n.eq_ignore_ascii_case(name)
                // Without either spelling, Standard Webhooks names the specification's header.
                || (name == "svix-signature" && n == "webhook-signature")
        }
        _ => false,
    }
}

#[test]
fn every_preset_has_a_provider_vector_and_a_documentation_link() {
    let vectors = vectors();
    for preset in PRESETS {
        assert!(
            vectors.iter().any(|v| v.preset == preset.name),
            "no vector for {}",
            preset.name
        );
        assert!(preset.docs.starts_with("https://"), "{}", preset.name);
    }
    for v in &vectors {
        assert!(!v.provenance.is_empty(), "{} has no provenance", v.preset);
    }
}

#[test]
fn provider_vectors_verify_and_every_derived_row_answers_as_it_should() {
    let mut rows = 0;
    for v in vectors() {
        let name = format!("{} ({})", v.preset, v.provenance);
        let headers = v.headers();
        let body = v.body.as_bytes();
        let own = v.own_secrets();
        let other = v.secrets(&[&v.other_secret]);
        let mut row = |label: &str, got: Result<Verified, VerifyError>, ok: bool| {
            rows += 1;
            if ok {
                assert_eq!(got, v.expected(), "{name}: {label}");
            } else {
                assert!(got.is_err(), "{name}: {label}: {got:?}");
            }
            got
        };

        let _ = row("valid", v.verify(&own, &headers, body, v.now), true);

        let mut tampered = body.to_vec();
        tampered.insert(1, b' ');
        let got = row(
            "tampered body",
            v.verify(&own, &headers, &tampered, v.now),
            !v.tamper_detected,
        );
        if v.tamper_detected {
            assert_eq!(got, Err(VerifyError::InvalidSignature), "{name}: tampered");
        }

        let got = row(
            "wrong secret",
            v.verify(&other, &headers, body, v.now),
            false,
        );
        assert_eq!(
            got,
            Err(VerifyError::InvalidSignature),
            "{name}: wrong secret"
        );

        let mut rotated = other.clone();
        rotated.extend(own.iter().cloned());
        let _ = row(
            "rotation: old first",
            v.verify(&rotated, &headers, body, v.now),
            true,
        );
        rotated.reverse();
        let _ = row(
            "rotation: new first",
            v.verify(&rotated, &headers, body, v.now),
            true,
        );

        let got = row("no secret", v.verify(&[], &headers, body, v.now), false);
        assert_eq!(got, Err(VerifyError::NoSecret), "{name}");

        let signature = v.signature_header();
        let mut without = headers.clone();
        without.remove(signature.as_str());
        let got = row(
            "missing signature header",
            v.verify(&own, &without, body, v.now),
            false,
        );
        assert!(is_header_error(&got, false, &signature), "{name}: {got:?}");

        if let Some(m) = &v.malformed {
            let mut bad = headers.clone();
            bad.insert(
                HeaderName::from_bytes(signature.as_bytes()).unwrap(),
                HeaderValue::from_str(&m.value).unwrap(),
            );
            let got = row(
                "malformed signature header",
                v.verify(&own, &bad, body, v.now),
                false,
            );
            match m.error.as_str() {
                "malformed" => assert!(is_header_error(&got, true, &signature), "{name}: {got:?}"),
                _ => assert_eq!(got, Err(VerifyError::InvalidSignature), "{name}: malformed"),
            }
        }

        if let (Some(at), Some(tolerance)) = (v.signed_at_ms, &v.tolerance) {
            let limit = tolerance.secs * 1000;
            // The latest second at which the signature is still young enough, and the next.
            let oldest_ok = (at + limit).div_euclid(1000);
            let _ = row(
                "age at the edge",
                v.verify(&own, &headers, body, oldest_ok),
                true,
            );
            let got = row(
                "age past the edge",
                v.verify(&own, &headers, body, oldest_ok + 1),
                false,
            );
            assert_eq!(got, Err(VerifyError::TimestampOutOfTolerance), "{name}");
            // The earliest second at which it is not yet too far ahead, and the one before.
            let earliest_ok = (at - limit + 999).div_euclid(1000);
            if tolerance.future {
                let _ = row(
                    "ahead at the edge",
                    v.verify(&own, &headers, body, earliest_ok),
                    true,
                );
                let got = row(
                    "ahead past the edge",
                    v.verify(&own, &headers, body, earliest_ok - 1),
                    false,
                );
                assert_eq!(got, Err(VerifyError::TimestampOutOfTolerance), "{name}");
            } else {
                let _ = row(
                    "far ahead: only age is checked",
                    v.verify(&own, &headers, body, earliest_ok - 86_400),
                    true,
                );
            }
        }
    }
    assert!(rows > 200, "only {rows} rows");
}

/// Whether each preset's signature covers its delivery id and a checked timestamp, and so
/// whether a receiver needs the replay guard: on exactly where it covers neither.
#[test]
fn each_preset_says_what_its_signature_covers() {
    // (preset, signs the delivery id, refuses old requests)
    let table = [
        ("slack", true, true),
        ("shopify", false, false),
        ("zoom", true, true),
        ("paddle", true, true),
        ("linear", false, true),
        ("twitch", true, true),
        ("discord", true, true),
        ("gitlab", false, false),
        ("bitbucket", false, false),
        ("meta", true, false),
        ("twilio", false, false),
        ("square", true, false),
        ("hubspot", true, true),
        ("intercom", true, false),
        ("clerk", true, true),
        ("resend", true, true),
        ("polar", true, true),
        ("svix", true, true),
    ];
    assert_eq!(table.len(), PRESETS.len(), "every preset is in the table");
    for (name, signs_id, refuses_old) in table {
        let scheme = presets::lookup(name)
            .expect("a preset")
            .scheme(None, "https://hooks.example.com/x");
        assert_eq!(scheme.signs_delivery_id(), signs_id, "{name}: signs the id");
        assert_eq!(
            scheme.refuses_old_requests(),
            refuses_old,
            "{name}: refuses old requests"
        );
        assert_eq!(
            scheme.needs_replay_guard(),
            !signs_id && !refuses_old,
            "{name}: replay guard"
        );
    }
    let guarded: Vec<&str> = PRESETS
        .iter()
        .filter(|p| p.scheme(None, "https://x").needs_replay_guard())
        .map(|p| p.name)
        .collect();
    assert_eq!(guarded, ["shopify", "gitlab", "bitbucket", "twilio"]);
}

/// Shopify's newer deliveries name their headers without the `X-Shopify-` prefix; both forms
/// verify, and the id and topic are read from whichever is present.
#[test]
fn shopify_accepts_the_unprefixed_header_names() {
    let scheme = presets::lookup("shopify")
        .expect("a preset")
        .scheme(None, "");
    let secret = "hookclaim-shopify-test-secret";
    let body = br#"{"id":820982911946154508,"email":"jon@example.com"}"#;
    let tag = {
        use ::hmac::Mac as _;
        let mut mac = ::hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body);
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            mac.finalize().into_bytes(),
        )
    };
    let headers = |names: [&'static str; 3]| -> HeaderMap {
        let [sig, id, topic] = names;
        [
            (sig, tag.as_str()),
            (id, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"),
            (topic, "orders/create"),
        ]
        .iter()
        .map(|(k, v)| {
            (
                HeaderName::from_static(k),
                HeaderValue::from_str(v).unwrap(),
            )
        })
        .collect()
    };
    let secrets = [Secret::from_bytes(secret)];
    for names in [
        [
            "x-shopify-hmac-sha256",
            "x-shopify-webhook-id",
            "x-shopify-topic",
        ],
        ["shopify-hmac-sha256", "shopify-webhook-id", "shopify-topic"],
    ] {
        let got = verify(&scheme, &secrets, &headers(names), body, 0);
        assert_eq!(
            got,
            Ok(Verified {
                delivery_id: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043".into(),
                id_origin: IdOrigin::Header,
                event_type: Some("orders/create".into()),
            }),
            "{names:?}"
        );
        let mut tampered = body.to_vec();
        tampered[2] ^= 1;
        assert_eq!(
            verify(&scheme, &secrets, &headers(names), &tampered, 0),
            Err(VerifyError::InvalidSignature),
            "{names:?}"
        );
    }
    // Neither spelling of the signature header: missing, named by its main name.
    let mut no_signature = headers(["shopify-hmac-sha256", "shopify-webhook-id", "shopify-topic"]);
    no_signature.remove("shopify-hmac-sha256");
    assert_eq!(
        verify(&scheme, &secrets, &no_signature, body, 0),
        Err(VerifyError::MissingHeader("X-Shopify-Hmac-Sha256".into()))
    );
    assert!(scheme_headers(&scheme).contains(&"shopify-webhook-id".to_string()));
}

/// The handshake each preset answers: exactly the providers that send one.
#[test]
fn each_preset_carries_the_handshake_its_provider_sends() {
    use crate::handshake::Handshake;
    let expected = |name: &str| match name {
        "slack" => Some(Handshake::Slack),
        "zoom" => Some(Handshake::Zoom),
        "twitch" => Some(Handshake::Twitch),
        "discord" => Some(Handshake::Discord),
        "meta" => Some(Handshake::Meta),
        _ => None,
    };
    for preset in PRESETS {
        assert_eq!(preset.handshake, expected(preset.name), "{}", preset.name);
    }
}

/// Signing against the providers' vectors: every preset signs what it verifies, and signing a
/// vector's inputs reproduces the signature the provider's SDK made.
#[cfg(feature = "sign")]
mod signing {
    use sha2::Digest as _;

    use super::*;
    use crate::sign::{sign, sign_as, Outgoing, SigningKey};

    /// The Ed25519 seeds and the earlier rotation keys that `scripts/provider-vectors.py`
    /// signed with: the vectors hold only what a receiver is given.
    fn sdk_keys(v: &Vector) -> Vec<SigningKey> {
        let seed = |text: &[u8]| SigningKey::ed25519(sha2::Sha256::digest(text).into());
        if v.preset == "discord" {
            return vec![seed(b"hookclaim-discord-vector-seed")];
        }
        if v.secrets[0].starts_with("whpk_") {
            return vec![seed(b"hookclaim-standard-v1a-seed")];
        }
        let format = v.scheme().secret_format();
        let mut keys = Vec::new();
        if v.provenance.contains("rotation") {
            keys.push(SigningKey::hmac(match v.preset.as_str() {
                "paddle" => "hookclaim-paddle-vector-secret-old",
                _ => "hookclaim-previous-key",
            }));
        }
        keys.extend(
            v.secrets
                .iter()
                .map(|t| SigningKey::parse(t, format).expect("a vector secret")),
        );
        keys
    }

    impl Vector {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }

        /// The vector's request as a sender describes it, sent at `at`: its body, URL and
        /// query (Twilio's `bodySHA256` is the signer's to add), method, `Content-Type` and
        /// Twilio's signature settings, and the id and event type it carries.
        fn message(&self, at: i64) -> Outgoing<'_> {
            let query = if self.query.starts_with("bodySHA256=") {
                ""
            } else {
                self.query.as_str()
            };
            let mut m = Outgoing::new(self.body.as_bytes(), at)
                .method(&self.method)
                .query(query);
            if let Some(url) = &self.public_url {
                m = m.url(url);
            }
            for name in ["Content-Type", "X-Twilio-Webhooks-Signature-Settings"] {
                if let Some(value) = self.header(name) {
                    m = m.header(name, value);
                }
            }
            if self.expected.id_origin == "header" {
                m = m.id(&self.expected.delivery_id);
            }
            if let Some(event_type) = &self.expected.event_type {
                m = m.event_type(event_type);
            }
            m
        }
    }

    #[test]
    fn every_preset_signs_what_it_verifies_and_a_changed_byte_fails() {
        let mut signed_presets = std::collections::BTreeSet::new();
        for v in vectors() {
            // A `whpk_` public key cannot sign: v1a is signed with its private key below.
            if v.secrets[0].starts_with("whpk_") {
                continue;
            }
            let name = format!("{} ({})", v.preset, v.provenance);
            let secret = match v.preset.as_str() {
                "discord" => hex::encode(sha2::Sha256::digest(b"hookclaim-discord-vector-seed")),
                _ => v.secrets[0].clone(),
            };
            let message = v.message(v.now - 1);
            let signed =
                sign_as(&v.preset, &secret, &message).unwrap_or_else(|e| panic!("{name}: {e}"));
            let secrets = [SigningKey::parse(&secret, v.scheme().secret_format())
                .unwrap()
                .verifying_secret()];
            let headers = signed.header_map();
            let check = |body: &[u8], headers: &HeaderMap| {
                let req = Incoming {
                    method: &v.method,
                    query: signed.query(),
                    headers,
                    body,
                };
                verify_request(&v.scheme(), &secrets, &req, v.now)
            };
            assert_eq!(check(v.body.as_bytes(), &headers), v.expected(), "{name}");
            // As the vectors' own rows change it: still JSON, no longer what was signed.
            let mut changed = v.body.as_bytes().to_vec();
            changed.insert(1, b' ');
            let got = check(&changed, &headers);
            if v.tamper_detected {
                assert_eq!(got, Err(VerifyError::InvalidSignature), "{name}");
            } else {
                // A token covers no byte of the body.
                assert_eq!(got, v.expected(), "{name}");
            }
            // The signer writes the specification's spelling of Svix's headers.
            let signature = v.signature_header().replace("svix-", "webhook-");
            let mut wrong = headers.clone();
            let value = headers[signature.as_str()].to_str().unwrap();
            let mid = value.len() / 2;
            let swapped = if &value[mid..=mid] == "0" { "1" } else { "0" };
            let value = format!("{}{swapped}{}", &value[..mid], &value[mid + 1..]);
            wrong.insert(
                HeaderName::from_bytes(signature.as_bytes()).unwrap(),
                HeaderValue::from_str(&value).unwrap(),
            );
            let got = check(v.body.as_bytes(), &wrong);
            assert!(got.is_err_and(|e| e.is_unauthorized()), "{name}");
            signed_presets.insert(v.preset.clone());
        }
        let all: std::collections::BTreeSet<String> =
            PRESETS.iter().map(|p| p.name.to_owned()).collect();
        assert_eq!(signed_presets, all);
    }

    #[test]
    fn signing_a_vectors_inputs_reproduces_the_providers_signature() {
        for v in vectors() {
            let name = format!("{} ({})", v.preset, v.provenance);
            let keys = sdk_keys(&v);
            // Each key verifies as the vector's own secret (or its earlier rotation key).
            let own = v.own_secrets();
            assert!(
                own.iter().all(|s| keys
                    .iter()
                    .any(|k| k.verifying_secret().expose() == s.expose())),
                "{name}: the keys are the vector's"
            );
            // The timestamp exactly as the vector carries it (Twitch's nanoseconds).
            let text = v
                .headers
                .iter()
                .find(|(k, _)| k.to_ascii_lowercase().ends_with("timestamp"))
                .map(|(_, t)| t.as_str());
            let at_ms = v.signed_at_ms.unwrap_or(v.now * 1000);
            let mut message = v.message(0).at_millis(at_ms);
            if let Some(text) = text {
                message = message.timestamp_text(text);
            }
            let signed =
                sign(&v.scheme(), &keys, &message).unwrap_or_else(|e| panic!("{name}: {e}"));
            let signature = v.signature_header();
            let mut compared = 0;
            for (header, value) in signed.headers() {
                // Svix sends the Standard Webhooks headers under its own prefix.
                let vector_value = v
                    .header(header)
                    .or_else(|| v.header(&header.replace("webhook-", "svix-")));
                let Some(expected) = vector_value else {
                    panic!("{name}: {header} is not in the vector");
                };
                assert_eq!(value, expected, "{name}: {header}");
                compared += 1;
            }
            assert!(
                signed.header(&signature).is_some()
                    || signed
                        .header(&signature.replace("svix-", "webhook-"))
                        .is_some(),
                "{name}: the signature is compared"
            );
            assert!(compared >= 1, "{name}");
            assert_eq!(signed.query(), v.query, "{name}: query");
        }
    }
}
