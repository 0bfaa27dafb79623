//! Signature verification throughput against plain SHA-256 over the same bytes, for 1 KB, 64 KB
//! and 1 MB bodies; and each provider kind (the signed-message presets, SHA-1, Twilio, the
//! static token, Ed25519) against the primitive it is built on (`providers_paired`; alone with
//! `cargo bench -p hookclaim-verify-bench -- providers`).
//!
//! `verify/github` is the pure HMAC case (id and type in headers). `verify/stripe` and
//! `verify/standard` also parse the JSON body for the delivery id or event type, as the handler
//! needs them. `handler_hashing/github` is everything the handler hashes per delivery: the
//! verification plus the SHA-256 of the payload it stores. Run with
//! `cargo bench -p hookclaim-verify-bench` (scripts/bench does, with short measurement
//! times).

use std::hint::black_box;
use std::time::Duration;

use base64::Engine as _;
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use hmac::Mac as _;
use http::{HeaderMap, HeaderName, HeaderValue};
use sha2::{Digest as _, Sha256};

use hookclaim_verify::secret::Secret;
use hookclaim_verify::{self as verify, Scheme};

const SIZES: [(usize, &str); 3] = [(1024, "1KB"), (64 * 1024, "64KB"), (1024 * 1024, "1MB")];
const KEY: &[u8] = b"hookclaim-bench-secret";
const NOW: i64 = 1_767_225_600;

/// A JSON event of exactly `size` bytes with an `id` and a `type`.
fn json_body(size: usize) -> Vec<u8> {
    let head =
        r#"{"id":"evt_1Qbench000000000000000000","type":"checkout.session.completed","padding":""#;
    let tail = r#""}"#;
    let mut body = head.as_bytes().to_vec();
    body.resize(size - tail.len(), b'x');
    body.extend_from_slice(tail.as_bytes());
    body
}

fn mac(parts: &[&[u8]]) -> Vec<u8> {
    let mut m = hmac::Hmac::<Sha256>::new_from_slice(KEY).expect("any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().to_vec()
}

fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                HeaderName::from_static(k),
                HeaderValue::from_str(v).expect("header value"),
            )
        })
        .collect()
}

fn github(body: &[u8]) -> HeaderMap {
    headers(&[
        (
            "x-hub-signature-256",
            format!("sha256={}", hex::encode(mac(&[body]))),
        ),
        (
            "x-github-delivery",
            "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
        ),
        ("x-github-event", "push".into()),
    ])
}

fn stripe(body: &[u8]) -> HeaderMap {
    let t = NOW.to_string();
    let sig = hex::encode(mac(&[t.as_bytes(), b".", body]));
    headers(&[("stripe-signature", format!("t={t},v1={sig}"))])
}

fn standard(body: &[u8]) -> HeaderMap {
    let id = "msg_2Lbench";
    let t = NOW.to_string();
    let sig = base64::engine::general_purpose::STANDARD.encode(mac(&[
        id.as_bytes(),
        b".",
        t.as_bytes(),
        b".",
        body,
    ]));
    headers(&[
        ("webhook-id", id.into()),
        ("webhook-timestamp", t),
        ("webhook-signature", format!("v1,{sig}")),
    ])
}

/// A scheme's name, its settings, and how to sign a body for it.
type Case = (&'static str, Scheme, fn(&[u8]) -> HeaderMap);

fn bench(c: &mut Criterion) {
    let secrets = [Secret::from_bytes(KEY.to_vec())];
    let schemes: [Case; 3] = [
        ("github", Scheme::Github, github),
        (
            "stripe",
            Scheme::Stripe {
                tolerance_secs: 300,
            },
            stripe,
        ),
        (
            "standard",
            Scheme::Standard {
                tolerance_secs: 300,
                raw_secrets: false,
            },
            standard,
        ),
    ];
    for (size, label) in SIZES {
        let body = json_body(size);
        let mut group = c.benchmark_group(format!("verify_{label}"));
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::new("sha256", label), |b| {
            b.iter(|| Sha256::digest(black_box(&body)))
        });
        for (name, scheme, make) in &schemes {
            let hm = make(&body);
            assert!(
                verify::verify(scheme, &secrets, &hm, &body, NOW).is_ok(),
                "{name} sample verifies"
            );
            group.bench_function(BenchmarkId::new(*name, label), |b| {
                b.iter(|| verify::verify(scheme, &secrets, black_box(&hm), black_box(&body), NOW))
            });
        }
        let hm = github(&body);
        group.bench_function(BenchmarkId::new("handler_hashing_github", label), |b| {
            b.iter(|| {
                let v = verify::verify(
                    &Scheme::Github,
                    &secrets,
                    black_box(&hm),
                    black_box(&body),
                    NOW,
                );
                (v, Sha256::digest(black_box(&body)))
            })
        });
        group.finish();
    }
}

/// GitHub verification against SHA-256 over the same body, measured in interleaved rounds: each
/// round times a batch of one and then a batch of the other, so drift on a shared machine (other
/// processes, frequency changes) hits both alike; the ratio is the median of the rounds' ratios.
/// Criterion's separate means are kept for the absolute figures.
fn paired() {
    let secrets = [Secret::from_bytes(KEY.to_vec())];
    let quick = std::env::args().any(|a| a == "--measurement-time");
    let rounds = if quick { 21 } else { 201 };
    let mut out = Vec::new();
    for (size, label) in SIZES {
        let body = json_body(size);
        let hm = github(&body);
        // About 2 ms per batch.
        let batch = (2_000_000 / size).max(1);
        let time = |f: &dyn Fn()| {
            let t = std::time::Instant::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed().as_secs_f64()
        };
        let sha = || {
            black_box(Sha256::digest(black_box(&body)));
        };
        let ver = || {
            let v = verify::verify(&Scheme::Github, &secrets, black_box(&hm), &body, NOW);
            black_box(v.is_ok());
        };
        let mut ratios: Vec<f64> = (0..rounds).map(|_| time(&sha) / time(&ver)).collect();
        ratios.sort_by(f64::total_cmp);
        let median = ratios[ratios.len() / 2];
        let (p10, p90) = (ratios[ratios.len() / 10], ratios[ratios.len() * 9 / 10]);
        println!(
            "verify_{label}/paired: github / sha256 throughput ratio {median:.3} (p10 {p10:.3}, p90 {p90:.3}, {rounds} rounds)"
        );
        out.push(format!(
            r#"{{"size":"{label}","rounds":{rounds},"batch":{batch},"ratio_median":{median},"ratio_p10":{p10},"ratio_p90":{p90}}}"#
        ));
    }
    let dir = std::env::var_os("HOOKCLAIM_BENCH_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/bench").into());
    std::fs::create_dir_all(&dir).expect("results directory");
    std::fs::write(
        dir.join("verify_paired.json"),
        format!("[{}]", out.join(",")),
    )
    .expect("write verify_paired.json");
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}

fn main() {
    // `cargo bench -p hookclaim-verify-bench -- providers` runs the providers' comparison alone.
    if std::env::args().any(|a| a == "providers") {
        providers_paired();
        return;
    }
    benches();
    paired();
    providers_paired();
    Criterion::default().configure_from_args().final_summary();
}

// ---------------------------------------------------------------------------------------------
// The providers' kinds against the primitive each is built on, over the same bytes.
// ---------------------------------------------------------------------------------------------

mod providers {
    use super::*;
    use ed25519_dalek::{Signer as _, SigningKey, Verifier as _};
    use hookclaim_verify::{presets, Incoming};
    use sha1::Sha1;

    /// A preset (or a kind built from presets' parts), a request signed for it, and the
    /// primitive to compare it with.
    pub struct Case {
        pub name: &'static str,
        pub baseline: &'static str,
        pub scheme: Scheme,
        pub secrets: Vec<Secret>,
        pub headers: HeaderMap,
        pub query: String,
    }

    const URL: &str = "https://hooks.example.com/webhooks/bench";

    fn hmac_with<M: hmac::Mac + hmac::digest::KeyInit>(parts: &[&[u8]]) -> Vec<u8> {
        let mut m = <M as hmac::Mac>::new_from_slice(KEY).expect("any key length");
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().to_vec()
    }

    fn seed() -> SigningKey {
        SigningKey::from_bytes(&[7; 32])
    }

    pub fn cases(body: &[u8]) -> Vec<Case> {
        let t = NOW.to_string();
        let b64 = |b: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(b);
        let preset = |name: &str| presets::lookup(name).expect("preset").scheme(None, URL);
        let raw = || vec![Secret::from_bytes(KEY.to_vec())];
        let ms = (NOW * 1000).to_string();
        let twilio_query = format!("bodySHA256={}", hex::encode(Sha256::digest(body)));
        vec![
            Case {
                name: "slack",
                baseline: "hmac_sha256",
                scheme: preset("slack"),
                secrets: raw(),
                headers: headers(&[
                    ("x-slack-request-timestamp", t.clone()),
                    (
                        "x-slack-signature",
                        format!(
                            "v0={}",
                            hex::encode(hmac_with::<hmac::Hmac<Sha256>>(&[
                                b"v0:",
                                t.as_bytes(),
                                b":",
                                body
                            ]))
                        ),
                    ),
                ]),
                query: String::new(),
            },
            Case {
                name: "hubspot",
                baseline: "hmac_sha256",
                scheme: preset("hubspot"),
                secrets: raw(),
                headers: headers(&[
                    ("x-hubspot-request-timestamp", ms.clone()),
                    (
                        "x-hubspot-signature-v3",
                        b64(hmac_with::<hmac::Hmac<Sha256>>(&[
                            b"POST",
                            URL.as_bytes(),
                            body,
                            ms.as_bytes(),
                        ])),
                    ),
                ]),
                query: String::new(),
            },
            Case {
                name: "intercom",
                baseline: "hmac_sha1",
                scheme: preset("intercom"),
                secrets: raw(),
                headers: headers(&[(
                    "x-hub-signature",
                    format!(
                        "sha1={}",
                        hex::encode(hmac_with::<hmac::Hmac<Sha1>>(&[body]))
                    ),
                )]),
                query: String::new(),
            },
            Case {
                name: "twilio_json",
                baseline: "sha256",
                scheme: preset("twilio"),
                secrets: raw(),
                headers: headers(&[
                    (
                        "x-twilio-signature",
                        b64(hmac_with::<hmac::Hmac<Sha1>>(&[format!(
                            "{URL}?{twilio_query}"
                        )
                        .as_bytes()])),
                    ),
                    ("i-twilio-idempotency-token", "bench-1".into()),
                ]),
                query: twilio_query.clone(),
            },
            Case {
                name: "gitlab_token",
                baseline: "sha256",
                scheme: preset("gitlab"),
                secrets: raw(),
                headers: headers(&[
                    ("x-gitlab-token", String::from_utf8(KEY.to_vec()).unwrap()),
                    ("idempotency-key", "bench-1".into()),
                ]),
                query: String::new(),
            },
            Case {
                name: "discord",
                baseline: "ed25519",
                scheme: preset("discord"),
                secrets: vec![Secret::ed25519_public_key(
                    seed().verifying_key().to_bytes().to_vec(),
                )],
                headers: headers(&[
                    ("x-signature-timestamp", t.clone()),
                    (
                        "x-signature-ed25519",
                        hex::encode(seed().sign(&[t.as_bytes(), body].concat()).to_bytes()),
                    ),
                ]),
                query: String::new(),
            },
            Case {
                name: "standard_v1a",
                baseline: "ed25519",
                scheme: Scheme::Standard {
                    tolerance_secs: 300,
                    raw_secrets: false,
                },
                secrets: vec![Secret::ed25519_public_key(
                    seed().verifying_key().to_bytes().to_vec(),
                )],
                headers: headers(&[
                    ("webhook-id", "msg_bench".into()),
                    ("webhook-timestamp", t.clone()),
                    (
                        "webhook-signature",
                        format!(
                            "v1a,{}",
                            b64(seed()
                                .sign(&[b"msg_bench.", t.as_bytes(), b".", body].concat())
                                .to_bytes()
                                .to_vec())
                        ),
                    ),
                ]),
                query: String::new(),
            },
        ]
    }

    /// The whole verification, id and type included. The bench body carries no provider's id
    /// field everywhere (HubSpot's is an array), so what is asserted is authenticity: a
    /// missing id is a 400 after the same work.
    pub fn verify(case: &Case, body: &[u8]) -> bool {
        let req = Incoming {
            method: "POST",
            query: &case.query,
            headers: &case.headers,
            body,
        };
        verify::authenticate(&case.scheme, &case.secrets, &req, NOW).is_ok()
    }

    /// The primitive alone over the same body: a digest, an HMAC, or an Ed25519 check.
    pub fn baseline<'b>(name: &str, body: &'b [u8]) -> impl Fn() -> bool + 'b {
        let key = seed().verifying_key();
        let signature = seed().sign(body);
        let name = name.to_owned();
        move || match name.as_str() {
            "sha256" => black_box(Sha256::digest(black_box(body)))[0] != 1,
            "sha1" => black_box(Sha1::digest(black_box(body)))[0] != 1,
            "hmac_sha256" => black_box(hmac_with::<hmac::Hmac<Sha256>>(&[black_box(body)]))[0] != 1,
            "hmac_sha1" => black_box(hmac_with::<hmac::Hmac<Sha1>>(&[black_box(body)]))[0] != 1,
            _ => key.verify(black_box(body), &signature).is_ok(),
        }
    }
}

/// Each provider kind against its primitive over the same bytes, in interleaved rounds as in
/// `paired` (the median of the rounds' throughput ratios: 1.0 means as fast as the primitive
/// alone). Printed, and written to `verify_providers.json`.
fn providers_paired() {
    let quick = std::env::args().any(|a| a == "--measurement-time");
    let rounds = if quick { 21 } else { 101 };
    let mut out = Vec::new();
    for (size, label) in SIZES {
        let body = json_body(size);
        for case in providers::cases(&body) {
            assert!(
                providers::verify(&case, &body),
                "{} sample verifies",
                case.name
            );
            let base = providers::baseline(case.baseline, &body);
            let batch = (1_000_000 / size).max(1);
            let time = |f: &dyn Fn() -> bool| {
                let t = std::time::Instant::now();
                for _ in 0..batch {
                    black_box(f());
                }
                t.elapsed().as_secs_f64()
            };
            let mut ratios: Vec<f64> = (0..rounds)
                .map(|_| time(&base) / time(&|| providers::verify(&case, black_box(&body))))
                .collect();
            ratios.sort_by(f64::total_cmp);
            let median = ratios[ratios.len() / 2];
            let (p10, p90) = (ratios[ratios.len() / 10], ratios[ratios.len() * 9 / 10]);
            println!(
                "verify_{label}/providers: {:13} / {:11} throughput ratio {median:.3} (p10 {p10:.3}, p90 {p90:.3})",
                case.name, case.baseline
            );
            out.push(format!(
                r#"{{"size":"{label}","kind":"{}","baseline":"{}","rounds":{rounds},"ratio_median":{median},"ratio_p10":{p10},"ratio_p90":{p90}}}"#,
                case.name, case.baseline
            ));
        }
    }
    let dir = std::env::var_os("HOOKCLAIM_BENCH_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/bench").into());
    std::fs::create_dir_all(&dir).expect("results directory");
    std::fs::write(
        dir.join("verify_providers.json"),
        format!("[{}]", out.join(",")),
    )
    .expect("write verify_providers.json");
}
