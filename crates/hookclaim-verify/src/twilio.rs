//! Twilio: `X-Twilio-Signature`, the base64 HMAC-SHA1 of the URL Twilio requested followed by
//! the form parameters sorted by name (each name then its value); for JSON bodies the URL
//! carries `bodySHA256=<hex SHA-256 of the body>` and nothing else is appended.

use sha2::{Digest as _, Sha256};

use super::locate::{locate_id, Body, IdLocation};
use super::mac::{self, Algorithm, SignatureEncoding};
use super::{required_header, Incoming, Keys, Verified, VerifyError};

const SIGNATURE: &str = "x-twilio-signature";
/// Present when the webhook is signed with a shared key rather than the Auth Token; its
/// `algorithm=HMAC_SHA256` switches the MAC to SHA-256.
const SETTINGS: &str = "x-twilio-webhooks-signature-settings";
/// Twilio signs at most this many form parameters here; more is refused as malformed, to
/// bound the work (Twilio's callbacks carry a few dozen).
const MAX_PARAMS: usize = 1000;

/// Twilio's scheme, as its helper libraries verify it.
///
/// The URL is the configured public URL (what Twilio was given; behind API Gateway the function
/// does not see it) followed by `?` and the query string received, if any; it is tried with and
/// without the scheme's default port, as Twilio's libraries do. Parameter values are sorted too.
/// Every pair is signed, a repeated one as often as it comes (as twilio-node does; twilio-python
/// counts it once, which would leave a repeated pair unsigned). When the query has
/// `bodySHA256`, its value must be the hex SHA-256 of the body. The secret is the Auth Token (or the shared key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TwilioScheme {
    /// The public URL Twilio posts to, without query string, e.g.
    /// `https://hooks.example.com/webhooks/twilio`.
    pub public_url: String,
    /// Where the delivery id comes from (`I-Twilio-Idempotency-Token`).
    pub id: IdLocation,
}

impl TwilioScheme {
    pub(super) fn header_names(&self) -> Vec<String> {
        let mut names = vec![SIGNATURE.to_owned(), SETTINGS.to_owned()];
        names.extend(self.id.header_names());
        names
    }

    /// `X-Twilio-Signature` under the first key: the URL and the sorted form parameters, or, for
    /// a JSON body (by its `Content-Type`, or a query that already has `bodySHA256`), the URL
    /// with the body's hash appended to the query. HMAC-SHA256 when the request sends the
    /// signature settings header naming it.
    #[cfg(feature = "sign")]
    pub(super) fn sign(
        &self,
        keys: &[crate::sign::SigningKey],
        request: &crate::sign::Outgoing<'_>,
        signed: &mut crate::sign::Signed,
    ) -> Result<(), crate::sign::SignError> {
        let has_hash =
            form_urlencoded::parse(signed.query().as_bytes()).any(|(name, _)| name == "bodySHA256");
        let json = signed.header("content-type").is_some_and(|t| {
            t.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
        if json && !has_hash {
            let hash = hex::encode(Sha256::digest(request.body));
            signed.append_query(&format!("bodySHA256={hash}"));
        }
        let params = if json || has_hash {
            String::new()
        } else {
            join_sorted(
                form_urlencoded::parse(request.body)
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect(),
            )
        };
        let algorithm = match signed.header(SETTINGS) {
            Some(settings) if names_sha256(settings) => Algorithm::Sha256,
            _ => Algorithm::Sha1,
        };
        let url = request.signed_url(Some(&self.public_url), signed.query())?;
        let tag = crate::sign::hmac_tag(keys, algorithm, &[url.as_bytes(), params.as_bytes()])?;
        signed.set(SIGNATURE, crate::sign::base64(&tag));
        signed.set_id(&self.id, request)
    }

    pub(super) fn verify(
        &self,
        keys: &Keys<'_>,
        req: &Incoming<'_>,
    ) -> Result<Verified, VerifyError> {
        let header = required_header(req.headers, SIGNATURE)?;
        let algorithm = match req.headers.get(SETTINGS).and_then(|v| v.to_str().ok()) {
            Some(settings) if names_sha256(settings) => Algorithm::Sha256,
            _ => Algorithm::Sha1,
        };
        let tag = mac::decode(header, SignatureEncoding::Base64, algorithm.tag_len())
            .ok_or_else(|| VerifyError::MalformedHeader(SIGNATURE.to_owned()))?;

        let body_hash = form_urlencoded::parse(req.query.as_bytes())
            .find(|(name, _)| name == "bodySHA256")
            .map(|(_, value)| value.into_owned());
        let params = match &body_hash {
            Some(expected) => {
                // A JSON body: only its hash is signed, through the URL.
                let actual = hex::encode(Sha256::digest(req.body));
                if !mac::ct_eq(actual.as_bytes(), expected.to_ascii_lowercase().as_bytes()) {
                    return Err(VerifyError::InvalidSignature);
                }
                String::new()
            }
            None => sorted_params(req.body)
                .ok_or_else(|| VerifyError::MalformedHeader(SIGNATURE.to_owned()))?,
        };

        let url = req.url(&self.public_url);
        let genuine = url_variants(&url).iter().any(|url| {
            mac::any_key_matches(
                algorithm,
                &keys.hmac,
                &[url.as_bytes(), params.as_bytes()],
                std::slice::from_ref(&tag),
            )
        });
        if !genuine {
            return Err(VerifyError::InvalidSignature);
        }

        let body = Body::new(req.body);
        let (delivery_id, id_origin) = locate_id(&self.id, req.headers, &body)?;
        Ok(Verified {
            delivery_id,
            id_origin,
            event_type: None,
        })
    }
}

fn names_sha256(settings: &str) -> bool {
    settings.split(',').any(|part| {
        part.split_once('=').is_some_and(|(k, v)| {
            k.trim() == "algorithm" && v.trim().eq_ignore_ascii_case("HMAC_SHA256")
        })
    })
}

/// The form parameters as Twilio signs them: names in order, each followed by its values in
/// order. `None` with more than `MAX_PARAMS` pairs.
fn sorted_params(body: &[u8]) -> Option<String> {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(body)
        .take(MAX_PARAMS + 1)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if pairs.len() > MAX_PARAMS {
        return None;
    }
    Some(join_sorted(pairs))
}

/// The pairs sorted by name then value, each name followed by its value.
fn join_sorted(mut pairs: Vec<(String, String)>) -> String {
    pairs.sort();
    pairs.into_iter().map(|(k, v)| k + &v).collect()
}

/// The URL as given, and with its default port added or removed: Twilio's own libraries accept
/// either, because Twilio has signed both forms.
fn url_variants(url: &str) -> Vec<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return vec![url.to_owned()];
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    };
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        "443"
    } else {
        "80"
    };
    let with_port = if host == authority {
        format!("{scheme}://{host}:{default_port}{tail}")
    } else {
        url.to_owned()
    };
    vec![format!("{scheme}://{host}{tail}"), with_port]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_variants_add_and_remove_the_port() {
        assert_eq!(
            url_variants("https://example.com/a?b=c"),
            ["https://example.com/a?b=c", "https://example.com:443/a?b=c"]
        );
        assert_eq!(
            url_variants("http://example.com:8080/a"),
            ["http://example.com/a", "http://example.com:8080/a"]
        );
        assert_eq!(url_variants("nonsense"), ["nonsense"]);
    }

    #[test]
    fn params_are_sorted_by_name_then_value_and_all_signed() {
        assert_eq!(
            sorted_params(b"To=%2B1&From=%2B2&Body=hi+there&A=2&A=1&A=1").unwrap(),
            "A1A1A2Bodyhi thereFrom+2To+1"
        );
        // A pair added to a signed body changes what is signed, even a repeated one.
        assert_ne!(sorted_params(b"A=1"), sorted_params(b"A=1&A=1"));
    }
}
