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

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use http::HeaderMap;
use sha2::{Digest as _, Sha256};

use hookclaim_verify::secret::Secret;
use hookclaim_verify::{self as verify, Outgoing, Scheme, SigningKey};

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

/// The headers a sender of `scheme` sends with `body` and delivery `id`, signed with the bench
/// key by the crate's signer.
fn signed(scheme: &Scheme, id: &str, body: &[u8]) -> HeaderMap {
    let sent = Outgoing::new(body, NOW).id(id).event_type("push");
    verify::sign(scheme, &[SigningKey::hmac(KEY)], &sent)
        .expect("a request the scheme's senders could send")
        .header_map()
}

const GITHUB_ID: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

/// A scheme's name, its settings, and the delivery id its requests carry in a header.
type Case = (&'static str, Scheme, &'static str);

fn bench(c: &mut Criterion) {
    let secrets = [Secret::from_bytes(KEY.to_vec())];
    let schemes: [Case; 3] = [
        ("github", Scheme::Github, GITHUB_ID),
        (
            "stripe",
            Scheme::Stripe {
                tolerance_secs: 300,
            },
            "",
        ),
        (
            "standard",
            Scheme::Standard {
                tolerance_secs: 300,
                raw_secrets: false,
            },
            "msg_2Lbench",
        ),
    ];
    for (size, label) in SIZES {
        let body = json_body(size);
        let mut group = c.benchmark_group(format!("verify_{label}"));
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::new("sha256", label), |b| {
            b.iter(|| Sha256::digest(black_box(&body)))
        });
        for (name, scheme, id) in &schemes {
            let hm = signed(scheme, id, &body);
            assert!(
                verify::verify(scheme, &secrets, &hm, &body, NOW).is_ok(),
                "{name} sample verifies"
            );
            group.bench_function(BenchmarkId::new(*name, label), |b| {
                b.iter(|| verify::verify(scheme, &secrets, black_box(&hm), black_box(&body), NOW))
            });
        }
        let hm = signed(&Scheme::Github, GITHUB_ID, &body);
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
        let hm = signed(&Scheme::Github, GITHUB_ID, &body);
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

    /// The Ed25519 key's seed.
    const SEED: [u8; 32] = [7; 32];

    fn seed() -> SigningKey {
        SigningKey::from_bytes(&SEED)
    }

    pub fn cases(body: &[u8]) -> Vec<Case> {
        let preset = |name: &str| presets::lookup(name).expect("preset").scheme(None, URL);
        let hmac = || verify::SigningKey::hmac(KEY);
        let ed25519 = || verify::SigningKey::ed25519(SEED);
        let sent = || Outgoing::new(body, NOW);
        let standard = Scheme::Standard {
            tolerance_secs: 300,
            raw_secrets: false,
        };
        // Twilio signs a JSON body's hash through the URL (`bodySHA256`).
        let twilio = sent()
            .header("content-type", "application/json")
            .id("bench-1");
        let gitlab = sent().id("bench-1");
        let v1a = sent().id("msg_bench");
        [
            ("slack", "hmac_sha256", preset("slack"), hmac(), sent()),
            ("hubspot", "hmac_sha256", preset("hubspot"), hmac(), sent()),
            ("intercom", "hmac_sha1", preset("intercom"), hmac(), sent()),
            ("twilio_json", "sha256", preset("twilio"), hmac(), twilio),
            ("gitlab_token", "sha256", preset("gitlab"), hmac(), gitlab),
            ("discord", "ed25519", preset("discord"), ed25519(), sent()),
            ("standard_v1a", "ed25519", standard, ed25519(), v1a),
        ]
        .into_iter()
        .map(|(name, baseline, scheme, key, sent)| {
            let signed = verify::sign(&scheme, std::slice::from_ref(&key), &sent)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            Case {
                name,
                baseline,
                secrets: vec![key.verifying_secret()],
                headers: signed.header_map(),
                query: signed.query().to_owned(),
                scheme,
            }
        })
        .collect()
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
