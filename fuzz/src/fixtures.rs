//! The sample configuration the targets verify with: `env.local.json`'s sources and secrets (the
//! ones `scripts/events.py` signed `events/*.json` with), built once, and the samples' clock.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use hookclaim::config::{self, Source};
use hookclaim::keys::Keyring;
use hookclaim::secret::SecretsDocument;

/// The fixed clock the samples verify at: 90 s after they were signed (1767225600), 30 s after
/// the redeliveries were re-signed.
pub const SAMPLE_CLOCK: i64 = 1_767_225_690;

/// `env.local.json`, compiled in so the targets do not depend on the working directory.
const ENV_LOCAL: &str = include_str!("../../env.local.json");

/// The sample sources, secrets document and keyring.
pub struct Samples {
    /// `HOOKCLAIM_SOURCES`, parsed by the product's own `config::parse_sources`.
    pub sources: BTreeMap<String, Source>,
    /// `HOOKCLAIM_SECRETS`, parsed by the product's own `SecretsDocument::parse`.
    pub secrets: SecretsDocument,
    /// The keyring the webhook function would build from them.
    pub keyring: Keyring,
}

/// The samples, parsed on first use. Panics if `env.local.json` is unusable: that is a broken
/// fixture, not a finding, and it shows on the first input.
pub fn samples() -> &'static Samples {
    static SAMPLES: OnceLock<Samples> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let env: serde_json::Value =
            serde_json::from_str(ENV_LOCAL).expect("env.local.json is JSON");
        let text = |pointer: &str| {
            env.pointer(pointer)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_else(|| panic!("env.local.json has no string at {pointer}"))
        };
        let sources = config::parse_sources(text("/Parameters/HOOKCLAIM_SOURCES"))
            .expect("env.local.json HOOKCLAIM_SOURCES parses");
        let secrets = SecretsDocument::parse(text("/WebhookFunction/HOOKCLAIM_SECRETS"))
            .expect("env.local.json HOOKCLAIM_SECRETS parses");
        let keyring = Keyring::build(&sources, &secrets);
        Samples {
            sources,
            secrets,
            keyring,
        }
    })
}
