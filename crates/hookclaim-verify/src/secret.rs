//! Webhook signing secrets: a type that never prints its bytes, and the JSON document that maps
//! each source to its secrets (the same shape locally in `HOOKCLAIM_SECRETS` and in AWS Secrets
//! Manager).

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;

/// One signing key: an HMAC secret (or static token), an Ed25519 public key, or a provider's
/// handshake token (Meta's verify token). `Debug` and `Display` print `[redacted]`, so a secret
/// cannot reach a log or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    bytes: Vec<u8>,
    role: Role,
}

/// What a secret's bytes are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// An HMAC key or a static token.
    Key,
    /// An Ed25519 public key.
    PublicKey,
    /// A token a handshake compares, never a signing key (Meta's verify token).
    VerifyToken,
}

/// How a scheme's secrets are written in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
            role: Role::Key,
        }
    }

    /// An Ed25519 public key (32 bytes; anything else never verifies).
    pub fn ed25519_public_key(bytes: impl Into<Vec<u8>>) -> Self {
        Secret {
            bytes: bytes.into(),
            role: Role::PublicKey,
        }
    }

    /// Meta's verify token: compared by the subscription handshake, never used to verify a
    /// signature.
    pub fn verify_token(bytes: impl Into<Vec<u8>>) -> Self {
        Secret {
            bytes: bytes.into(),
            role: Role::VerifyToken,
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
        self.role == Role::PublicKey
    }

    /// Whether this is a handshake's verify token rather than a signing key.
    pub fn is_verify_token(&self) -> bool {
        self.role == Role::VerifyToken
    }

    /// Whether this is an HMAC key (or static token): what a MAC is computed with.
    pub fn is_key(&self) -> bool {
        self.role == Role::Key
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
#[non_exhaustive]
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
    /// The document is not `{"source": "secret" | ["newest", "older", ...]}` with, for a source
    /// that has one, `"source.verify_token": "token"`.
    #[error(
        "secrets document is not a JSON object of source name to a secret or a list of \
         secrets (and \"<source>.verify_token\" to a verify token)"
    )]
    NotADocument,
}

/// The key suffix of a source's verify token in the secrets document.
const VERIFY_TOKEN_SUFFIX: &str = ".verify_token";

/// The secrets document as stored: each source name maps to one secret or a list (newest
/// first); a source whose provider also has a verify token (Meta) has it under
/// `"<source>.verify_token"`. Every value is a string or a list of strings, so the document can
/// be written with Secrets Manager's key/value editor; source names never contain a dot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretsDocument {
    secrets: BTreeMap<String, Vec<String>>,
    verify_tokens: BTreeMap<String, String>,
}

impl SecretsDocument {
    /// Parses the document. The error never quotes the input.
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
        let mut doc = SecretsDocument::default();
        for (key, value) in raw {
            if let Some(source) = key.strip_suffix(VERIFY_TOKEN_SUFFIX) {
                doc.verify_tokens.insert(source.to_owned(), text(value)?);
            } else if key.contains('.') {
                // A misspelt suffix would silently leave a token out.
                return Err(SecretError::NotADocument);
            } else {
                let list = match value {
                    serde_json::Value::Array(items) => {
                        items.into_iter().map(text).collect::<Result<_, _>>()?
                    }
                    one => vec![text(one)?],
                };
                doc.secrets.insert(key, list);
            }
        }
        Ok(doc)
    }

    /// The sources the document names.
    pub fn sources(&self) -> impl Iterator<Item = &str> {
        self.secrets.keys().map(String::as_str)
    }

    /// The texts of `source`'s secrets as written, newest first; `None` when the document does
    /// not name the source.
    pub fn texts(&self, source: &str) -> Option<&[String]> {
        self.secrets.get(source).map(Vec::as_slice)
    }

    /// `source`'s secrets read as `format` says, newest first, followed by its verify token
    /// when it has one; empty when the document does not name the source.
    pub fn secrets_for(
        &self,
        source: &str,
        format: SecretFormat,
    ) -> Result<Vec<Secret>, SecretError> {
        let mut secrets = self
            .texts(source)
            .unwrap_or_default()
            .iter()
            .map(|text| Secret::parse(text, format))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(token) = self.verify_tokens.get(source) {
            if token.is_empty() {
                return Err(SecretError::Empty);
            }
            secrets.push(Secret::verify_token(token.as_bytes()));
        }
        Ok(secrets)
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
        assert_eq!(d.texts("a"), Some(&["x".to_string()][..]));
        assert_eq!(
            d.texts("b"),
            Some(&["new".to_string(), "old".to_string()][..])
        );
        assert_eq!(d.texts("c"), None);
        assert_eq!(d.sources().collect::<Vec<_>>(), ["a", "b"]);
        for bad in [
            "[1]",
            r#"{"a":1}"#,
            r#"{"a":["x",1]}"#,
            r#"{"a":{"secrets":"x"}}"#,
            r#"{"a":"x","a.verify_token":1}"#,
            r#"{"a":"x","a.verify_token":["t"]}"#,
            // A misspelt suffix would silently leave a token out.
            r#"{"a":"x","a.verify-token":"t"}"#,
        ] {
            assert_eq!(
                SecretsDocument::parse(bad),
                Err(SecretError::NotADocument),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_verify_token_is_read_with_its_sources_secrets_and_never_as_a_key() {
        let d = SecretsDocument::parse(
            r#"{"meta":["new","old"],"meta.verify_token":"tok","only.verify_token":"tok",
                "plain":"x"}"#,
        )
        .unwrap();
        let meta = d.secrets_for("meta", SecretFormat::Raw).unwrap();
        let roles: Vec<(&[u8], bool, bool)> = meta
            .iter()
            .map(|s| (s.expose(), s.is_key(), s.is_verify_token()))
            .collect();
        assert_eq!(
            roles,
            [
                (&b"new"[..], true, false),
                (&b"old"[..], true, false),
                (&b"tok"[..], false, true)
            ]
        );
        let only = d.secrets_for("only", SecretFormat::Raw).unwrap();
        assert!(only.len() == 1 && only[0].is_verify_token());
        assert_eq!(d.texts("only"), None);
        assert_eq!(d.secrets_for("plain", SecretFormat::Raw).unwrap().len(), 1);
        assert_eq!(d.secrets_for("absent", SecretFormat::Raw), Ok(Vec::new()));
        let empty = SecretsDocument::parse(r#"{"m":"x","m.verify_token":""}"#).unwrap();
        assert_eq!(
            empty.secrets_for("m", SecretFormat::Raw),
            Err(SecretError::Empty)
        );
        assert_eq!(format!("{:?}", meta[2]), "[redacted]");
    }
}
