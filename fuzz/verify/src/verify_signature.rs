//! Target `verify_signature`: `verify::verify` for every scheme, on requests decoded from a
//! small text format, with invariants checked against an independent HMAC oracle.
//!
//! # Input format
//!
//! Total over any bytes (whatever does not parse falls back to a default), and plain enough
//! for `make-seeds.py` to write from the signed samples and for libFuzzer to mutate:
//!
//! ```text
//! hmac X-Acme-Signature sha256= hex header=X-Acme-Delivery /event    <- scheme line
//! @now +90                      <- clock: absolute, or relative to SAMPLE_CLOCK (the default)
//! @secrets acme,raw:other,empty <- secrets in order: sample source names, raw:<bytes>, empty
//! X-Acme-Signature: sha256=...  <- request headers, in order, duplicates kept
//! @sign acme upper              <- the harness adds a genuine signature (see `sign`)
//!                               <- blank line
//! {"event":"ping"}              <- body: every remaining byte, exactly
//! ```
//!
//! Scheme lines: `stripe [TOL]`, `github`, `standard [TOL] [raw]`,
//! `hmac HEADER PREFIX|- hex|base64 header=NAME|pointer=PTR|sha256 [TYPE_PTR|-]`.
//!
//! `@sign` lets the fuzzer reach what happens after a signature matches (timestamps, ids,
//! JSON) while it mutates timestamps, ids and bodies: a random signature never matches.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};
use sha2::{Digest as _, Sha256};

use hookclaim_verify::{
    self as verify, HmacScheme, IdLocation, IdOrigin, Scheme, Secret, SecretFormat,
    SignatureEncoding, Verified, VerifyError, DEFAULT_TOLERANCE_SECS, MAX_EVENT_TYPE_LEN,
    MAX_ID_LEN,
};

use crate::fixtures::{sample_secrets, SAMPLE_CLOCK};

/// One decoded input: everything `verify` takes.
#[derive(Debug, Clone)]
pub struct Case {
    /// The source's scheme.
    pub scheme: Scheme,
    /// The source's secrets, in order (empty ones included: `verify` must ignore them).
    pub secrets: Vec<Secret>,
    /// The request headers.
    pub headers: HeaderMap,
    /// The raw body.
    pub body: Vec<u8>,
    /// The clock.
    pub now: i64,
}

/// The target: decode, verify, check the invariants.
pub fn run(data: &[u8]) {
    let case = decode(data);
    let result = verify_case(&case);
    check(&case, &result);
}

/// Verifies a decoded case as the handler would.
fn verify_case(case: &Case) -> Result<Verified, VerifyError> {
    verify::verify(
        &case.scheme,
        &case.secrets,
        &case.headers,
        &case.body,
        case.now,
    )
}

/// Decodes an input (see the module documentation). Never fails.
pub fn decode(data: &[u8]) -> Case {
    let (head, body) = match find(data, b"\n\n") {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &[][..]),
    };
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let scheme = parse_scheme(&String::from_utf8_lossy(lines.next().unwrap_or_default()));
    let standard = scheme.secret_format();

    let mut case = Case {
        scheme,
        secrets: Vec::new(),
        headers: HeaderMap::new(),
        body: body.to_vec(),
        now: SAMPLE_CLOCK,
    };
    let mut signs = Vec::new();
    for line in lines {
        if let Some(rest) = line.strip_prefix(b"@now ") {
            case.now = parse_now(&String::from_utf8_lossy(rest));
        } else if let Some(rest) = line.strip_prefix(b"@secrets ") {
            case.secrets = split(rest, b',')
                .flat_map(|token| resolve_secret(token, standard))
                .collect();
        } else if let Some(rest) = line.strip_prefix(b"@sign ") {
            signs.push(rest.to_vec());
        } else if let Some(colon) = line.iter().position(|&b| b == b':') {
            let name = line[..colon].trim_ascii();
            let value = line[colon + 1..].trim_ascii_start();
            if let (Ok(name), Ok(value)) =
                (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
            {
                case.headers.append(name, value);
            }
        }
    }
    for directive in signs {
        sign(&mut case, &directive, standard);
    }
    case
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn split(bytes: &[u8], sep: u8) -> impl Iterator<Item = &[u8]> {
    bytes.split(move |&b| b == sep)
}

fn parse_scheme(line: &str) -> Scheme {
    let mut tokens = line.split(' ');
    let kind = tokens.next().unwrap_or_default();
    let tolerance = |t: Option<&str>| {
        t.and_then(|t| t.parse().ok())
            .unwrap_or(DEFAULT_TOLERANCE_SECS)
    };
    match kind {
        "stripe" => Scheme::Stripe {
            tolerance_secs: tolerance(tokens.next()),
        },
        "github" => Scheme::Github,
        "standard" => Scheme::Standard {
            tolerance_secs: tolerance(tokens.next()),
            raw_secrets: tokens.next() == Some("raw"),
        },
        "hmac" => {
            let signature_header = tokens.next().unwrap_or("X-Acme-Signature").to_owned();
            let prefix = match tokens.next() {
                None => "sha256=".to_owned(),
                Some("-") => String::new(),
                Some(p) => p.to_owned(),
            };
            let encoding = match tokens.next() {
                Some("base64") => SignatureEncoding::Base64,
                _ => SignatureEncoding::Hex,
            };
            let id = match tokens.next() {
                None => IdLocation::Header("X-Acme-Delivery".into()),
                Some(t) => {
                    if let Some(name) = t.strip_prefix("header=") {
                        IdLocation::Header(name.into())
                    } else if let Some(pointer) = t.strip_prefix("pointer=") {
                        IdLocation::JsonPointer(pointer.into())
                    } else {
                        IdLocation::BodySha256
                    }
                }
            };
            let event_type_pointer = match tokens.next() {
                None | Some("-") => None,
                Some(p) => Some(p.to_owned()),
            };
            Scheme::Hmac(HmacScheme {
                signature_header,
                prefix,
                encoding,
                id,
                event_type_pointer,
            })
        }
        // A mangled scheme line still picks some scheme, so mutations of it stay useful.
        other => match other.bytes().next().unwrap_or_default() % 4 {
            0 => Scheme::Stripe {
                tolerance_secs: DEFAULT_TOLERANCE_SECS,
            },
            1 => Scheme::Github,
            2 => Scheme::Standard {
                tolerance_secs: DEFAULT_TOLERANCE_SECS,
                raw_secrets: false,
            },
            _ => parse_scheme("hmac"),
        },
    }
}

fn parse_now(text: &str) -> i64 {
    let text = text.trim();
    if let Some(offset) = text.strip_prefix('+').and_then(|t| t.parse::<i64>().ok()) {
        return SAMPLE_CLOCK.saturating_add(offset);
    }
    if let Some(offset) = text.strip_prefix('-').and_then(|t| t.parse::<i64>().ok()) {
        return SAMPLE_CLOCK.saturating_sub(offset);
    }
    text.parse().unwrap_or(SAMPLE_CLOCK)
}

/// A secrets token: a sample source's name (all its secrets, as the keyring would parse them),
/// `empty`, or `raw:<bytes>`; anything else is itself, as raw bytes.
fn resolve_secret(token: &[u8], standard: SecretFormat) -> Vec<Secret> {
    if token == b"empty" {
        return vec![Secret::from_bytes(Vec::new())];
    }
    if let Some(raw) = token.strip_prefix(b"raw:") {
        return vec![Secret::from_bytes(raw)];
    }
    std::str::from_utf8(token)
        .ok()
        .and_then(|name| sample_secrets(name, standard))
        .unwrap_or_else(|| vec![Secret::from_bytes(token)])
}

/// `@sign KEY [upper] [first]`: adds a signature of the request as decoded so far, made with
/// the first secret `KEY` resolves to, in the scheme's own header format. `upper` writes hex in
/// upper case; `first` puts the new entry before the existing ones (Stripe, Standard).
///
/// - Stripe: signs `{t}.{body}` with the header's first `t=` (or now, writing `t=` when there is
///   no header) and adds a `v1=` entry.
/// - GitHub and generic HMAC: sets the signature header to the body's MAC.
/// - Standard: signs `{id}.{timestamp}.{body}` with the headers present (the `svix-` spelling
///   when only `svix-signature` is there; a missing timestamp becomes now) and adds a `v1,` entry.
fn sign(case: &mut Case, directive: &[u8], standard: SecretFormat) {
    let mut words = split(directive, b' ');
    let Some(key) = words
        .next()
        .and_then(|token| resolve_secret(token, standard).into_iter().next())
    else {
        return;
    };
    let (mut upper, mut first) = (false, false);
    for word in words {
        upper |= word == b"upper";
        first |= word == b"first";
    }
    let hex = |tag: [u8; 32]| {
        let text = hex::encode(tag);
        if upper {
            text.to_ascii_uppercase()
        } else {
            text
        }
    };
    let join = |existing: Option<String>, entry: String, sep: &str| match existing {
        Some(existing) if first => format!("{entry}{sep}{existing}"),
        Some(existing) => format!("{existing}{sep}{entry}"),
        None => entry,
    };
    let key = key.expose();
    let headers = &mut case.headers;
    let body = case.body.as_slice();
    let (name, value) = match &case.scheme {
        Scheme::Stripe { .. } => {
            let existing = text_header(headers, "stripe-signature");
            let t = existing
                .as_deref()
                .and_then(|h| h.split(',').find_map(|e| e.strip_prefix("t=")))
                .map(str::to_owned);
            let (t, existing) = match t {
                Some(t) => (t, existing),
                None => {
                    let t = case.now.to_string();
                    let with_t = join(existing, format!("t={t}"), ",");
                    (t, Some(with_t))
                }
            };
            let entry = format!("v1={}", hex(mac(key, &[t.as_bytes(), b".", body])));
            ("stripe-signature".to_owned(), join(existing, entry, ","))
        }
        Scheme::Github => (
            "x-hub-signature-256".to_owned(),
            format!("sha256={}", hex(mac(key, &[body]))),
        ),
        Scheme::Standard { .. } => {
            let prefix = if !headers.contains_key("webhook-signature")
                && headers.contains_key("svix-signature")
            {
                "svix"
            } else {
                "webhook"
            };
            let id = text_header(headers, &format!("{prefix}-id")).unwrap_or_default();
            let ts_name = format!("{prefix}-timestamp");
            let ts = match text_header(headers, &ts_name) {
                Some(ts) => ts,
                None => {
                    let ts = case.now.to_string();
                    if let Ok(value) = HeaderValue::from_str(&ts) {
                        if let Ok(name) = HeaderName::from_bytes(ts_name.as_bytes()) {
                            headers.insert(name, value);
                        }
                    }
                    ts
                }
            };
            let tag = mac(key, &[id.as_bytes(), b".", ts.as_bytes(), b".", body]);
            let entry = format!("v1,{}", b64(&tag));
            let sig_name = format!("{prefix}-signature");
            let existing = text_header(headers, &sig_name);
            (sig_name, join(existing, entry, " "))
        }
        Scheme::Hmac(h) => {
            let tag = mac(key, &[body]);
            let encoded = match h.encoding {
                SignatureEncoding::Hex => hex(tag),
                SignatureEncoding::Base64 => b64(&tag),
                // The hmac scheme line writes only the two encodings above.
                _ => return,
            };
            (h.signature_header.clone(), format!("{}{encoded}", h.prefix))
        }
        _ => return,
    };
    if let (Ok(name), Ok(value)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(&value),
    ) {
        headers.insert(name, value);
    }
}

/// The first value of a header, when it is visible ASCII.
fn text_header(headers: &HeaderMap, name: &str) -> Option<String> {
    Some(headers.get(name)?.to_str().ok()?.to_owned())
}

/// HMAC-SHA256 of the concatenated parts, computed here independently of the product.
fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The invariants of one verification.
pub fn check(case: &Case, result: &Result<Verified, VerifyError>) {
    let keys: Vec<&[u8]> = case
        .secrets
        .iter()
        .map(Secret::expose)
        .filter(|k| !k.is_empty())
        .collect();

    // Deterministic: the same request gives the same answer.
    let again = verify::verify(
        &case.scheme,
        &case.secrets,
        &case.headers,
        &case.body,
        case.now,
    );
    assert_eq!(&again, result, "verify is not deterministic");

    // No usable secret: refused, whatever the request (never Ok, never another error).
    assert_eq!(
        keys.is_empty(),
        matches!(result, Err(VerifyError::NoSecret)),
        "NoSecret iff no non-empty secret; got {result:?}"
    );

    // Errors never carry a secret. Checked for the sample secrets, which are distinctive; the
    // configured header names are the only free text an error holds, so they are excluded.
    if let Err(e) = result {
        let text = format!("{e} {e:?}");
        let configured = format!("{:?}", case.scheme);
        for key in sample_key_texts() {
            if keys.contains(&key.as_bytes()) && !configured.contains(key.as_str()) {
                assert!(
                    !text.contains(key.as_str()),
                    "an error quotes a secret: {text}"
                );
            }
        }
        let _ = e.is_unauthorized();
    }

    // Header names are case-insensitive: the generic scheme configured in upper case answers
    // the same (errors name the header as configured, so compare them in lower case).
    if let Scheme::Hmac(h) = &case.scheme {
        let mut shouted = h.clone();
        shouted.signature_header = h.signature_header.to_ascii_uppercase();
        if let IdLocation::Header(name) = &h.id {
            shouted.id = IdLocation::Header(name.to_ascii_uppercase());
        }
        let other = verify::verify(
            &Scheme::Hmac(shouted),
            &case.secrets,
            &case.headers,
            &case.body,
            case.now,
        );
        assert_eq!(
            lower_error(&other),
            lower_error(result),
            "header lookup depends on the configured name's case"
        );
    }

    let Ok(verified) = result else {
        return;
    };

    // Ok means some configured key signed this exact body (and the signed timestamp is within
    // tolerance), by an oracle that shares no code with the product.
    assert!(
        oracle_accepts(case, &keys),
        "Ok without a genuine, timely signature: {verified:?}"
    );

    // The MAC covers the body: one more byte and the signature no longer matches.
    let mut tampered = case.body.clone();
    tampered.push(b' ');
    assert_eq!(
        verify::verify(
            &case.scheme,
            &case.secrets,
            &case.headers,
            &tampered,
            case.now
        ),
        Err(VerifyError::InvalidSignature),
        "a tampered body still verifies"
    );

    // Rotation: the order of the secrets does not matter.
    let mut reversed = case.secrets.clone();
    reversed.reverse();
    assert_eq!(
        &verify::verify(&case.scheme, &reversed, &case.headers, &case.body, case.now),
        result,
        "the answer depends on the order of the secrets"
    );

    // What a verified delivery carries can be stored.
    let id = &verified.delivery_id;
    assert!(!id.is_empty(), "empty delivery id");
    assert!(
        id.len() <= MAX_ID_LEN,
        "delivery id over {MAX_ID_LEN} bytes"
    );
    assert!(!id.chars().any(char::is_control), "control character in id");
    if let Some(t) = &verified.event_type {
        assert!(
            !t.is_empty() && t.len() <= MAX_EVENT_TYPE_LEN,
            "event type {t:?}"
        );
        assert!(
            !t.chars().any(char::is_control),
            "control character in type"
        );
    }

    // The id comes from where the scheme says.
    let header = |name: &str| text_header(&case.headers, name);
    let json = || serde_json::from_slice::<serde_json::Value>(&case.body).ok();
    match &case.scheme {
        Scheme::Stripe { .. } => {
            assert_eq!(verified.id_origin, IdOrigin::Body);
            let body_id = json().and_then(|j| j.get("id")?.as_str().map(str::to_owned));
            assert_eq!(body_id.as_ref(), Some(id), "Stripe id is not the body's id");
        }
        Scheme::Github => {
            assert_eq!(verified.id_origin, IdOrigin::Header);
            assert_eq!(header("x-github-delivery").as_ref(), Some(id));
        }
        Scheme::Standard { .. } => {
            assert_eq!(verified.id_origin, IdOrigin::Header);
            let ids = [header("webhook-id"), header("svix-id")];
            assert!(
                ids.contains(&Some(id.clone())),
                "Standard id is no id header"
            );
        }
        Scheme::Hmac(h) => match &h.id {
            IdLocation::Header(name) => {
                assert_eq!(verified.id_origin, IdOrigin::Header);
                assert_eq!(header(name).as_ref(), Some(id));
            }
            IdLocation::JsonPointer(pointer) => {
                assert_eq!(verified.id_origin, IdOrigin::Body);
                let at = json().and_then(|j| j.pointer(pointer).cloned());
                let expected = match at {
                    Some(serde_json::Value::String(s)) => Some(s),
                    Some(serde_json::Value::Number(n)) if !n.is_f64() => Some(n.to_string()),
                    _ => None,
                };
                assert_eq!(expected.as_ref(), Some(id), "id is not at {pointer}");
            }
            IdLocation::BodySha256 => {
                assert_eq!(verified.id_origin, IdOrigin::BodySha256);
                assert_eq!(id, &hex::encode(Sha256::digest(&case.body)));
            }
            // The hmac scheme line makes only the three locations above.
            _ => {}
        },
        _ => {}
    }
}

/// Every sample secret's key bytes that are text, as written and as Standard Webhooks decodes
/// them.
fn sample_key_texts() -> &'static [String] {
    static TEXTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    TEXTS.get_or_init(|| {
        let names = crate::fixtures::sample_document().sources();
        names
            .flat_map(|name| {
                [false, true].into_iter().flat_map(move |standard| {
                    let format = if standard {
                        SecretFormat::StandardWebhooks
                    } else {
                        SecretFormat::Raw
                    };
                    sample_secrets(name, format).unwrap_or_default()
                })
            })
            .filter_map(|s| String::from_utf8(s.expose().to_vec()).ok())
            .collect()
    })
}

/// Errors with header names in lower case, so two spellings of one configuration compare equal.
fn lower_error(r: &Result<Verified, VerifyError>) -> Result<Verified, VerifyError> {
    match r {
        Err(VerifyError::MissingHeader(n)) => Err(VerifyError::MissingHeader(n.to_lowercase())),
        Err(VerifyError::MalformedHeader(n)) => Err(VerifyError::MalformedHeader(n.to_lowercase())),
        other => other.clone(),
    }
}

/// An independent statement of "genuinely signed and on time": some key's MAC of what the
/// scheme signs appears, encoded as the scheme encodes it, in the signature header, and the
/// timestamp it was made with is within the tolerance. Deliberately looser than the product's
/// parser (substring search), so it only ever errs towards accepting.
fn oracle_accepts(case: &Case, keys: &[&[u8]]) -> bool {
    let header = |name: &str| text_header(&case.headers, name);
    let body = case.body.as_slice();
    let hex_in =
        |haystack: &str, tag: [u8; 32]| haystack.to_ascii_lowercase().contains(&hex::encode(tag));
    let digits = |t: &str| -> Option<i64> {
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    match &case.scheme {
        Scheme::Stripe { tolerance_secs } => {
            let Some(h) = header("stripe-signature") else {
                return false;
            };
            h.split(',').filter_map(|e| e.strip_prefix("t=")).any(|t| {
                let timely = digits(t).is_some_and(|t| {
                    i128::from(case.now) - i128::from(t) <= i128::from(*tolerance_secs)
                });
                timely
                    && keys
                        .iter()
                        .any(|k| hex_in(&h, mac(k, &[t.as_bytes(), b".", body])))
            })
        }
        Scheme::Github => header("x-hub-signature-256")
            .is_some_and(|h| keys.iter().any(|k| hex_in(&h, mac(k, &[body])))),
        Scheme::Standard { tolerance_secs, .. } => ["webhook", "svix"].iter().any(|p| {
            let (Some(id), Some(ts), Some(sig)) = (
                header(&format!("{p}-id")),
                header(&format!("{p}-timestamp")),
                header(&format!("{p}-signature")),
            ) else {
                return false;
            };
            let timely = digits(&ts).is_some_and(|t| t.abs_diff(case.now) <= *tolerance_secs);
            timely
                && keys.iter().any(|k| {
                    let tag = mac(k, &[id.as_bytes(), b".", ts.as_bytes(), b".", body]);
                    sig.contains(&b64(&tag))
                })
        }),
        Scheme::Hmac(h) => header(&h.signature_header).is_some_and(|v| {
            keys.iter().any(|k| {
                let tag = mac(k, &[body]);
                match h.encoding {
                    SignatureEncoding::Hex => hex_in(&v, tag),
                    SignatureEncoding::Base64 => v.contains(&b64(&tag)),
                    _ => false,
                }
            })
        }),
        // This target makes only the four schemes above; the others have their own target.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_committed_seed_passes_and_genuine_ones_verify() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../corpus/verify_signature");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let case = decode(&data);
            let result = verify_case(&case);
            check(&case, &result);
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            // Seeds are named ok-*, unauthorized-*, bad-request-* and no-secret-* after their answer.
            let expected_ok = name.starts_with("ok-");
            assert_eq!(result.is_ok(), expected_ok, "{name}: {result:?}");
            if let Err(e) = &result {
                let kind = if matches!(e, VerifyError::NoSecret) {
                    "no-secret-"
                } else if e.is_unauthorized() {
                    "unauthorized-"
                } else {
                    "bad-request-"
                };
                assert!(name.starts_with(kind), "{name}: {e:?}");
            }
            seen += 1;
        }
        assert!(seen > 10, "only {seen} seeds");
    }

    #[test]
    fn the_format_is_total() {
        for data in [
            &b""[..],
            b"\n\n",
            b"hmac",
            b"@sign\n\n",
            b"\xff\xfe\n@now -\n\n\x00",
        ] {
            run(data);
        }
    }
}
