//! Verification tests: one table row per scheme and failure mode, with vectors from the
//! providers' documentation and libraries where they publish them.

use super::*;
use ::hmac::{Hmac, Mac as _};
use base64::Engine as _;
use http::{HeaderName, HeaderValue};
use sha2::Sha256;

/// The one clock every test uses: the Standard Webhooks test vector's timestamp.
const NOW: i64 = 1_614_265_330;

// ---------------------------------------------------------------------------------------
// Table machinery
// ---------------------------------------------------------------------------------------

/// One row: a request, the secrets configured, and the answer `verify` must give.
struct Case {
    name: &'static str,
    secrets: Vec<Secret>,
    headers: Vec<(&'static str, Vec<u8>)>,
    body: Vec<u8>,
    expected: Result<Verified, VerifyError>,
}

fn case(
    name: &'static str,
    secrets: Vec<Secret>,
    headers: Vec<(&'static str, Vec<u8>)>,
    body: impl AsRef<[u8]>,
    expected: Result<Verified, VerifyError>,
) -> Case {
    Case {
        name,
        secrets,
        headers,
        body: body.as_ref().to_vec(),
        expected,
    }
}

/// A header as raw bytes, so rows can carry non-ASCII values.
fn h(name: &'static str, value: impl AsRef<[u8]>) -> (&'static str, Vec<u8>) {
    (name, value.as_ref().to_vec())
}

fn header_map(pairs: &[(&'static str, Vec<u8>)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_bytes(value).unwrap(),
        );
    }
    map
}

fn run(scheme: &Scheme, cases: Vec<Case>, now: i64) {
    for c in cases {
        let got = verify(scheme, &c.secrets, &header_map(&c.headers), &c.body, now);
        assert_eq!(got, c.expected, "case: {}", c.name);
    }
}

fn ok(id: &str, origin: IdOrigin, event_type: Option<&str>) -> Result<Verified, VerifyError> {
    Ok(Verified {
        delivery_id: id.to_owned(),
        id_origin: origin,
        event_type: event_type.map(str::to_owned),
    })
}

fn missing(name: &str) -> Result<Verified, VerifyError> {
    Err(VerifyError::MissingHeader(name.to_owned()))
}

fn malformed(name: &str) -> Result<Verified, VerifyError> {
    Err(VerifyError::MalformedHeader(name.to_owned()))
}

fn raw(secret: &str) -> Secret {
    Secret::from_bytes(secret)
}

fn standard_secret(secret: &str) -> Secret {
    Secret::parse(secret, SecretFormat::StandardWebhooks).unwrap()
}

/// A test-only HMAC-SHA256, used to sign rows whose timestamps or bodies vary. It is
/// anchored to the published vectors by `test_signer_reproduces_published_vectors`; the
/// rows that prove interoperability use literal signatures instead.
fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

// ---------------------------------------------------------------------------------------
// Stripe
// ---------------------------------------------------------------------------------------

const STRIPE: Scheme = Scheme::Stripe {
    tolerance_secs: DEFAULT_TOLERANCE_SECS,
};
const STRIPE_SECRET: &str = "whsec_test_secret";
const STRIPE_OLD_SECRET: &str = "whsec_old_secret";
const STRIPE_BODY: &str = r#"{"id":"evt_test_webhook","object":"event","type":"invoice.paid"}"#;
// The literal signatures below were computed outside this crate, with
//   printf '%s' "1614265330.$BODY" | openssl dgst -sha256 -hmac "$SECRET"
// following Stripe's published scheme: HMAC-SHA256 of "{t}.{raw body}", hex.
const STRIPE_SIG: &str = "94a95a585251b387d383b81fdde1a4608d680d84c35b091be61e884cfac66034";
const STRIPE_OLD_SIG: &str = "77b75aad35f81c30a2654b29a5fb791f018e97ec3be501d6ed1e831d98bbbaca";
const STRIPE_UTF8_BODY: &str = r#"{"id":"evt_utf8","type":"customer.updated","name":"Zoë 東京"}"#;
const STRIPE_UTF8_SIG: &str = "6558a2792faaa0fb6b71bc84b970e66e2be327a17f9b86a32e992b86754d8b5f";
const STRIPE_INVALID_UTF8_BODY: &[u8] = b"\xff\xfe{";
const STRIPE_INVALID_UTF8_SIG: &str =
    "cea4e3492323bd4b71a2f3e54f03792fa57a3c7089e20606ad97e80db740c142";

fn stripe_sig(secret: &str, t: i64, body: &[u8]) -> String {
    hex::encode(hmac(
        secret.as_bytes(),
        &[t.to_string().as_bytes(), b".", body],
    ))
}

/// `Stripe-Signature: t=NOW,v1=<v1>`.
fn stripe_header(v1: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![h("Stripe-Signature", format!("t={NOW},v1={v1}"))]
}

fn stripe_only() -> Vec<Secret> {
    vec![raw(STRIPE_SECRET)]
}

#[test]
fn stripe_accepts_genuine_signatures() {
    let paid = ok("evt_test_webhook", IdOrigin::Body, Some("invoice.paid"));
    let rotated = || vec![raw(STRIPE_SECRET), raw(STRIPE_OLD_SECRET)];
    let at = |t: i64| {
        vec![h(
            "Stripe-Signature",
            format!(
                "t={t},v1={}",
                stripe_sig(STRIPE_SECRET, t, STRIPE_BODY.as_bytes())
            ),
        )]
    };
    let no_type = br#"{"id":"evt_no_type"}"#;
    run(
        &STRIPE,
        vec![
            case(
                "v1 computed independently with openssl",
                stripe_only(),
                stripe_header(STRIPE_SIG),
                STRIPE_BODY,
                paid.clone(),
            ),
            case(
                "header name in upper case",
                stripe_only(),
                vec![h("STRIPE-SIGNATURE", format!("t={NOW},v1={STRIPE_SIG}"))],
                STRIPE_BODY,
                paid.clone(),
            ),
            case(
                "new secret of a rotated pair",
                rotated(),
                stripe_header(STRIPE_SIG),
                STRIPE_BODY,
                paid.clone(),
            ),
            case(
                "old secret of a rotated pair",
                rotated(),
                stripe_header(STRIPE_OLD_SIG),
                STRIPE_BODY,
                paid.clone(),
            ),
            case(
                "only the second v1 matches",
                stripe_only(),
                vec![h(
                    "Stripe-Signature",
                    format!("t={NOW},v1={STRIPE_OLD_SIG},v1={STRIPE_SIG}"),
                )],
                STRIPE_BODY,
                paid.clone(),
            ),
            case(
                "v0 and unknown schemes beside v1 are ignored",
                stripe_only(),
                vec![h(
                    "Stripe-Signature",
                    format!("t={NOW},v0={},v1={STRIPE_SIG},v9=zz", "0".repeat(64)),
                )],
                STRIPE_BODY,
                paid.clone(),
            ),
            case(
                "upper-case hex digits",
                stripe_only(),
                stripe_header(&STRIPE_SIG.to_uppercase()),
                STRIPE_BODY,
                paid.clone(),
            ),
            case(
                "UTF-8 body",
                stripe_only(),
                stripe_header(STRIPE_UTF8_SIG),
                STRIPE_UTF8_BODY,
                ok("evt_utf8", IdOrigin::Body, Some("customer.updated")),
            ),
            case(
                "t exactly at tolerance in the past",
                stripe_only(),
                at(NOW - 300),
                STRIPE_BODY,
                paid.clone(),
            ),
            case(
                "t past tolerance in the future: Stripe only checks age",
                stripe_only(),
                at(NOW + 301),
                STRIPE_BODY,
                paid.clone(),
            ),
            case(
                "body without type",
                stripe_only(),
                stripe_header(&stripe_sig(STRIPE_SECRET, NOW, no_type)),
                no_type,
                ok("evt_no_type", IdOrigin::Body, None),
            ),
        ],
        NOW,
    );
}

#[test]
fn stripe_rejects_unauthentic_requests() {
    let with = |value: String| vec![h("Stripe-Signature", value)];
    let sixteen_v1 = format!(",v1={STRIPE_SIG}").repeat(16);
    let too_old = NOW - 301;
    run(
        &STRIPE,
        vec![
            case(
                "body tampered",
                stripe_only(),
                stripe_header(STRIPE_SIG),
                STRIPE_BODY.replace("paid", "void"),
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "wrong secret",
                vec![raw(STRIPE_OLD_SECRET)],
                stripe_header(STRIPE_SIG),
                STRIPE_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "t changed after signing",
                stripe_only(),
                with(format!("t={},v1={STRIPE_SIG}", NOW + 1)),
                STRIPE_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "t one second past tolerance",
                stripe_only(),
                with(format!(
                    "t={too_old},v1={}",
                    stripe_sig(STRIPE_SECRET, too_old, STRIPE_BODY.as_bytes())
                )),
                STRIPE_BODY,
                Err(VerifyError::TimestampOutOfTolerance),
            ),
            case(
                "t past tolerance with a bad signature: signature is checked first",
                stripe_only(),
                with(format!("t={too_old},v1={STRIPE_SIG}")),
                STRIPE_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "header missing",
                stripe_only(),
                vec![],
                STRIPE_BODY,
                missing("stripe-signature"),
            ),
            case(
                "header value with UTF-8 (not visible ASCII)",
                stripe_only(),
                with(format!("t={NOW},v1={STRIPE_SIG},x=é")),
                STRIPE_BODY,
                missing("stripe-signature"),
            ),
            case(
                "header value with invalid UTF-8",
                stripe_only(),
                vec![h(
                    "Stripe-Signature",
                    [format!("t={NOW},v1=").as_bytes(), b"\xff"].concat(),
                )],
                STRIPE_BODY,
                missing("stripe-signature"),
            ),
            case(
                "no t",
                stripe_only(),
                with(format!("v1={STRIPE_SIG}")),
                STRIPE_BODY,
                malformed("stripe-signature"),
            ),
            case(
                "empty t",
                stripe_only(),
                with(format!("t=,v1={STRIPE_SIG}")),
                STRIPE_BODY,
                malformed("stripe-signature"),
            ),
            case(
                "non-numeric t",
                stripe_only(),
                with(format!("t=yesterday,v1={STRIPE_SIG}")),
                STRIPE_BODY,
                malformed("stripe-signature"),
            ),
            case(
                "fractional t",
                stripe_only(),
                with(format!("t={NOW}.0,v1={STRIPE_SIG}")),
                STRIPE_BODY,
                malformed("stripe-signature"),
            ),
            case(
                "negative t",
                stripe_only(),
                with(format!("t=-1,v1={STRIPE_SIG}")),
                STRIPE_BODY,
                malformed("stripe-signature"),
            ),
            case(
                "t with a plus sign",
                stripe_only(),
                with(format!("t=+{NOW},v1={STRIPE_SIG}")),
                STRIPE_BODY,
                malformed("stripe-signature"),
            ),
            case(
                "t overflowing i64",
                stripe_only(),
                with(format!("t=9223372036854775808,v1={STRIPE_SIG}")),
                STRIPE_BODY,
                malformed("stripe-signature"),
            ),
            case(
                "two t entries",
                stripe_only(),
                with(format!("t={NOW},t={NOW},v1={STRIPE_SIG}")),
                STRIPE_BODY,
                malformed("stripe-signature"),
            ),
            case(
                "more than 16 entries",
                stripe_only(),
                with(format!("t={NOW}{sixteen_v1}")),
                STRIPE_BODY,
                malformed("stripe-signature"),
            ),
            case(
                "only v0, even with the right value",
                stripe_only(),
                with(format!("t={NOW},v0={STRIPE_SIG}")),
                STRIPE_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "empty v1",
                stripe_only(),
                with(format!("t={NOW},v1=")),
                STRIPE_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "v1 truncated to 31 bytes",
                stripe_only(),
                stripe_header(&STRIPE_SIG[..62]),
                STRIPE_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "v1 of odd length",
                stripe_only(),
                stripe_header(&STRIPE_SIG[..63]),
                STRIPE_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "v1 too long",
                stripe_only(),
                stripe_header(&format!("{STRIPE_SIG}00")),
                STRIPE_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "v1 not hex",
                stripe_only(),
                stripe_header(&"zz".repeat(32)),
                STRIPE_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "no secret configured",
                vec![],
                stripe_header(STRIPE_SIG),
                STRIPE_BODY,
                Err(VerifyError::NoSecret),
            ),
            case(
                "only an empty secret configured",
                vec![raw("")],
                stripe_header(STRIPE_SIG),
                STRIPE_BODY,
                Err(VerifyError::NoSecret),
            ),
            case(
                "bad signature on a non-JSON body is 401, not 400",
                stripe_only(),
                stripe_header(STRIPE_SIG),
                "not json",
                Err(VerifyError::InvalidSignature),
            ),
        ],
        NOW,
    );
}

#[test]
fn stripe_signed_body_without_json_id_is_a_bad_request() {
    let signed = |body: &[u8]| stripe_header(&stripe_sig(STRIPE_SECRET, NOW, body));
    run(
        &STRIPE,
        vec![
            case(
                "invalid UTF-8 body (openssl signature)",
                stripe_only(),
                stripe_header(STRIPE_INVALID_UTF8_SIG),
                STRIPE_INVALID_UTF8_BODY,
                Err(VerifyError::InvalidJson),
            ),
            case(
                "body is not JSON",
                stripe_only(),
                signed(b"id=evt_1"),
                "id=evt_1",
                Err(VerifyError::InvalidJson),
            ),
            case(
                "no id",
                stripe_only(),
                signed(br#"{"type":"invoice.paid"}"#),
                r#"{"type":"invoice.paid"}"#,
                Err(VerifyError::MissingDeliveryId),
            ),
            case(
                "empty id",
                stripe_only(),
                signed(br#"{"id":""}"#),
                r#"{"id":""}"#,
                Err(VerifyError::MissingDeliveryId),
            ),
            case(
                "numeric id",
                stripe_only(),
                signed(br#"{"id":7}"#),
                r#"{"id":7}"#,
                Err(VerifyError::MissingDeliveryId),
            ),
            case(
                "JSON array",
                stripe_only(),
                signed(b"[1]"),
                "[1]",
                Err(VerifyError::MissingDeliveryId),
            ),
        ],
        NOW,
    );
}

// ---------------------------------------------------------------------------------------
// GitHub
// ---------------------------------------------------------------------------------------

// GitHub's worked example, "Validating webhook deliveries" (docs.github.com), section
// "Testing the webhook payload validation".
pub(crate) const GITHUB_DOC_SECRET: &str = "It's a Secret to Everybody";
pub(crate) const GITHUB_DOC_BODY: &str = "Hello, World!";
pub(crate) const GITHUB_DOC_SIGNATURE: &str =
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
const GITHUB_OTHER_SECRET: &str = "rotated-github-secret";
// Computed with `printf '%s' "$BODY" | openssl dgst -sha256 -hmac "It's a Secret to Everybody"`.
const GITHUB_UTF8_BODY: &str = "Grüße, 世界!";
const GITHUB_UTF8_SIGNATURE: &str =
    "sha256=12573b9b071cd2bf21bd6a47afa972728fa1eac6f30551b4ba37657e32eafd5d";
const GITHUB_INVALID_UTF8_BODY: &[u8] = b"\xff\xfe\xfd";
const GITHUB_INVALID_UTF8_SIGNATURE: &str =
    "sha256=3f3cfa248997f515818093671997dc0987ac197b05fa6770409118d95a80b5b4";
const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

/// The signature header plus the delivery and event headers GitHub always sends.
fn github_headers(signature: impl AsRef<[u8]>) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        h("X-Hub-Signature-256", signature),
        h("X-GitHub-Delivery", DELIVERY),
        h("X-GitHub-Event", "ping"),
    ]
}

fn github_doc_secret() -> Vec<Secret> {
    vec![raw(GITHUB_DOC_SECRET)]
}

#[test]
fn github_accepts_documented_example_and_genuine_signatures() {
    let ping = ok(DELIVERY, IdOrigin::Header, Some("ping"));
    let other_sig = format!(
        "sha256={}",
        hex::encode(hmac(
            GITHUB_OTHER_SECRET.as_bytes(),
            &[GITHUB_DOC_BODY.as_bytes()]
        ))
    );
    let names_lower = vec![
        h("x-hub-signature-256", GITHUB_DOC_SIGNATURE),
        h("x-github-delivery", DELIVERY),
        h("x-github-event", "ping"),
    ];
    let names_upper = vec![
        h("X-HUB-SIGNATURE-256", GITHUB_DOC_SIGNATURE),
        h("X-GITHUB-DELIVERY", DELIVERY),
        h("X-GITHUB-EVENT", "ping"),
    ];
    run(
        &Scheme::Github,
        vec![
            case(
                "GitHub's documented example",
                github_doc_secret(),
                github_headers(GITHUB_DOC_SIGNATURE),
                GITHUB_DOC_BODY,
                ping.clone(),
            ),
            case(
                "header names in lower case",
                github_doc_secret(),
                names_lower,
                GITHUB_DOC_BODY,
                ping.clone(),
            ),
            case(
                "header names in upper case",
                github_doc_secret(),
                names_upper,
                GITHUB_DOC_BODY,
                ping.clone(),
            ),
            case(
                "documented secret second in a rotated pair",
                vec![raw(GITHUB_OTHER_SECRET), raw(GITHUB_DOC_SECRET)],
                github_headers(GITHUB_DOC_SIGNATURE),
                GITHUB_DOC_BODY,
                ping.clone(),
            ),
            case(
                "other secret of a rotated pair",
                vec![raw(GITHUB_DOC_SECRET), raw(GITHUB_OTHER_SECRET)],
                github_headers(&other_sig),
                GITHUB_DOC_BODY,
                ping.clone(),
            ),
            case(
                "upper-case hex digits",
                github_doc_secret(),
                github_headers(format!(
                    "sha256={}",
                    GITHUB_DOC_SIGNATURE["sha256=".len()..].to_uppercase()
                )),
                GITHUB_DOC_BODY,
                ping.clone(),
            ),
            case(
                "UTF-8 body",
                github_doc_secret(),
                github_headers(GITHUB_UTF8_SIGNATURE),
                GITHUB_UTF8_BODY,
                ping.clone(),
            ),
            case(
                "invalid UTF-8 body",
                github_doc_secret(),
                github_headers(GITHUB_INVALID_UTF8_SIGNATURE),
                GITHUB_INVALID_UTF8_BODY,
                ping.clone(),
            ),
            case(
                "no event header",
                github_doc_secret(),
                vec![
                    h("X-Hub-Signature-256", GITHUB_DOC_SIGNATURE),
                    h("X-GitHub-Delivery", DELIVERY),
                ],
                GITHUB_DOC_BODY,
                ok(DELIVERY, IdOrigin::Header, None),
            ),
        ],
        NOW,
    );
}

#[test]
fn github_rejects_unauthentic_requests() {
    let hex = &GITHUB_DOC_SIGNATURE["sha256=".len()..];
    run(
        &Scheme::Github,
        vec![
            case(
                "body tampered",
                github_doc_secret(),
                github_headers(GITHUB_DOC_SIGNATURE),
                "Hello, World?",
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "wrong secret",
                vec![raw(GITHUB_OTHER_SECRET)],
                github_headers(GITHUB_DOC_SIGNATURE),
                GITHUB_DOC_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "signature header missing",
                github_doc_secret(),
                vec![h("X-GitHub-Delivery", DELIVERY)],
                GITHUB_DOC_BODY,
                missing("x-hub-signature-256"),
            ),
            case(
                "only the legacy SHA-1 header",
                github_doc_secret(),
                vec![
                    h("X-Hub-Signature", format!("sha1={}", "0".repeat(40))),
                    h("X-GitHub-Delivery", DELIVERY),
                ],
                GITHUB_DOC_BODY,
                missing("x-hub-signature-256"),
            ),
            case(
                "empty hex after sha256=",
                github_doc_secret(),
                github_headers("sha256="),
                GITHUB_DOC_BODY,
                malformed("x-hub-signature-256"),
            ),
            case(
                "hex without the sha256= prefix",
                github_doc_secret(),
                github_headers(hex),
                GITHUB_DOC_BODY,
                malformed("x-hub-signature-256"),
            ),
            case(
                "sha1= prefix",
                github_doc_secret(),
                github_headers(format!("sha1={hex}")),
                GITHUB_DOC_BODY,
                malformed("x-hub-signature-256"),
            ),
            case(
                "hex truncated to 31 bytes",
                github_doc_secret(),
                github_headers(&GITHUB_DOC_SIGNATURE[..GITHUB_DOC_SIGNATURE.len() - 2]),
                GITHUB_DOC_BODY,
                malformed("x-hub-signature-256"),
            ),
            case(
                "hex of odd length",
                github_doc_secret(),
                github_headers(&GITHUB_DOC_SIGNATURE[..GITHUB_DOC_SIGNATURE.len() - 1]),
                GITHUB_DOC_BODY,
                malformed("x-hub-signature-256"),
            ),
            case(
                "hex too long",
                github_doc_secret(),
                github_headers(format!("{GITHUB_DOC_SIGNATURE}00")),
                GITHUB_DOC_BODY,
                malformed("x-hub-signature-256"),
            ),
            case(
                "not hex",
                github_doc_secret(),
                github_headers(format!("sha256={}", "zz".repeat(32))),
                GITHUB_DOC_BODY,
                malformed("x-hub-signature-256"),
            ),
            case(
                "two signatures: GitHub sends exactly one",
                github_doc_secret(),
                github_headers(format!("sha256={},{GITHUB_DOC_SIGNATURE}", "0".repeat(64))),
                GITHUB_DOC_BODY,
                malformed("x-hub-signature-256"),
            ),
            case(
                "header value with UTF-8",
                github_doc_secret(),
                github_headers(format!("{GITHUB_DOC_SIGNATURE}é")),
                GITHUB_DOC_BODY,
                missing("x-hub-signature-256"),
            ),
            case(
                "header value with invalid UTF-8",
                github_doc_secret(),
                github_headers([GITHUB_DOC_SIGNATURE.as_bytes(), b"\xff"].concat()),
                GITHUB_DOC_BODY,
                missing("x-hub-signature-256"),
            ),
            case(
                "no secret configured",
                vec![],
                github_headers(GITHUB_DOC_SIGNATURE),
                GITHUB_DOC_BODY,
                Err(VerifyError::NoSecret),
            ),
            case(
                "bad signature and no delivery header is 401, not 400",
                github_doc_secret(),
                vec![h("X-Hub-Signature-256", GITHUB_DOC_SIGNATURE)],
                "Hello, World?",
                Err(VerifyError::InvalidSignature),
            ),
        ],
        NOW,
    );
}

#[test]
fn github_signed_request_without_delivery_header_is_a_bad_request() {
    let signed_with = |delivery: &[u8]| {
        vec![
            h("X-Hub-Signature-256", GITHUB_DOC_SIGNATURE),
            h("X-GitHub-Delivery", delivery),
        ]
    };
    run(
        &Scheme::Github,
        vec![
            case(
                "delivery header missing",
                github_doc_secret(),
                vec![h("X-Hub-Signature-256", GITHUB_DOC_SIGNATURE)],
                GITHUB_DOC_BODY,
                Err(VerifyError::MissingDeliveryId),
            ),
            case(
                "delivery header empty",
                github_doc_secret(),
                signed_with(b""),
                GITHUB_DOC_BODY,
                Err(VerifyError::MissingDeliveryId),
            ),
            case(
                "delivery header not visible ASCII: refused with its reason, not as missing",
                github_doc_secret(),
                signed_with("déjà".as_bytes()),
                GITHUB_DOC_BODY,
                Err(VerifyError::NonAsciiDeliveryId("x-github-delivery".into())),
            ),
        ],
        NOW,
    );
}

// ---------------------------------------------------------------------------------------
// Standard Webhooks
// ---------------------------------------------------------------------------------------

const STANDARD: Scheme = Scheme::Standard {
    tolerance_secs: DEFAULT_TOLERANCE_SECS,
    raw_secrets: false,
};
// The Standard Webhooks test vector, published in the reference libraries' tests
// (standard-webhooks/standard-webhooks, libraries/php/tests/WebhookTest.php,
// `testSignFunctionWorks`; the same values appear in Svix's libraries).
pub(crate) const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub(crate) const SW_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
pub(crate) const SW_TIMESTAMP: i64 = 1_614_265_330;
pub(crate) const SW_BODY: &str = r#"{"test": 2432232314}"#;
pub(crate) const SW_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
// Another published secret (from svix/svix-webhooks rust/src/webhooks.rs), used as the
// second key of a rotation.
pub(crate) const SW_OTHER_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
// Computed with openssl over "{SW_ID}.{SW_TIMESTAMP}.{body}", key = base64-decoded SW_SECRET
// (`openssl dgst -sha256 -mac HMAC -macopt hexkey:… -binary | base64`).
const SW_UTF8_BODY: &str = r#"{"type":"user.created","name":"Zoë 東京"}"#;
const SW_UTF8_SIGNATURE: &str = "v1,MwqAOGMYckyd9Qt5eg86w69EY+0pN4u8efWvDJ8lRdk=";
const SW_INVALID_UTF8_BODY: &[u8] = b"\xff\xfe\xfd";
const SW_INVALID_UTF8_SIGNATURE: &str = "v1,lzb0htapYgTTpRUuEjKNzl6f8W/+EMiVtjqf9WKbKFQ=";
// Polar-style raw secret (not `whsec_`): the key is the string's bytes. Signed with
// `openssl dgst -sha256 -hmac polar_raw_secret -binary | base64` over the vector's content.
const POLAR_RAW_SECRET: &str = "polar_raw_secret";
const POLAR_SIGNATURE: &str = "v1,nAg6D34QL/tVyBs+Bh49D4RnAWSJyMoBp407UibT6+U=";

fn sw_headers(
    id: impl AsRef<[u8]>,
    timestamp: impl AsRef<[u8]>,
    signature: impl AsRef<[u8]>,
) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        h("webhook-id", id),
        h("webhook-timestamp", timestamp),
        h("webhook-signature", signature),
    ]
}

/// The vector's id and timestamp with the given signature header value.
fn sw_signed(signature: impl AsRef<[u8]>) -> Vec<(&'static str, Vec<u8>)> {
    sw_headers(SW_ID, SW_TIMESTAMP.to_string(), signature)
}

fn sw_sig(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = standard_secret(secret);
    let tag = hmac(
        key.expose(),
        &[
            id.as_bytes(),
            b".",
            timestamp.to_string().as_bytes(),
            b".",
            body,
        ],
    );
    format!("v1,{}", base64(&tag))
}

fn sw_only() -> Vec<Secret> {
    vec![standard_secret(SW_SECRET)]
}

#[test]
fn standard_accepts_published_vector_and_genuine_signatures() {
    let vector = ok(SW_ID, IdOrigin::Header, None);
    let other_sig = sw_sig(SW_OTHER_SECRET, SW_ID, SW_TIMESTAMP, SW_BODY.as_bytes());
    let at = |t: i64| {
        sw_headers(
            SW_ID,
            t.to_string(),
            sw_sig(SW_SECRET, SW_ID, t, SW_BODY.as_bytes()),
        )
    };
    let numeric_type = br#"{"type":5}"#;
    run(
        &STANDARD,
        vec![
            case(
                "published test vector",
                sw_only(),
                sw_signed(SW_SIGNATURE),
                SW_BODY,
                vector.clone(),
            ),
            case(
                "header names in upper case",
                sw_only(),
                vec![
                    h("WEBHOOK-ID", SW_ID),
                    h("WEBHOOK-TIMESTAMP", SW_TIMESTAMP.to_string()),
                    h("WEBHOOK-SIGNATURE", SW_SIGNATURE),
                ],
                SW_BODY,
                vector.clone(),
            ),
            case(
                "svix- header names (Clerk, Resend)",
                sw_only(),
                vec![
                    h("svix-id", SW_ID),
                    h("svix-timestamp", SW_TIMESTAMP.to_string()),
                    h("svix-signature", SW_SIGNATURE),
                ],
                SW_BODY,
                vector.clone(),
            ),
            case(
                "vector secret second in a rotated pair",
                vec![standard_secret(SW_OTHER_SECRET), standard_secret(SW_SECRET)],
                sw_signed(SW_SIGNATURE),
                SW_BODY,
                vector.clone(),
            ),
            case(
                "other secret of a rotated pair",
                vec![standard_secret(SW_SECRET), standard_secret(SW_OTHER_SECRET)],
                sw_signed(&other_sig),
                SW_BODY,
                vector.clone(),
            ),
            case(
                "only the second signature matches",
                sw_only(),
                sw_signed(format!("{other_sig} {SW_SIGNATURE}")),
                SW_BODY,
                vector.clone(),
            ),
            case(
                "v1a and v2 entries are skipped",
                sw_only(),
                sw_signed(format!("v1a,{0} v2,{0} {SW_SIGNATURE}", &SW_SIGNATURE[3..])),
                SW_BODY,
                vector.clone(),
            ),
            case(
                "timestamp exactly at tolerance in the past",
                sw_only(),
                at(NOW - 300),
                SW_BODY,
                vector.clone(),
            ),
            case(
                "timestamp exactly at tolerance in the future",
                sw_only(),
                at(NOW + 300),
                SW_BODY,
                vector.clone(),
            ),
            case(
                "UTF-8 body with a type",
                sw_only(),
                sw_signed(SW_UTF8_SIGNATURE),
                SW_UTF8_BODY,
                ok(SW_ID, IdOrigin::Header, Some("user.created")),
            ),
            case(
                "invalid UTF-8 body: not JSON, so no type",
                sw_only(),
                sw_signed(SW_INVALID_UTF8_SIGNATURE),
                SW_INVALID_UTF8_BODY,
                vector.clone(),
            ),
            case(
                "raw (Polar) secret",
                vec![raw(POLAR_RAW_SECRET)],
                sw_signed(POLAR_SIGNATURE),
                SW_BODY,
                vector.clone(),
            ),
            case(
                "type that is not a string",
                sw_only(),
                sw_signed(sw_sig(SW_SECRET, SW_ID, SW_TIMESTAMP, numeric_type)),
                numeric_type,
                vector.clone(),
            ),
        ],
        NOW,
    );
}

/// Svix's own Rust library test vector (svix/svix-webhooks, rust/src/webhooks.rs,
/// `test_sign`), checked at its own timestamp.
#[test]
fn standard_accepts_svix_library_vector_at_its_timestamp() {
    let headers = sw_headers(
        "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
        "1649367553",
        "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
    );
    let body = br#"{"email":"test@example.com","username":"test_user"}"#;
    let got = verify(
        &STANDARD,
        &[standard_secret(SW_OTHER_SECRET)],
        &header_map(&headers),
        body,
        1_649_367_553,
    );
    assert_eq!(
        got,
        ok("msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", IdOrigin::Header, None)
    );
}

#[test]
fn standard_rejects_unauthentic_requests() {
    let b64 = &SW_SIGNATURE["v1,".len()..];
    let signed_at = |t: i64| {
        sw_headers(
            SW_ID,
            t.to_string(),
            sw_sig(SW_SECRET, SW_ID, t, SW_BODY.as_bytes()),
        )
    };
    let with_timestamp = |t: &str| sw_headers(SW_ID, t, SW_SIGNATURE);
    let seventeen = format!("{} {SW_SIGNATURE}", vec!["v1a,x"; 16].join(" "));
    run(
        &STANDARD,
        vec![
            case(
                "body tampered",
                sw_only(),
                sw_signed(SW_SIGNATURE),
                r#"{"test": 2432232315}"#,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "wrong secret",
                vec![standard_secret(SW_OTHER_SECRET)],
                sw_signed(SW_SIGNATURE),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "id changed after signing",
                sw_only(),
                sw_headers("msg_other", SW_TIMESTAMP.to_string(), SW_SIGNATURE),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "timestamp changed after signing",
                sw_only(),
                with_timestamp(&(NOW + 1).to_string()),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "timestamp one second past tolerance in the past",
                sw_only(),
                signed_at(NOW - 301),
                SW_BODY,
                Err(VerifyError::TimestampOutOfTolerance),
            ),
            case(
                "timestamp one second past tolerance in the future",
                sw_only(),
                signed_at(NOW + 301),
                SW_BODY,
                Err(VerifyError::TimestampOutOfTolerance),
            ),
            case(
                "timestamp past tolerance with a bad signature: signature is checked first",
                sw_only(),
                with_timestamp(&(NOW - 301).to_string()),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "signature header missing",
                sw_only(),
                vec![
                    h("webhook-id", SW_ID),
                    h("webhook-timestamp", SW_TIMESTAMP.to_string()),
                ],
                SW_BODY,
                missing("webhook-signature"),
            ),
            case(
                "id header missing",
                sw_only(),
                vec![
                    h("webhook-timestamp", SW_TIMESTAMP.to_string()),
                    h("webhook-signature", SW_SIGNATURE),
                ],
                SW_BODY,
                missing("webhook-id"),
            ),
            case(
                "timestamp header missing",
                sw_only(),
                vec![h("webhook-id", SW_ID), h("webhook-signature", SW_SIGNATURE)],
                SW_BODY,
                missing("webhook-timestamp"),
            ),
            case(
                "spellings mixed: webhook-signature with svix-id",
                sw_only(),
                vec![
                    h("svix-id", SW_ID),
                    h("webhook-timestamp", SW_TIMESTAMP.to_string()),
                    h("webhook-signature", SW_SIGNATURE),
                ],
                SW_BODY,
                missing("webhook-id"),
            ),
            case(
                "empty v1,",
                sw_only(),
                sw_signed("v1,"),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "v1 truncated to 30 bytes",
                sw_only(),
                sw_signed(&SW_SIGNATURE[..SW_SIGNATURE.len() - 4]),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "v1 without base64 padding",
                sw_only(),
                sw_signed(SW_SIGNATURE.trim_end_matches('=')),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "v1 not base64",
                sw_only(),
                sw_signed("v1,***"),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "entry without a comma",
                sw_only(),
                sw_signed(format!("v1{b64}")),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "only v1a, even with the right value",
                sw_only(),
                sw_signed(format!("v1a,{b64}")),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "non-numeric timestamp",
                sw_only(),
                with_timestamp("now"),
                SW_BODY,
                malformed("webhook-timestamp"),
            ),
            case(
                "fractional timestamp",
                sw_only(),
                with_timestamp("1614265330.0"),
                SW_BODY,
                malformed("webhook-timestamp"),
            ),
            case(
                "negative timestamp",
                sw_only(),
                with_timestamp("-1614265330"),
                SW_BODY,
                malformed("webhook-timestamp"),
            ),
            case(
                "timestamp overflowing i64",
                sw_only(),
                with_timestamp("99999999999999999999"),
                SW_BODY,
                malformed("webhook-timestamp"),
            ),
            case(
                "more than 16 entries",
                sw_only(),
                sw_signed(seventeen),
                SW_BODY,
                malformed("webhook-signature"),
            ),
            case(
                "signature header with UTF-8",
                sw_only(),
                sw_signed(format!("{SW_SIGNATURE} v1,é")),
                SW_BODY,
                missing("webhook-signature"),
            ),
            case(
                "id header with invalid UTF-8: its raw bytes are what is signed",
                sw_only(),
                sw_headers(b"msg_\xff", SW_TIMESTAMP.to_string(), SW_SIGNATURE),
                SW_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "no secret configured",
                vec![],
                sw_signed(SW_SIGNATURE),
                SW_BODY,
                Err(VerifyError::NoSecret),
            ),
        ],
        NOW,
    );
}

#[test]
fn standard_signed_request_with_empty_id_is_a_bad_request() {
    let signature = sw_sig(SW_SECRET, "", NOW, SW_BODY.as_bytes());
    run(
        &STANDARD,
        vec![case(
            "empty webhook-id",
            sw_only(),
            sw_headers("", NOW.to_string(), signature),
            SW_BODY,
            Err(VerifyError::MissingDeliveryId),
        )],
        NOW,
    );
}

// ---------------------------------------------------------------------------------------
// Generic HMAC
// ---------------------------------------------------------------------------------------

const HMAC_SECRET: &str = "generic-secret";
const HMAC_OTHER_SECRET: &str = "generic-secret-2";
const HMAC_BODY: &str = r#"{"event":"order.created","delivery":"dlv_1"}"#;
// Computed with `printf '%s' "$HMAC_BODY" | openssl dgst -sha256 -hmac generic-secret`
// (hex; and `-binary | base64`), and `openssl dgst -sha256` for the body hash.
const HMAC_HEX: &str = "663e11732f420e85c5025319ec05c057bc677a1cbd0ccd0555e12b02ea9db175";
const HMAC_BASE64: &str = "Zj4Rcy9CDoXFAlMZ7AXAV7xnehy9DM0FVeErAuqdsXU=";
const HMAC_BODY_SHA256: &str = "ed601c46f19be3403d314552967fb2a08692b702fd99329187fb8f35e75ba2e8";
const HMAC_INVALID_UTF8_BODY: &[u8] = b"\xff\xfe\xfd";
const HMAC_INVALID_UTF8_HEX: &str =
    "52e365da2d0859b813ba2d46c8fb5ddf550caf437c67ff9b77783f070449b653";
const INVALID_UTF8_BODY_SHA256: &str =
    "8ca9f8c269c0a4b1d8bf0efc67d97df8ad5e0ea93630fd9099860d36c0fe75ea";

fn generic(
    header: &str,
    prefix: &str,
    encoding: SignatureEncoding,
    id: IdLocation,
    event_type_pointer: Option<&str>,
) -> Scheme {
    Scheme::Hmac(HmacScheme {
        signature_header: header.to_owned(),
        prefix: prefix.to_owned(),
        encoding,
        id,
        event_type_pointer: event_type_pointer.map(str::to_owned),
    })
}

fn hmac_only() -> Vec<Secret> {
    vec![raw(HMAC_SECRET)]
}

fn generic_hex(secret: &str, body: &[u8]) -> String {
    hex::encode(hmac(secret.as_bytes(), &[body]))
}

#[test]
fn generic_hmac_hex_with_prefix_reads_id_header() {
    let scheme = generic(
        "X-Signature",
        "sha256=",
        SignatureEncoding::Hex,
        IdLocation::Header("X-Delivery-Id".to_owned()),
        Some("/event"),
    );
    let signed = |sig: &str| vec![h("X-Signature", sig), h("X-Delivery-Id", "dlv_header")];
    let created = ok("dlv_header", IdOrigin::Header, Some("order.created"));
    let other = format!(
        "sha256={}",
        generic_hex(HMAC_OTHER_SECRET, HMAC_BODY.as_bytes())
    );
    let numeric_event = br#"{"event":5}"#;
    let rotated = || vec![raw(HMAC_SECRET), raw(HMAC_OTHER_SECRET)];
    run(
        &scheme,
        vec![
            case(
                "hex computed with openssl",
                hmac_only(),
                signed(&format!("sha256={HMAC_HEX}")),
                HMAC_BODY,
                created.clone(),
            ),
            case(
                "header names in any case",
                hmac_only(),
                vec![
                    h("x-signature", format!("sha256={HMAC_HEX}")),
                    h("X-DELIVERY-ID", "dlv_header"),
                ],
                HMAC_BODY,
                created.clone(),
            ),
            case(
                "upper-case hex digits",
                hmac_only(),
                signed(&format!("sha256={}", HMAC_HEX.to_uppercase())),
                HMAC_BODY,
                created.clone(),
            ),
            case(
                "first secret of a rotated pair",
                rotated(),
                signed(&format!("sha256={HMAC_HEX}")),
                HMAC_BODY,
                created.clone(),
            ),
            case(
                "second secret of a rotated pair",
                rotated(),
                signed(&other),
                HMAC_BODY,
                created.clone(),
            ),
            case(
                "event type that is not a string",
                hmac_only(),
                signed(&format!(
                    "sha256={}",
                    generic_hex(HMAC_SECRET, numeric_event)
                )),
                numeric_event,
                ok("dlv_header", IdOrigin::Header, None),
            ),
            case(
                "body tampered",
                hmac_only(),
                signed(&format!("sha256={HMAC_HEX}")),
                HMAC_BODY.replace("created", "deleted"),
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "wrong secret",
                vec![raw(HMAC_OTHER_SECRET)],
                signed(&format!("sha256={HMAC_HEX}")),
                HMAC_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "signature header missing",
                hmac_only(),
                vec![h("X-Delivery-Id", "dlv_header")],
                HMAC_BODY,
                missing("X-Signature"),
            ),
            case(
                "prefix missing",
                hmac_only(),
                signed(HMAC_HEX),
                HMAC_BODY,
                malformed("X-Signature"),
            ),
            case(
                "empty after the prefix",
                hmac_only(),
                signed("sha256="),
                HMAC_BODY,
                malformed("X-Signature"),
            ),
            case(
                "hex truncated to 31 bytes",
                hmac_only(),
                signed(&format!("sha256={}", &HMAC_HEX[..62])),
                HMAC_BODY,
                malformed("X-Signature"),
            ),
            case(
                "hex of odd length",
                hmac_only(),
                signed(&format!("sha256={}", &HMAC_HEX[..63])),
                HMAC_BODY,
                malformed("X-Signature"),
            ),
            case(
                "two signatures: the scheme carries one",
                hmac_only(),
                signed(&format!("sha256={},{HMAC_HEX}", "0".repeat(64))),
                HMAC_BODY,
                malformed("X-Signature"),
            ),
            case(
                "header value with UTF-8",
                hmac_only(),
                signed(&format!("sha256={HMAC_HEX}é")),
                HMAC_BODY,
                missing("X-Signature"),
            ),
            case(
                "no secret configured",
                vec![],
                signed(&format!("sha256={HMAC_HEX}")),
                HMAC_BODY,
                Err(VerifyError::NoSecret),
            ),
            case(
                "signed, id header missing",
                hmac_only(),
                vec![h("X-Signature", format!("sha256={HMAC_HEX}"))],
                HMAC_BODY,
                Err(VerifyError::MissingDeliveryId),
            ),
            case(
                "signed, id header empty",
                hmac_only(),
                vec![
                    h("X-Signature", format!("sha256={HMAC_HEX}")),
                    h("X-Delivery-Id", ""),
                ],
                HMAC_BODY,
                Err(VerifyError::MissingDeliveryId),
            ),
        ],
        NOW,
    );
}

#[test]
fn generic_hmac_base64_reads_id_from_json_pointer() {
    let scheme = generic(
        "x-signature",
        "",
        SignatureEncoding::Base64,
        IdLocation::JsonPointer("/delivery".to_owned()),
        None,
    );
    let signed = |sig: &str| vec![h("x-signature", sig)];
    let sign = |body: &[u8]| {
        vec![h(
            "x-signature",
            base64(&hmac(HMAC_SECRET.as_bytes(), &[body])),
        )]
    };
    run(
        &scheme,
        vec![
            case(
                "base64 computed with openssl",
                hmac_only(),
                signed(HMAC_BASE64),
                HMAC_BODY,
                ok("dlv_1", IdOrigin::Body, None),
            ),
            case(
                "integer id is written in decimal",
                hmac_only(),
                sign(br#"{"delivery":42}"#),
                r#"{"delivery":42}"#,
                ok("42", IdOrigin::Body, None),
            ),
            case(
                "body tampered",
                hmac_only(),
                signed(HMAC_BASE64),
                HMAC_BODY.replace("dlv_1", "dlv_2"),
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "wrong secret",
                vec![raw(HMAC_OTHER_SECRET)],
                signed(HMAC_BASE64),
                HMAC_BODY,
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "empty signature",
                hmac_only(),
                signed(""),
                HMAC_BODY,
                malformed("x-signature"),
            ),
            case(
                "base64 truncated",
                hmac_only(),
                signed(&HMAC_BASE64[..40]),
                HMAC_BODY,
                malformed("x-signature"),
            ),
            case(
                "base64 without padding",
                hmac_only(),
                signed(HMAC_BASE64.trim_end_matches('=')),
                HMAC_BODY,
                malformed("x-signature"),
            ),
            case(
                "not base64",
                hmac_only(),
                signed("***"),
                HMAC_BODY,
                malformed("x-signature"),
            ),
            case(
                "hex where base64 is configured",
                hmac_only(),
                signed(HMAC_HEX),
                HMAC_BODY,
                malformed("x-signature"),
            ),
            case(
                "signed, body not JSON",
                hmac_only(),
                sign(b"delivery=dlv_1"),
                "delivery=dlv_1",
                Err(VerifyError::InvalidJson),
            ),
            case(
                "signed, body invalid UTF-8",
                hmac_only(),
                sign(HMAC_INVALID_UTF8_BODY),
                HMAC_INVALID_UTF8_BODY,
                Err(VerifyError::InvalidJson),
            ),
            case(
                "signed, id field missing",
                hmac_only(),
                sign(br#"{"event":"x"}"#),
                r#"{"event":"x"}"#,
                Err(VerifyError::MissingDeliveryId),
            ),
            case(
                "signed, id empty",
                hmac_only(),
                sign(br#"{"delivery":""}"#),
                r#"{"delivery":""}"#,
                Err(VerifyError::MissingDeliveryId),
            ),
            case(
                "signed, id a float",
                hmac_only(),
                sign(br#"{"delivery":4.2}"#),
                r#"{"delivery":4.2}"#,
                Err(VerifyError::MissingDeliveryId),
            ),
            case(
                "signed, id a boolean",
                hmac_only(),
                sign(br#"{"delivery":true}"#),
                r#"{"delivery":true}"#,
                Err(VerifyError::MissingDeliveryId),
            ),
        ],
        NOW,
    );
}

#[test]
fn generic_hmac_without_sender_id_uses_body_sha256() {
    let scheme = generic(
        "x-signature",
        "",
        SignatureEncoding::Hex,
        IdLocation::BodySha256,
        Some("/event"),
    );
    let signed = |sig: &str| vec![h("x-signature", sig)];
    run(
        &scheme,
        vec![
            case(
                "JSON body",
                hmac_only(),
                signed(HMAC_HEX),
                HMAC_BODY,
                ok(
                    HMAC_BODY_SHA256,
                    IdOrigin::BodySha256,
                    Some("order.created"),
                ),
            ),
            case(
                "invalid UTF-8 body: no JSON, no type, still an id",
                hmac_only(),
                signed(HMAC_INVALID_UTF8_HEX),
                HMAC_INVALID_UTF8_BODY,
                ok(INVALID_UTF8_BODY_SHA256, IdOrigin::BodySha256, None),
            ),
            case(
                "body tampered",
                hmac_only(),
                signed(HMAC_HEX),
                format!("{HMAC_BODY} "),
                Err(VerifyError::InvalidSignature),
            ),
            case(
                "signature header missing",
                hmac_only(),
                vec![],
                HMAC_BODY,
                missing("x-signature"),
            ),
        ],
        NOW,
    );
}

#[test]
fn generic_hmac_invalid_configured_header_name_is_missing_not_a_panic() {
    let scheme = generic(
        "not a header name",
        "",
        SignatureEncoding::Hex,
        IdLocation::BodySha256,
        None,
    );
    let got = verify(
        &scheme,
        &hmac_only(),
        &header_map(&[h("x-signature", HMAC_HEX)]),
        HMAC_BODY.as_bytes(),
        NOW,
    );
    assert_eq!(got, missing("not a header name"));
}

// ---------------------------------------------------------------------------------------
// Cross-cutting
// ---------------------------------------------------------------------------------------

/// The test-only signer agrees with every published or independently computed vector, so
/// rows it signs are as trustworthy as the literal ones.
#[test]
fn test_signer_reproduces_published_vectors() {
    let github = format!(
        "sha256={}",
        hex::encode(hmac(
            GITHUB_DOC_SECRET.as_bytes(),
            &[GITHUB_DOC_BODY.as_bytes()]
        ))
    );
    assert_eq!(github, GITHUB_DOC_SIGNATURE);
    assert_eq!(
        sw_sig(SW_SECRET, SW_ID, SW_TIMESTAMP, SW_BODY.as_bytes()),
        SW_SIGNATURE
    );
    assert_eq!(
        stripe_sig(STRIPE_SECRET, NOW, STRIPE_BODY.as_bytes()),
        STRIPE_SIG
    );
}

#[test]
fn errors_never_contain_secrets_or_signatures() {
    let secrets = [raw("super-secret-value")];
    let failures = [
        verify(
            &STRIPE,
            &secrets,
            &header_map(&stripe_header(STRIPE_SIG)),
            STRIPE_BODY.as_bytes(),
            NOW,
        ),
        verify(
            &Scheme::Github,
            &secrets,
            &header_map(&github_headers("sha256=zz")),
            b"",
            NOW,
        ),
        verify(
            &STANDARD,
            &secrets,
            &header_map(&sw_signed(SW_SIGNATURE)),
            SW_BODY.as_bytes(),
            NOW,
        ),
    ];
    for failure in failures {
        let error = failure.unwrap_err();
        for text in [error.to_string(), format!("{error:?}")] {
            assert!(!text.contains("super-secret-value"), "{text}");
            assert!(!text.contains(STRIPE_SIG), "{text}");
            assert!(!text.contains(&SW_SIGNATURE[3..]), "{text}");
        }
    }
}

#[test]
fn only_id_and_json_errors_are_bad_requests() {
    assert!(!VerifyError::MissingDeliveryId.is_unauthorized());
    assert!(!VerifyError::InvalidJson.is_unauthorized());
    assert!(!VerifyError::NonAsciiDeliveryId("x".to_owned()).is_unauthorized());
    assert!(!VerifyError::InvalidDeliveryId.is_unauthorized());
    for unauthorized in [
        VerifyError::MalformedTimestamp("body /ts".to_owned()),
        VerifyError::MissingHeader("x".to_owned()),
        VerifyError::MalformedHeader("x".to_owned()),
        VerifyError::InvalidSignature,
        VerifyError::TimestampOutOfTolerance,
        VerifyError::NoSecret,
    ] {
        assert!(unauthorized.is_unauthorized(), "{unauthorized:?}");
    }
}

#[test]
fn signed_ids_that_cannot_be_stored_are_refused_and_bad_event_types_dropped() {
    let ok = |id: &str, t: Option<&str>| Verified {
        delivery_id: id.into(),
        id_origin: IdOrigin::Header,
        event_type: t.map(String::from),
    };
    assert!(storable(ok("evt_'\"quoted", Some("push"))).is_ok());
    assert_eq!(
        storable(ok("a\0b", None)),
        Err(VerifyError::InvalidDeliveryId)
    );
    assert_eq!(
        storable(ok(&"x".repeat(MAX_ID_LEN + 1), None)),
        Err(VerifyError::InvalidDeliveryId)
    );
    assert!(storable(ok(&"x".repeat(MAX_ID_LEN), None)).is_ok());
    let dropped = storable(ok("id", Some("bad\0type"))).unwrap();
    assert_eq!(dropped.event_type, None);
    assert!(!VerifyError::InvalidDeliveryId.is_unauthorized());
}

/// What a configured signed message covers: an id or a timestamp counts only where the message
/// includes it (a body field always is), so only a signed timestamp refuses old requests.
#[test]
fn a_signed_schemes_id_and_timestamp_count_only_where_the_message_covers_them() {
    let base = SignedScheme {
        algorithm: Algorithm::Sha256,
        signature_header: "X-Sig".into(),
        other_signature_headers: Vec::new(),
        encoding: SignatureEncoding::Hex,
        format: SignatureFormat::Prefixed(String::new()),
        message: vec![MessagePart::Body],
        timestamp: None,
        id: IdLocation::Header("X-Id".into()),
        event_type: None,
        public_url: None,
    };
    let ts = |from: TimestampFrom| {
        Some(TimestampRule {
            from,
            unit: TimestampUnit::Seconds,
            tolerance: Tolerance::Both(300),
        })
    };
    let with = |change: &dyn Fn(&mut SignedScheme)| {
        let mut s = base.clone();
        change(&mut s);
        Scheme::Signed(s)
    };
    // (what, scheme, signs the id, refuses old requests)
    let table: Vec<(&str, Scheme, bool, bool)> = vec![
        ("id header, body only", with(&|_| {}), false, false),
        (
            "id header signed as the id part",
            with(&|s| s.message = vec![MessagePart::Id, MessagePart::Body]),
            true,
            false,
        ),
        (
            "id header signed as a named header, any case",
            with(&|s| s.message = vec![MessagePart::Header("x-id".into()), MessagePart::Body]),
            true,
            false,
        ),
        (
            "another header signed",
            with(&|s| s.message = vec![MessagePart::Header("X-Other".into()), MessagePart::Body]),
            false,
            false,
        ),
        (
            "id in the body",
            with(&|s| s.id = IdLocation::JsonPointer("/id".into())),
            true,
            false,
        ),
        (
            "id is the body's hash",
            with(&|s| s.id = IdLocation::BodySha256),
            true,
            false,
        ),
        (
            "several headers, one unsigned",
            with(&|s| {
                s.id = IdLocation::FirstHeader(vec!["X-Id".into(), "X-Id-2".into()]);
                s.message = vec![MessagePart::Header("X-Id".into()), MessagePart::Body];
            }),
            false,
            false,
        ),
        (
            "timestamp header not in the message",
            with(&|s| s.timestamp = ts(TimestampFrom::Header("X-Ts".into()))),
            false,
            false,
        ),
        (
            "timestamp header in the message",
            with(&|s| {
                s.timestamp = ts(TimestampFrom::Header("X-Ts".into()));
                s.message = vec![MessagePart::Timestamp, MessagePart::Body];
            }),
            false,
            true,
        ),
        (
            "timestamp header signed as a named header",
            with(&|s| {
                s.timestamp = ts(TimestampFrom::Header("X-Ts".into()));
                s.message = vec![MessagePart::Header("X-TS".into()), MessagePart::Body];
            }),
            false,
            true,
        ),
        (
            "signature-list timestamp not in the message",
            with(&|s| {
                s.format = SignatureFormat::List {
                    separator: ',',
                    signature_key: "v1".into(),
                    timestamp_key: Some("t".into()),
                };
                s.timestamp = ts(TimestampFrom::Signature);
            }),
            false,
            false,
        ),
        (
            "timestamp in the body",
            with(&|s| s.timestamp = ts(TimestampFrom::Body("/ts".into()))),
            false,
            true,
        ),
    ];
    for (what, scheme, signs_id, refuses_old) in table {
        assert_eq!(scheme.signs_delivery_id(), signs_id, "{what}: signs the id");
        assert_eq!(
            scheme.refuses_old_requests(),
            refuses_old,
            "{what}: refuses old"
        );
        assert_eq!(
            scheme.needs_replay_guard(),
            !signs_id && !refuses_old,
            "{what}: replay guard"
        );
    }
    // The fixed kinds.
    let github = Scheme::Github;
    assert!(github.needs_replay_guard());
    let hmac_header = Scheme::Hmac(HmacScheme {
        signature_header: "X-Sig".into(),
        prefix: String::new(),
        encoding: SignatureEncoding::Hex,
        id: IdLocation::Header("X-Id".into()),
        event_type_pointer: None,
    });
    assert!(hmac_header.needs_replay_guard());
    let Scheme::Hmac(mut body_id) = hmac_header.clone() else {
        unreachable!()
    };
    body_id.id = IdLocation::JsonPointer("/id".into());
    assert!(!Scheme::Hmac(body_id).needs_replay_guard());
    for scheme in [
        Scheme::Stripe {
            tolerance_secs: 300,
        },
        Scheme::Standard {
            tolerance_secs: 300,
            raw_secrets: false,
        },
    ] {
        assert!(scheme.signs_delivery_id() && scheme.refuses_old_requests());
    }
    let token = Scheme::Token(TokenScheme {
        token_header: "X-Token".into(),
        id: IdLocation::JsonPointer("/id".into()),
        event_type: None,
    });
    assert!(
        token.needs_replay_guard(),
        "a token signs nothing, not even the body"
    );
}

/// A verify token is among a source's secrets only for its handshake: it never verifies a
/// signature, even one computed with its bytes.
#[test]
fn a_verify_token_never_verifies_a_signature() {
    let body = br#"{"zen":"x"}"#;
    let sig = format!("sha256={}", hex::encode(hmac(b"tok", &[body])));
    let headers = header_map(&[h("x-hub-signature-256", sig), h("x-github-delivery", "d1")]);
    assert_eq!(
        verify(
            &Scheme::Github,
            &[Secret::verify_token("tok")],
            &headers,
            body,
            0
        ),
        Err(VerifyError::NoSecret)
    );
    assert!(verify(&Scheme::Github, &[raw("tok")], &headers, body, 0).is_ok());
}
