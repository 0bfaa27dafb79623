//! The MACs the schemes use, the decoding of received signatures, and the constant-time
//! comparison between them.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::{Sha256, Sha512};
use subtle::ConstantTimeEq as _;

/// The hash under an HMAC. In configuration: `sha1`, `sha256` or `sha512`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(rename_all = "lowercase")
)]
#[non_exhaustive]
pub enum Algorithm {
    /// HMAC-SHA1 (Twilio, Intercom): 20-byte tags.
    Sha1,
    /// HMAC-SHA256: 32-byte tags.
    Sha256,
    /// HMAC-SHA512: 64-byte tags.
    Sha512,
}

impl Algorithm {
    /// The tag length in bytes: a received signature counts only if it decodes to exactly this.
    pub fn tag_len(self) -> usize {
        match self {
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 => 32,
            Algorithm::Sha512 => 64,
        }
    }
}

/// Text encoding of a signature. In configuration: `hex` or `base64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(rename_all = "lowercase")
)]
#[non_exhaustive]
pub enum SignatureEncoding {
    /// Lower- or upper-case hexadecimal.
    Hex,
    /// Standard base64 with padding.
    Base64,
}

/// A received signature decoded to exactly `len` bytes, or `None`: empty, truncated, odd-length
/// or over-long values can never match.
pub(super) fn decode(text: &str, encoding: SignatureEncoding, len: usize) -> Option<Vec<u8>> {
    let bytes = match encoding {
        SignatureEncoding::Hex => hex::decode(text).ok()?,
        SignatureEncoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()?,
    };
    (bytes.len() == len).then_some(bytes)
}

/// A MAC written as `encoding` writes it (lower-case hex, or padded base64).
#[cfg(feature = "sign")]
pub(super) fn encode(tag: &[u8], encoding: SignatureEncoding) -> String {
    match encoding {
        SignatureEncoding::Hex => hex::encode(tag),
        SignatureEncoding::Base64 => crate::sign::base64(tag),
    }
}

/// The HMAC of the concatenated `parts` under `key`. HMAC takes keys of any length, so this
/// cannot fail; `None` only keeps this module free of panics.
pub(super) fn compute(algorithm: Algorithm, key: &[u8], parts: &[&[u8]]) -> Option<Vec<u8>> {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Option<Vec<u8>> {
        let mut mac = <M as Mac>::new_from_slice(key).ok()?;
        for part in parts {
            mac.update(part);
        }
        Some(mac.finalize().into_bytes().to_vec())
    }
    match algorithm {
        Algorithm::Sha1 => run::<Hmac<Sha1>>(key, parts),
        Algorithm::Sha256 => run::<Hmac<Sha256>>(key, parts),
        Algorithm::Sha512 => run::<Hmac<Sha512>>(key, parts),
    }
}

/// True when the MAC of `parts` under any key equals any candidate. Each key's MAC is computed
/// once; every comparison is constant-time.
pub(super) fn any_key_matches(
    algorithm: Algorithm,
    keys: &[&[u8]],
    parts: &[&[u8]],
    candidates: &[Vec<u8>],
) -> bool {
    if candidates.is_empty() {
        return false;
    }
    keys.iter().any(|key| {
        let Some(expected) = compute(algorithm, key, parts) else {
            return false;
        };
        candidates
            .iter()
            .any(|candidate| ct_eq(&expected, candidate))
    })
}

/// Constant-time equality for byte strings of the same length (a tag's length is public).
pub(super) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    bool::from(a.ct_eq(b))
}
