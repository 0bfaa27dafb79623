//! Verifies a Stripe, a GitHub and a Slack request, and answers Slack's URL verification, with
//! plain `http` types: what a web framework's handler would do with the raw body and headers.
//!
//!     cargo run -p hookclaim-verify --features sign --example verify_requests
//!
//! The requests are signed here as each provider signs them, with test secrets and the crate's
//! signer (the `sign` feature), so the example runs on its own.

use http::{Request, Response, StatusCode};

use hookclaim_verify::handshake::{self, Handshake};
use hookclaim_verify::{
    authenticate, presets, sign_as, verify_request, Incoming, Outgoing, Scheme, Secret,
};

/// One configured source: how it signs, its secrets, and the handshakes it answers.
struct Source {
    scheme: Scheme,
    secrets: Vec<Secret>,
    handshake: Option<Handshake>,
}

/// A webhook endpoint's handler: a handshake is answered, anything else must verify. `now` is
/// the current unix time in seconds (a parameter, so a test can fix it).
fn handle(source: &Source, req: &Request<Vec<u8>>, now: i64) -> Response<String> {
    let incoming = Incoming {
        method: req.method().as_str(),
        query: req.uri().query().unwrap_or_default(),
        headers: req.headers(),
        body: req.body(),
    };
    if let Some(shake) = &source.handshake {
        if let Some(challenge) = handshake::detect(shake, &incoming) {
            if challenge.needs_signature()
                && authenticate(&source.scheme, &source.secrets, &incoming, now).is_err()
            {
                return reply(StatusCode::UNAUTHORIZED, "unauthorized".into());
            }
            let answer = handshake::answer(&challenge, shake, &source.secrets);
            let mut response = Response::new(answer.body);
            *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
            if let Some(content_type) = answer.content_type {
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static(content_type),
                );
            }
            return response;
        }
    }
    match verify_request(&source.scheme, &source.secrets, &incoming, now) {
        // A real handler would now claim `delivery_id` so a redelivery is not processed twice.
        Ok(verified) => reply(
            StatusCode::OK,
            format!(
                "verified {} ({})",
                verified.delivery_id,
                verified.event_type.as_deref().unwrap_or("no type")
            ),
        ),
        Err(e) if e.is_unauthorized() => reply(StatusCode::UNAUTHORIZED, e.to_string()),
        Err(e) => reply(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

fn reply(status: StatusCode, body: String) -> Response<String> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
}

/// A `POST` of `body` sent at `now` as `provider` sends it, signed with `secret`; `id` and
/// `event_type` fill the headers where the provider carries them there.
fn post(provider: &str, secret: &str, body: &str, sent: Outgoing<'_>) -> Request<Vec<u8>> {
    let signed = sign_as(provider, secret, &sent).expect("a request the provider could send");
    let mut builder = Request::post("/webhooks");
    for (name, value) in signed.headers() {
        builder = builder.header(name, value);
    }
    builder
        .body(body.as_bytes().to_vec())
        .expect("a well-formed request")
}

fn main() {
    let now = 1_767_225_600;

    let stripe = Source {
        scheme: Scheme::Stripe {
            tolerance_secs: hookclaim_verify::DEFAULT_TOLERANCE_SECS,
        },
        secrets: vec![Secret::from_bytes("whsec_example")],
        handshake: None,
    };
    let body = r#"{"id":"evt_1","type":"checkout.session.completed"}"#;
    let sent = Outgoing::new(body.as_bytes(), now);
    let request = post("stripe", "whsec_example", body, sent);
    show("stripe", handle(&stripe, &request, now));

    let github = Source {
        scheme: Scheme::Github,
        secrets: vec![Secret::from_bytes("github-example-secret")],
        handshake: None,
    };
    let body = r#"{"zen":"Keep it logically awesome."}"#;
    let sent = Outgoing::new(body.as_bytes(), now)
        .id("72d3162e-cc78-11e3-81ab-4c9367dc0958")
        .event_type("ping");
    let request = post("github", "github-example-secret", body, sent);
    show("github", handle(&github, &request, now));
    // The same request with one byte of the body changed is refused.
    let mut tampered = request;
    tampered.body_mut()[2] ^= 1;
    show("github, tampered", handle(&github, &tampered, now));

    let slack = Source {
        scheme: presets::lookup("slack").expect("a preset").scheme(None, ""),
        secrets: vec![Secret::from_bytes("slack-example-signing-secret")],
        handshake: Some(Handshake::Slack),
    };
    let slack_signed = |body: &str| {
        let sent = Outgoing::new(body.as_bytes(), now);
        post("slack", "slack-example-signing-secret", body, sent)
    };
    let body =
        r#"{"type":"event_callback","event_id":"Ev08ABCDEF","event":{"type":"app_mention"}}"#;
    show("slack", handle(&slack, &slack_signed(body), now));
    let body = r#"{"token":"t","challenge":"3eZbrw1aBm2rZgRN","type":"url_verification"}"#;
    show(
        "slack, url_verification",
        handle(&slack, &slack_signed(body), now),
    );
}

fn show(what: &str, response: Response<String>) {
    println!(
        "{what:<26} {} {}",
        response.status().as_u16(),
        response.body()
    );
}
