//! The sample secrets the targets verify with: `env.local.json`'s secrets document (the one
//! `scripts/events.py` signed `events/*.json` with), parsed once, and the samples' clock.

use std::sync::OnceLock;

use hookclaim_verify::{Secret, SecretFormat, SecretsDocument};

/// The fixed clock the samples verify at: 90 s after they were signed (1767225600), 30 s after
/// the redeliveries were re-signed.
pub const SAMPLE_CLOCK: i64 = 1_767_225_690;

/// `env.local.json`, compiled in so the targets do not depend on the working directory.
const ENV_LOCAL: &str = include_str!("../../../env.local.json");

/// `HOOKCLAIM_SECRETS` of `env.local.json`, parsed by the product's own `SecretsDocument::parse`
/// on first use. Panics if it is unusable: that is a broken fixture, not a finding, and it shows
/// on the first input.
pub fn sample_document() -> &'static SecretsDocument {
    static DOCUMENT: OnceLock<SecretsDocument> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let env: serde_json::Value =
            serde_json::from_str(ENV_LOCAL).expect("env.local.json is JSON");
        let text = env
            .pointer("/WebhookFunction/HOOKCLAIM_SECRETS")
            .and_then(serde_json::Value::as_str)
            .expect("env.local.json has HOOKCLAIM_SECRETS");
        SecretsDocument::parse(text).expect("env.local.json HOOKCLAIM_SECRETS parses")
    })
}

/// The configured secrets of the sample source `name` (newest first), read as `format` says
/// (unreadable ones left out); `None` when the samples have no such source.
pub fn sample_secrets(name: &str, format: SecretFormat) -> Option<Vec<Secret>> {
    let texts = sample_document().texts(name)?;
    Some(
        texts
            .iter()
            .filter_map(|t| Secret::parse(t, format).ok())
            .collect(),
    )
}
