//! Pieces the Rust benchmark harnesses share: the deliveries they send (API Gateway HTTP API
//! events carrying GitHub-signed bodies) and the results directory.

#![allow(dead_code)]

use std::path::PathBuf;

use hmac::Mac as _;
use sha2::Sha256;

/// The key the benchmark deliveries are signed with: the first of the two GitHub secrets in
/// `env.local.json`, so verification computes one HMAC per delivery, as with a single secret.
pub const GITHUB_KEY: &str = "hookclaim-github-next-secret";

/// Size of every delivery body, in bytes (a small real GitHub or Stripe event is 1 to 8 KB).
pub const BODY_BYTES: usize = 1024;

/// A 63-bit random delivery id, in decimal: new for all practical purposes.
pub fn new_id() -> u64 {
    fastrand::u64(1..i64::MAX as u64)
}

/// A JSON body of exactly [`BODY_BYTES`] bytes with `order_id` where the licence example finds it.
pub fn body(order_id: u64) -> String {
    let head = format!(
        r#"{{"action":"completed","order_id":"{order_id}","repository":{{"full_name":"hookclaim/bench"}},"padding":""#
    );
    let tail = r#""}"#;
    let pad = BODY_BYTES.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad))
}

/// `X-Hub-Signature-256` for `body`.
pub fn signature(body: &[u8]) -> String {
    let mut mac =
        hmac::Hmac::<Sha256>::new_from_slice(GITHUB_KEY.as_bytes()).expect("any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The API Gateway HTTP API (payload format 2.0) event for GitHub delivery `id` whose body names
/// order `id`, as the Lambda runtime hands it to the function: the bytes `lambda_http` parses.
pub fn github_event(id: u64) -> String {
    github_event_with_body(id, id)
}

/// [`github_event`] for delivery `id` with the body of order `order_id`.
pub fn github_event_with_body(id: u64, order_id: u64) -> String {
    let body = body(order_id);
    let sig = signature(body.as_bytes());
    let len = body.len();
    let body = serde_json::to_string(&body).expect("a string serialises");
    format!(
        r#"{{"version":"2.0","routeKey":"POST /webhooks/{{source}}","rawPath":"/webhooks/github","rawQueryString":"","headers":{{"accept":"*/*","content-length":"{len}","content-type":"application/json","host":"abc.execute-api.us-east-1.amazonaws.com","user-agent":"GitHub-Hookshot/bench","x-amzn-trace-id":"Root=1-67750000-0123456789abcdef01234567","x-forwarded-for":"192.0.2.10","x-forwarded-port":"443","x-forwarded-proto":"https","x-github-delivery":"{id}","x-github-event":"push","x-github-hook-id":"1","x-hub-signature-256":"{sig}"}},"requestContext":{{"accountId":"123456789012","apiId":"abc","domainName":"abc.execute-api.us-east-1.amazonaws.com","domainPrefix":"abc","http":{{"method":"POST","path":"/webhooks/github","protocol":"HTTP/1.1","sourceIp":"192.0.2.10","userAgent":"GitHub-Hookshot/bench"}},"requestId":"r{id}","routeKey":"POST /webhooks/{{source}}","stage":"$default","time":"01/Jan/2026:00:00:00 +0000","timeEpoch":1767225600000}},"pathParameters":{{"source":"github"}},"body":{body},"isBase64Encoded":false}}"#
    )
}

/// Where results go: `$HOOKCLAIM_BENCH_OUT`, or `target/bench`.
pub fn out_dir() -> PathBuf {
    let dir = std::env::var_os("HOOKCLAIM_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench")));
    std::fs::create_dir_all(&dir).expect("create the results directory");
    dir
}

/// Writes `value` as `<out_dir>/<name>.json`.
pub fn write_json(name: &str, value: &serde_json::Value) {
    let path = out_dir().join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).expect("results serialise");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    eprintln!("wrote {}", path.display());
}

/// A number from the environment, or `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
