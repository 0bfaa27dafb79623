//! Webhook signing secrets: a type that never prints its bytes, and the JSON document that maps
//! each source to its secrets (the same shape locally in `HOOKCLAIM_SECRETS` and in AWS Secrets
//! Manager).

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;

/// One signing key. `Debug` and `Display` print `[redacted]`, so a secret cannot reach a log or
/// an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A secret used as the exact bytes given (Stripe, GitHub, generic HMAC, Polar).
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(bytes.into())
    }

    /// A secret as written in configuration. For Standard Webhooks, a `whsec_` prefix means the
    /// rest is base64 and the key is the decoded bytes; any other string is used as raw bytes.
    /// For the other kinds the string's bytes are the key.
    pub fn parse(text: &str, standard_webhooks: bool) -> Result<Self, SecretError> {
        if standard_webhooks {
            if let Some(b64) = text.strip_prefix("whsec_") {
                let key = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|_| SecretError::InvalidWhsec)?;
                if key.is_empty() {
                    return Err(SecretError::Empty);
                }
                return Ok(Secret(key));
            }
        }
        if text.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(Secret(text.as_bytes().to_vec()))
    }

    /// The key bytes, for the HMAC only.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
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
    /// `whsec_` was followed by something that is not base64.
    #[error("secret starts with whsec_ but the rest is not valid base64")]
    InvalidWhsec,
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
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        let raw: BTreeMap<String, OneOrMany> =
            serde_json::from_str(json).map_err(|_| SecretError::NotADocument)?;
        let map = raw
            .into_iter()
            .map(|(source, v)| {
                let list = match v {
                    OneOrMany::One(s) => vec![s],
                    OneOrMany::Many(v) => v,
                };
                (source, list)
            })
            .collect();
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
    fn whsec_prefix_is_base64_decoded_only_for_standard_webhooks() {
        let s = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true).unwrap();
        assert_eq!(s.expose().len(), 24);
        let raw = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false).unwrap();
        assert_eq!(raw.expose(), b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        assert_eq!(
            Secret::parse("whsec_***", true),
            Err(SecretError::InvalidWhsec)
        );
        assert_eq!(Secret::parse("", false), Err(SecretError::Empty));
        assert_eq!(
            Secret::parse("polar_raw", true).unwrap().expose(),
            b"polar_raw"
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
