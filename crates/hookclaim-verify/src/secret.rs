//! Webhook signing secrets: a type that never prints its bytes, and the JSON document that maps
//! each source to its secrets (the same shape locally in `HOOKCLAIM_SECRETS` and in AWS Secrets
//! Manager).

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;

/// One signing key: an HMAC secret (or static token), or an Ed25519 public key. `Debug` and
/// `Display` print `[redacted]`, so a secret cannot reach a log or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    bytes: Vec<u8>,
    public_key: bool,
}

/// How a scheme's secrets are written in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretFormat {
    /// The string's bytes are the key (Stripe, GitHub, generic HMAC, most presets, Polar).
    Raw,
    /// The Standard Webhooks specification: base64, with or without the `whsec_` prefix,
    /// padded or not; `whpk_` followed by base64 is an Ed25519 public key for `v1a`.
    StandardWebhooks,
    /// An Ed25519 public key as 64 hex digits (Discord's application public key).
    Ed25519Hex,
}

impl Secret {
    /// A secret used as the exact bytes given.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        Secret {
            bytes: bytes.into(),
            public_key: false,
        }
    }

    /// An Ed25519 public key (32 bytes; anything else never verifies).
    pub fn ed25519_public_key(bytes: impl Into<Vec<u8>>) -> Self {
        Secret {
            bytes: bytes.into(),
            public_key: true,
        }
    }

    /// A secret as written in configuration, read as `format` says.
    pub fn parse(text: &str, format: SecretFormat) -> Result<Self, SecretError> {
        if text.is_empty() {
            return Err(SecretError::Empty);
        }
        let secret = match format {
            SecretFormat::Raw => Secret::from_bytes(text.as_bytes()),
            SecretFormat::StandardWebhooks => match text.strip_prefix("whpk_") {
                Some(b64) => {
                    let key = decode_base64(b64).ok_or(SecretError::InvalidBase64)?;
                    if key.len() != 32 {
                        return Err(SecretError::InvalidPublicKey);
                    }
                    Secret::ed25519_public_key(key)
                }
                None => Secret::from_bytes(
                    decode_base64(text.strip_prefix("whsec_").unwrap_or(text))
                        .ok_or(SecretError::InvalidBase64)?,
                ),
            },
            SecretFormat::Ed25519Hex => {
                let key = hex::decode(text).map_err(|_| SecretError::InvalidPublicKey)?;
                if key.len() != 32 {
                    return Err(SecretError::InvalidPublicKey);
                }
                Secret::ed25519_public_key(key)
            }
        };
        if secret.bytes.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(secret)
    }

    /// The key bytes, for the MAC or the signature check only.
    pub fn expose(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether this is an Ed25519 public key rather than a shared secret.
    pub fn is_public_key(&self) -> bool {
        self.public_key
    }
}

/// Standard base64, padded or not (the Standard Webhooks specification allows both).
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text))
        .ok()
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Why a configured secret was refused. Never carries the secret itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// An empty string can never be a key.
    #[error("secret is empty")]
    Empty,
    /// A Standard Webhooks secret that is not base64 (after an optional `whsec_` or `whpk_`).
    #[error("secret is not base64 (with or without whsec_), as Standard Webhooks secrets are")]
    InvalidBase64,
    /// An Ed25519 public key that is not 32 bytes in the expected encoding.
    #[error("public key is not 32 bytes (64 hex digits, or whpk_ and base64)")]
    InvalidPublicKey,
    /// The document is not `{"source": "secret" | ["newest", "older", ...]}`.
    #[error(
        "secrets document is not a JSON object of source name to a secret or a list of secrets"
    )]
    NotADocument,
}

/// The secrets document as stored: each source name maps to one secret or a list (newest first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretsDocument(pub BTreeMap<String, Vec<String>>);

impl SecretsDocument {
    /// Parses `{"stripe": "whsec_…", "github": ["new", "old"]}`. The error never quotes the input.
    pub fn parse(json: &str) -> Result<Self, SecretError> {
        let serde_json::Value::Object(raw) =
            serde_json::from_str(json).map_err(|_| SecretError::NotADocument)?
        else {
            return Err(SecretError::NotADocument);
        };
        let text = |v: serde_json::Value| match v {
            serde_json::Value::String(s) => Ok(s),
            _ => Err(SecretError::NotADocument),
        };
        let map = raw
            .into_iter()
            .map(|(source, v)| {
                let list = match v {
                    serde_json::Value::Array(items) => {
                        items.into_iter().map(text).collect::<Result<_, _>>()?
                    }
                    one => vec![text(one)?],
                };
                Ok((source, list))
            })
            .collect::<Result<_, _>>()?;
        Ok(SecretsDocument(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_key() {
        let s = Secret::from_bytes("hunter2");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{s}"), "[redacted]");
    }

    #[test]
    fn each_format_reads_secrets_as_its_scheme_says() {
        let sw = SecretFormat::StandardWebhooks;
        let key = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", sw).unwrap();
        assert_eq!(key.expose().len(), 24);
        assert!(!key.is_public_key());
        // Without the prefix, and without padding, the same key.
        assert_eq!(
            Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", sw),
            Ok(key.clone())
        );
        assert_eq!(
            Secret::parse("whsec_aG9va2NsYWltLXN0YW5kYXJkLXRlc3Qta2V5", sw)
                .unwrap()
                .expose(),
            b"hookclaim-standard-test-key"
        );
        // Padded or not, prefixed or not: the same key.
        for text in ["YWJjZA==", "YWJjZA", "whsec_YWJjZA", "whsec_YWJjZA=="] {
            assert_eq!(Secret::parse(text, sw).unwrap().expose(), b"abcd", "{text}");
        }
        let raw = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", SecretFormat::Raw);
        assert_eq!(
            raw.unwrap().expose(),
            b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        );
        assert_eq!(
            Secret::parse("whsec_***", sw),
            Err(SecretError::InvalidBase64)
        );
        assert_eq!(
            Secret::parse("polar_raw", sw),
            Err(SecretError::InvalidBase64)
        );
        assert_eq!(Secret::parse("whsec_", sw), Err(SecretError::Empty));
        assert_eq!(
            Secret::parse("", SecretFormat::Raw),
            Err(SecretError::Empty)
        );
        let public = Secret::parse(&format!("whpk_{}", "A".repeat(43)), sw).unwrap();
        assert!(public.is_public_key());
        assert_eq!(
            Secret::parse("whpk_AAAA", sw),
            Err(SecretError::InvalidPublicKey)
        );
        let discord = Secret::parse(&"ab".repeat(32), SecretFormat::Ed25519Hex).unwrap();
        assert!(discord.is_public_key());
        assert_eq!(
            Secret::parse("abcd", SecretFormat::Ed25519Hex),
            Err(SecretError::InvalidPublicKey)
        );
    }

    #[test]
    fn document_accepts_one_or_many_and_rejects_other_shapes() {
        let d = SecretsDocument::parse(r#"{"a":"x","b":["new","old"]}"#).unwrap();
        assert_eq!(d.0["a"], vec!["x"]);
        assert_eq!(d.0["b"], vec!["new", "old"]);
        assert_eq!(
            SecretsDocument::parse("[1]"),
            Err(SecretError::NotADocument)
        );
        assert_eq!(
            SecretsDocument::parse(r#"{"a":1}"#),
            Err(SecretError::NotADocument)
        );
    }
}
