//! Target `request_to_delivery`: a Lambda event as the runtime hands it over, through every
//! step before the database: `lambda_http::request::from_str`, `webhook::source_name`,
//! `webhook::route`, the source's handshake (`handshake::detect` and `answer`), and
//! `verify::verify_request` with the sample keyring at the samples' clock.
//!
//! The input is the event JSON itself, so `events/*.json` are the seeds as they are.

use http::Method;
use sha2::{Digest as _, Sha256};

use hookclaim::handshake::{self, Handshake};
use hookclaim::verify::{self, IdOrigin, Incoming, Scheme, VerifyError};
use hookclaim::webhook;

use crate::fixtures::{samples, SAMPLE_CLOCK};
use crate::upstream::tolerate_event_crate_panics;

/// The target: never panics, and what passes each step satisfies that step's promise.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(Ok(req)) = tolerate_event_crate_panics(|| lambda_http::request::from_str(text)) else {
        return;
    };
    let samples = samples();
    let name = webhook::source_name(&req).unwrap_or_default();
    let Ok((source, body)) = webhook::route(&samples.sources, &name, &req) else {
        return;
    };
    let meta = matches!(source.handshake, Some(Handshake::Meta));
    assert!(
        req.method() == Method::POST || (meta && req.method() == Method::GET),
        "routed a {} request to {}",
        req.method(),
        source.name
    );
    assert_eq!(source.name, name, "routed to another source");
    assert!(
        body.len() <= source.max_body_bytes,
        "routed an oversized body"
    );

    let secrets = samples
        .keyring
        .for_source(&source.name)
        .expect("every sample source has usable secrets");
    let incoming = Incoming {
        method: req.method().as_str(),
        query: req.uri().query().unwrap_or_default(),
        headers: req.headers(),
        body,
    };
    if let Some(shake) = &source.handshake {
        if let Some(challenge) = handshake::detect(shake, &incoming) {
            let answer = handshake::answer(&challenge, shake, secrets);
            assert!(
                [200, 204, 403].contains(&answer.status),
                "handshake answered {}",
                answer.status
            );
            return;
        }
    }
    let result = verify::verify_request(&source.scheme, secrets, &incoming, SAMPLE_CLOCK);
    let Ok(verified) = result else {
        return;
    };
    assert!(!verified.delivery_id.is_empty(), "empty delivery id");
    if verified.id_origin == IdOrigin::BodySha256 {
        assert_eq!(verified.delivery_id, hex::encode(Sha256::digest(body)));
    }
    // A static token does not cover the body; every other scheme does.
    if !matches!(source.scheme, Scheme::Token(_)) {
        let mut tampered = body.to_vec();
        tampered.push(b' ');
        let tampered = Incoming {
            body: &tampered,
            ..incoming
        };
        assert_eq!(
            verify::verify_request(&source.scheme, secrets, &tampered, SAMPLE_CLOCK),
            Err(VerifyError::InvalidSignature),
            "a tampered body still verifies"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signed samples pass `route` and `verify` where the events say they should.
    #[test]
    fn every_committed_seed_passes_and_genuine_samples_verify() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/request_to_delivery");
        let mut verified = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            run(text.as_bytes());
            let req = lambda_http::request::from_str(&text).unwrap();
            let name = webhook::source_name(&req).unwrap_or_default();
            let Ok((source, body)) = webhook::route(&samples().sources, &name, &req) else {
                continue;
            };
            let secrets = samples()
                .keyring
                .for_source(&source.name)
                .expect("every sample source has usable secrets");
            let incoming = Incoming {
                method: req.method().as_str(),
                query: req.uri().query().unwrap_or_default(),
                headers: req.headers(),
                body,
            };
            let signed = verify::verify_request(&source.scheme, secrets, &incoming, SAMPLE_CLOCK);
            if signed.is_ok() {
                verified.push(path.file_stem().unwrap().to_string_lossy().into_owned());
            }
        }
        verified.sort();
        let expected = [
            "acme",
            "acme-redelivery",
            "bitbucket",
            "clerk",
            "discord",
            // Signed handshakes that carry an id verify too (the handler answers them first).
            "discord-ping",
            "github",
            "github-base64",
            "github-function-url",
            "github-redelivery",
            "gitlab",
            "hubspot",
            "intercom",
            "linear",
            "meta",
            "paddle",
            "polar",
            "polar-redelivery",
            "resend",
            "shopify",
            "slack",
            "square",
            "stripe",
            "stripe-redelivery",
            "stripe-rest-v1",
            "svix",
            "svix-redelivery",
            "twilio",
            "twitch",
            "twitch-revocation",
            "twitch-verification",
            "zoom",
            "zoom-url-validation",
        ];
        assert_eq!(verified, expected);
    }
}
