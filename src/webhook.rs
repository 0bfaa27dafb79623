//! The webhook function: request in, response out. Parses the raw request into a verified
//! delivery at the edge, claims it, runs the processor, and answers so the sender stops or
//! retries as it should. Every expected failure becomes a response here, at one boundary.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, Method, StatusCode};
use lambda_http::tower::Service;
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::json;

use crate::config::{Config, RetryPolicy, Source};
use crate::db::{Database, DbError};
use crate::handshake::{self, Challenge, Handshake};
use crate::invocation;
use crate::keys::{Keyring, Keys, KeysError};
use crate::observe::{self, DeliveryRecord, Level, Telemetry};
use crate::pipeline::{self, Happened, Keying, Outcome};
use crate::environment::Environment;
use crate::error::StartupError;
use crate::processor::{Delivery, Processor};
use crate::readiness::Readiness;
use crate::ledger::{owner_token, Claimant, Ledger};
use crate::verify::{self, Incoming, Scheme, Verified, VerifyError};

/// Headers kept with every delivery when present, besides each scheme's own.
const COMMON_KEPT_HEADERS: &[&str] = &["content-type", "user-agent"];

/// The webhook function as a value: everything one execution environment needs to answer
/// webhooks, built once at cold start, and [`Webhook::handle`] to answer one request. Cheap to
/// clone (the clones share one environment: its connection, secrets cache and processor) and
/// `'static`: it is a [`tower::Service`](lambda_http::tower::Service) as a value and by
/// reference, so it takes tower layers (`Buffer` included), moves into a spawned task or a
/// router, and sits beside routes of your own in your own `lambda_http::run`:
///
/// ```no_run
/// use hookclaim::lambda_http::{self, service_fn, Body, Error, Request, Response};
/// use hookclaim::{StoreOnly, Webhook};
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), Error> {
///     let webhook = Webhook::from_env(StoreOnly).await?;
///     let webhook = &webhook;
///     lambda_http::run(service_fn(move |req: Request| async move {
///         if req.uri().path() == "/health" {
///             return Ok::<_, Error>(Response::new(Body::from("ok")));
///         }
///         Ok(webhook.handle(req).await)
///     }))
///     .await
/// }
/// ```
///
/// [`crate::run_webhook`] is this with nothing beside it.
pub struct Webhook<P> {
    shared: Arc<Shared<P>>,
    clock: fn() -> SystemTime,
    telemetry: Telemetry,
}

/// What every clone of a [`Webhook`] shares: the execution environment's resources.
struct Shared<P> {
    sources: BTreeMap<String, Source>,
    keys: Keys,
    db: Database,
    processor: P,
    lease_margin: Duration,
    retry: RetryPolicy,
    ready: Readiness,
    /// Whether this environment has not answered a request yet: its first is the cold start's.
    cold: AtomicBool,
}

impl<P> Clone for Webhook<P> {
    fn clone(&self) -> Self {
        Webhook {
            shared: Arc::clone(&self.shared),
            clock: self.clock,
            telemetry: self.telemetry.clone(),
        }
    }
}

/// Why a request is refused before (or instead of) processing, with its status.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// Only POST is accepted (and GET for a Meta source's subscription handshake).
    #[error("method not allowed")]
    MethodNotAllowed,
    /// The `{source}` segment names no configured source.
    #[error("unknown source")]
    UnknownSource,
    /// The body is over the source's limit.
    #[error("payload too large")]
    TooLarge,
    /// Signature, timestamp or required-id failure.
    #[error(transparent)]
    Unverified(#[from] VerifyError),
    /// Secrets could not be loaded.
    #[error(transparent)]
    Secrets(#[from] KeysError),
    /// The database could not be reached or failed.
    #[error(transparent)]
    Database(#[from] DbError),
}

impl Rejection {
    /// The HTTP status the sender gets.
    pub fn status(&self) -> StatusCode {
        match self {
            Rejection::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Rejection::UnknownSource => StatusCode::NOT_FOUND,
            Rejection::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Rejection::Unverified(e) if e.is_unauthorized() => StatusCode::UNAUTHORIZED,
            Rejection::Unverified(_) => StatusCode::BAD_REQUEST,
            Rejection::Secrets(_) | Rejection::Database(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The outcome name in logs, metrics and the response body.
    pub fn outcome(&self) -> &'static str {
        match self {
            Rejection::MethodNotAllowed => "method_not_allowed",
            Rejection::UnknownSource => "unknown_source",
            Rejection::TooLarge => "payload_too_large",
            Rejection::Unverified(e) if e.is_unauthorized() => "unauthorized",
            Rejection::Unverified(_) => "bad_request",
            Rejection::Secrets(_) | Rejection::Database(_) => "unavailable",
        }
    }

    /// How serious it is: strangers' and senders' malformed requests are routine, a refused
    /// signature or an oversized body is worth a look, and a database or secrets store that
    /// cannot be used is an outage.
    pub fn level(&self) -> Level {
        match self {
            Rejection::MethodNotAllowed | Rejection::UnknownSource => Level::Info,
            Rejection::Unverified(e) if e.is_unauthorized() => Level::Warn,
            Rejection::Unverified(_) => Level::Info,
            Rejection::TooLarge => Level::Warn,
            Rejection::Secrets(_) | Rejection::Database(_) => Level::Error,
        }
    }

    /// What the sender is told: terse, and never internals (no database or AWS detail).
    fn public_message(&self) -> String {
        match self {
            Rejection::Unverified(e) if e.is_unauthorized() => {
                "signature verification failed".into()
            }
            Rejection::Unverified(e) => e.to_string(),
            Rejection::Secrets(_) | Rejection::Database(_) => "temporarily unavailable".into(),
            other => other.to_string(),
        }
    }
}

/// The Retry-After of a busy answer: the lock it met is held for one statement or a finish.
const BUSY_RETRY_AFTER: Duration = Duration::from_secs(2);

/// What one request came to, with what was learned of its delivery on the way (for the log
/// line): a delivery's outcome, a provider's handshake, or a rejection.
struct Exchange {
    delivery_id: Option<String>,
    event_type: Option<String>,
    result: Result<Reply, Rejection>,
}

impl Exchange {
    fn rejected(rejection: Rejection) -> Self {
        Exchange {
            delivery_id: None,
            event_type: None,
            result: Err(rejection),
        }
    }
}

/// What a request that was not refused is answered with.
enum Reply {
    /// The outcome of a verified delivery.
    Delivery(Outcome),
    /// A provider's handshake, answered exactly as the provider requires; nothing is stored.
    Handshake {
        response: handshake::Response,
        reason: Option<String>,
    },
}

/// One request's answer and what its log line says of it.
struct Answered {
    response: Response<Body>,
    outcome: &'static str,
    level: Level,
    reason: Option<String>,
    attempt: Option<i32>,
    payload_mismatch: bool,
    replayed_body: bool,
}

impl<P: Processor> Webhook<P> {
    /// The webhook function's cold start as [`crate::run_webhook`] makes it, with the
    /// configuration from the environment ([`Config::from_env`]): the secrets and the database
    /// (connected and migrated now if they can be, else on the first delivery). A bad setting
    /// is an error that names it. Installs no logging: your own subscriber, if any, sees
    /// hookclaim's events.
    pub async fn from_env(processor: P) -> Result<Self, StartupError> {
        let config =
            Config::from_env().inspect_err(|e| tracing::error!(error = %e, "bad configuration"))?;
        Self::from_config(&config, processor).await
    }

    /// The same from `config`.
    pub async fn from_config(config: &Config, processor: P) -> Result<Self, StartupError> {
        Self::assemble(config, processor)
            .await
            .inspect_err(|e| tracing::error!(error = %e, "cold start failed"))
    }

    /// Builds the environment's resources and the handler from them. Reads the webhook secrets,
    /// connects and brings the schema up to date now, so the first delivery does not pay for
    /// it; what fails (an unreachable database or Secrets Manager) is logged and left to the
    /// first delivery, which answers 503 until it works.
    async fn assemble(config: &Config, processor: P) -> Result<Self, StartupError> {
        let environment = Environment::new();
        let keys = environment.keys(config)?;
        processor.start().await?;
        let db = environment.database(config).await?;
        let owner = environment.owner(config).await?;
        let webhook = Webhook::new(config, keys, db, processor, owner);
        match webhook.shared.keys.current().await {
            Ok(ring) => {
                for source in ring.sources_without_secrets() {
                    tracing::warn!(
                        source,
                        "no webhook secret configured for this source: its deliveries answer 401"
                    );
                }
            }
            Err(e) => tracing::warn!(
                error = %e,
                "webhook secrets not loaded at cold start; will retry on first delivery"
            ),
        }
        if let Err(e) = webhook.ensure_ready().await {
            tracing::warn!(error = %e, "database not ready at cold start; will retry on first delivery");
        }
        Ok(webhook)
    }

    /// The handler over the environment's resources: the migrations and the processor's setup
    /// run as the schema owner's `owner` database when it is `Some` (`HOOKCLAIM_MIGRATE=auto`
    /// with `DATABASE_OWNER_*`).
    pub(crate) fn new(
        config: &Config,
        keys: Keys,
        db: Database,
        processor: P,
        owner: Option<Database>,
    ) -> Self {
        let shared = Shared {
            sources: config.sources.clone(),
            keys,
            db,
            processor,
            lease_margin: config.lease_margin,
            retry: config.retry,
            ready: Readiness::new(config.database.migrate).with_owner(owner),
            cold: AtomicBool::new(true),
        };
        Webhook {
            shared: Arc::new(shared),
            clock: SystemTime::now,
            telemetry: Telemetry::new(&config.metrics_namespace),
        }
    }

    #[doc(hidden)]
    /// Connects, brings the schema up to date (or, with `HOOKCLAIM_MIGRATE=never`, checks that
    /// it is) and runs the processor's setup. Done once per environment; until it succeeds,
    /// every delivery tries it first and answers 503 when it fails.
    pub async fn ensure_ready(&self) -> Result<(), DbError> {
        let mut ledger = Ledger::open(&self.shared.db).await;
        self.shared.ready.ensure(ledger.session(), &self.shared.processor).await
    }

    #[doc(hidden)]
    /// Writes this handler's lines (and their metrics) as `telemetry` says: for tools and
    /// tests, which keep them in memory.
    pub fn with_telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = telemetry;
        self
    }

    #[cfg(feature = "internals")]
    /// Replaces the clock used for signature timestamps (tests with recorded events).
    pub fn with_clock(mut self, clock: fn() -> SystemTime) -> Self {
        self.clock = clock;
        self
    }

    #[cfg(feature = "internals")]
    /// The environment's database, for tools and tests.
    pub fn database(&self) -> &Database {
        &self.shared.db
    }

    #[doc(hidden)]
    /// The environment's secrets cache, for tools and tests.
    pub fn keys(&self) -> &Keys {
        &self.shared.keys
    }

    /// Answers one request to `POST /webhooks/{source}` (the source from the route's `source`
    /// parameter, or the path segment after `/webhooks/`). Never fails: every outcome,
    /// including database trouble, is a response with the right status, and is logged.
    pub async fn handle(&self, req: Request) -> Response<Body> {
        let started = Instant::now();
        let cold_start = self.shared.cold.swap(false, Ordering::Relaxed);
        let correlation = observe::Correlation::of(&req, cold_start);
        let source = source_name(&req).unwrap_or_default();
        // The dimension value is a configured name or `unknown`, never what a stranger typed;
        // the requested name is still logged, capped.
        let (known_source, requested_source) = match self.shared.sources.get_key_value(&source) {
            Some((name, _)) => (name.as_str(), None),
            None => (observe::UNKNOWN_SOURCE, Some(source.as_str())),
        };
        let exchange = self.exchange(&req, &source).await;
        let (delivery_id, event_type) = (exchange.delivery_id.clone(), exchange.event_type.clone());
        let answered = answer(exchange, (self.clock)());
        let record = DeliveryRecord {
                source: known_source,
                requested_source,
                delivery_id: delivery_id.as_deref(),
                event_type: event_type.as_deref(),
                outcome: answered.outcome,
                level: answered.level,
                status: answered.response.status().as_u16(),
                attempt: answered.attempt,
                latency: started.elapsed(),
                reason: answered.reason.as_deref(),
                payload_mismatch: answered.payload_mismatch,
                replayed_body: answered.replayed_body,
                correlation,
        };
        observe::delivery_event(&record);
        let namespace = self.telemetry.namespace();
        let line = observe::delivery_line(&record, namespace, SystemTime::now());
        self.telemetry.write(&line);
        answered.response
    }

    /// Takes one request from routing to its outcome: a handshake answered, a delivery
    /// verified, claimed and run, or the rejection that stopped it.
    async fn exchange(&self, req: &Request, source_name: &str) -> Exchange {
        let (source, body) = match route(&self.shared.sources, source_name, req) {
            Ok(routed) => routed,
            Err(rejection) => return Exchange::rejected(rejection),
        };
        let query = req.uri().query().unwrap_or_default();
        let incoming = Incoming {
            method: req.method().as_str(),
            query,
            headers: req.headers(),
            body,
        };
        let challenge = source
            .handshake
            .as_ref()
            .and_then(|h| handshake::detect(h, &incoming));
        if let (Some(challenge), Some(shake)) = (challenge, &source.handshake) {
            return Exchange {
                delivery_id: None,
                event_type: Some(challenge.name().to_owned()),
                result: self
                    .answer_handshake(source, shake, &challenge, &incoming)
                    .await,
            };
        }
        // GET passes routing only for a Meta source's subscription handshake.
        if req.method() != Method::POST {
            return Exchange::rejected(Rejection::MethodNotAllowed);
        }
        let verified = match self.verify(source, &incoming).await {
            Ok(verified) => verified,
            Err(rejection) => return Exchange::rejected(rejection),
        };
        let result = self
            .deliver(req, source, &verified, body)
            .await
            .map(Reply::Delivery);
        Exchange {
            delivery_id: Some(verified.delivery_id),
            event_type: verified.event_type,
            result,
        }
    }

    /// Claims a verified delivery and, when this invocation wins it, runs it.
    async fn deliver(
        &self,
        req: &Request,
        source: &Source,
        verified: &Verified,
        body: &[u8],
    ) -> Result<Outcome, Rejection> {
        let delivery = Delivery {
            source: source.name.clone(),
            delivery_id: verified.delivery_id.clone(),
            event_type: verified.event_type.clone(),
            payload: body.to_vec(),
            headers: kept_headers(&source.scheme, req.headers()),
            attempt: 1,
        };
        let keying = Keying {
            id_origin: verified.id_origin,
            long_key_retention: source.long_key_retention,
            replay_guard: source.replay_guard,
        };
        let owner = owner_token();
        let claimant = Claimant {
            owner: &owner,
            lease: self.lease(req),
            max_attempts: self.shared.retry.max_attempts,
        };
        let mut ledger = Ledger::open(&self.shared.db).await;
        self.shared
            .ready
            .ensure(ledger.session(), &self.shared.processor)
            .await?;
        let deadline = invocation::deadline(req.lambda_context_ref());
        Ok(pipeline::claim_and_run(
            &mut ledger,
            &self.shared.processor,
            delivery,
            keying,
            &claimant,
            &self.shared.retry,
            deadline,
        )
        .await?)
    }

    /// Verifies with the cached secrets; if that fails on the signature alone (or the source's
    /// secret is missing or unusable), refreshes the secrets (rate-limited) once and tries again,
    /// so a rotation or a fixed secret is picked up without a redeploy.
    async fn verify(&self, source: &Source, req: &Incoming<'_>) -> Result<Verified, Rejection> {
        let now = unix_secs((self.clock)());
        let attempt = |ring: &Keyring| -> Result<Verified, Rejection> {
            let secrets = ring.for_source(&source.name)?;
            Ok(verify::verify_request(&source.scheme, secrets, req, now)?)
        };
        let first = attempt(&*self.shared.keys.current().await?);
        let worth_a_refresh = matches!(
            first,
            Err(Rejection::Unverified(
                VerifyError::InvalidSignature | VerifyError::NoSecret
            ) | Rejection::Secrets(_))
        );
        if !worth_a_refresh {
            return first;
        }
        match self.shared.keys.refresh_after_failure().await {
            Some(fresh) => attempt(&fresh),
            None => first,
        }
    }

    /// Answers a provider's handshake: authenticated first where the provider signs it (the
    /// same secrets and refresh as a delivery), never claimed or stored. A Twitch revocation is
    /// logged as a warning and counted under its own outcome.
    async fn answer_handshake(
        &self,
        source: &Source,
        shake: &Handshake,
        challenge: &Challenge,
        req: &Incoming<'_>,
    ) -> Result<Reply, Rejection> {
        if challenge.needs_signature() {
            match self.verify(source, req).await {
                // A challenge carries no delivery id: being signed is what counts.
                Ok(_) => {}
                Err(Rejection::Unverified(e)) if !e.is_unauthorized() => {}
                Err(e) => return Err(e),
            }
        }
        let ring = self.shared.keys.current().await?;
        let response = handshake::answer(challenge, shake, ring.for_source(&source.name)?);
        let mut revoked = None;
        if let Challenge::TwitchRevocation {
            subscription_type,
            reason,
        } = challenge
        {
            tracing::warn!(
                source = %source.name,
                subscription_type = subscription_type.as_deref().unwrap_or("unknown"),
                reason = reason.as_deref().unwrap_or("unknown"),
                "Twitch revoked an EventSub subscription: no more events will come for it"
            );
            revoked = Some(format!(
                "subscription revoked: {}",
                reason.as_deref().unwrap_or("unknown")
            ));
        }
        if response.outcome == "handshake_refused" {
            revoked = Some("verify token does not match".into());
        }
        Ok(Reply::Handshake {
            response,
            reason: revoked,
        })
    }

    /// The lease: the invocation's remaining time plus the margin, so the claim can be taken
    /// over exactly when this invocation can no longer be running.
    fn lease(&self, req: &Request) -> Duration {
        invocation::remaining(invocation::deadline(req.lambda_context_ref())) + self.shared.lease_margin
    }
}

/// One request, answered by [`Webhook::handle`] on a clone; never an error.
impl<P: Processor> Service<Request> for Webhook<P> {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let webhook = self.clone();
        Box::pin(async move { Ok(webhook.handle(req).await) })
    }
}

/// One request, answered by [`Webhook::handle`]; never an error.
impl<'a, P: Processor> Service<Request> for &'a Webhook<P> {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send + 'a>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let webhook = *self;
        Box::pin(async move { Ok(webhook.handle(req).await) })
    }
}

/// The first checks on a raw request, before any secret or database is involved: the method,
/// the source, and the body size against the source's limit. Returns the source and the raw
/// body (already decoded from base64 where the event said so).
pub fn route<'r>(
    sources: &'r BTreeMap<String, Source>,
    source_name: &str,
    req: &'r Request,
) -> Result<(&'r Source, &'r [u8]), Rejection> {
    let get = req.method() == Method::GET;
    if req.method() != Method::POST && !get {
        return Err(Rejection::MethodNotAllowed);
    }
    let source = sources.get(source_name).ok_or(if get {
        Rejection::MethodNotAllowed
    } else {
        Rejection::UnknownSource
    })?;
    // Only a Meta source answers a GET (its subscription handshake; anything else is refused
    // once the handshake is ruled out).
    if get && !matches!(source.handshake, Some(Handshake::Meta)) {
        return Err(Rejection::MethodNotAllowed);
    }
    let body: &[u8] = req.body().as_ref();
    if body.len() > source.max_body_bytes {
        return Err(Rejection::TooLarge);
    }
    Ok((source, body))
}

/// The source name: the `{source}` path parameter (API Gateway), or the path segment after
/// `/webhooks/` (function URLs and the local emulator, which have no route parameters).
pub fn source_name(req: &Request) -> Option<String> {
    if let Some(s) = req.path_parameters_ref().and_then(|p| p.first("source")) {
        return Some(s.to_string());
    }
    let path = req.uri().path();
    let rest = &path[path.find("/webhooks/")? + "/webhooks/".len()..];
    let name = rest.split('/').next().unwrap_or_default();
    (!name.is_empty()).then(|| name.to_string())
}

/// The headers stored with a delivery: those the scheme reads, plus a few useful for replay.
fn kept_headers(scheme: &Scheme, headers: &HeaderMap) -> BTreeMap<String, String> {
    let scheme_headers = verify::scheme_headers(scheme);
    COMMON_KEPT_HEADERS
        .iter()
        .map(|s| s.to_string())
        .chain(scheme_headers)
        .filter_map(|name| {
            let value = headers.get(name.as_str())?.to_str().ok()?;
            Some((name, value.chars().take(1024).collect()))
        })
        .collect()
}

fn unix_secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response<Body> {
    let mut resp = Response::new(Body::Text(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// The answer to one request, and what its log line says of it, from what the request came
/// to: status, headers and body, the outcome's name, level and reason. `now` is the clock a
/// not-yet-due retry's `Retry-After` counts from.
fn answer(exchange: Exchange, now: SystemTime) -> Answered {
    let delivery = match exchange.result {
        Err(rejection) => return refuse(rejection),
        Ok(Reply::Handshake { response, reason }) => return handshake_answer(response, reason),
        Ok(Reply::Delivery(outcome)) => outcome,
    };
    let (status, outcome, level, retry_after) = match delivery.happened {
        Happened::Done => (StatusCode::OK, "processed", Level::Info, None),
        Happened::Duplicate => (StatusCode::OK, "duplicate", Level::Info, None),
        Happened::InProgress => (StatusCode::ACCEPTED, "in_progress", Level::Info, None),
        // What a newer attempt concluded is not this invocation's to promise.
        Happened::Busy | Happened::Fenced => (
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            Level::Info,
            Some(BUSY_RETRY_AFTER),
        ),
        Happened::RetryLater(at) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "retry_later",
            Level::Info,
            Some(at.duration_since(now).unwrap_or(Duration::from_secs(1))),
        ),
        // A failed attempt that will be retried is worth a look; a delivery given up on
        // (answered 200, so the sender stops) needs someone.
        Happened::Failed(retry_in) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "failed",
            Level::Warn,
            Some(retry_in),
        ),
        // Throttled downstream: nothing failed, the sender is asked back when it is due.
        Happened::Deferred(retry_in) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "deferred",
            Level::Info,
            Some(retry_in),
        ),
        Happened::Dead => (StatusCode::OK, "dead", Level::Error, None),
    };
    // A body that is not the stored one is worth a look, whatever the answer.
    let level = match level {
        Level::Info if delivery.payload_mismatch || delivery.replayed_body => Level::Warn,
        level => level,
    };
    let reason = match delivery.happened {
        Happened::Fenced => Some("lease lost to a newer attempt".into()),
        _ => delivery.reason,
    };
    let mut response = json_response(
        status,
        json!({"status": outcome, "delivery_id": exchange.delivery_id}),
    );
    if let Some(after) = retry_after {
        let secs = after.as_secs_f64().ceil().max(1.0) as u64;
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
    }
    Answered {
        response,
        outcome,
        level,
        reason,
        attempt: delivery.attempt,
        payload_mismatch: delivery.payload_mismatch,
        replayed_body: delivery.replayed_body,
    }
}

/// A provider's handshake answered as the provider requires. A refused one is a refused
/// verification, like a bad signature.
fn handshake_answer(r: handshake::Response, reason: Option<String>) -> Answered {
    let mut response = Response::new(Body::Text(r.body));
    *response.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK);
    if let Some(content_type) = r.content_type {
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(content_type),
        );
    }
    let level = match r.outcome {
        "handshake_refused" => Level::Warn,
        _ => Level::Info,
    };
    Answered {
        response,
        outcome: r.outcome,
        level,
        reason,
        attempt: None,
        payload_mismatch: false,
        replayed_body: false,
    }
}

/// A refused request: its status, a terse body and, where it helps, `Allow` or `Retry-After`.
fn refuse(rejection: Rejection) -> Answered {
    let mut response = json_response(
        rejection.status(),
        json!({"status": rejection.outcome(), "error": rejection.public_message()}),
    );
    match rejection {
        Rejection::MethodNotAllowed => {
            response
                .headers_mut()
                .insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
        }
        Rejection::Database(_) | Rejection::Secrets(_) => {
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("5"),
            );
        }
        _ => {}
    }
    Answered {
        response,
        outcome: rejection.outcome(),
        level: rejection.level(),
        reason: Some(rejection.to_string()),
        attempt: None,
        payload_mismatch: false,
        replayed_body: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_outcome_is_answered_and_logged_at_its_own_level_whatever_its_status() {
        let wait = Duration::from_secs(30);
        let now = SystemTime::now();
        let outcomes = [
            (Happened::Done, 200, "processed", Level::Info, None),
            (Happened::Duplicate, 200, "duplicate", Level::Info, None),
            (Happened::InProgress, 202, "in_progress", Level::Info, None),
            (Happened::Busy, 503, "busy", Level::Info, Some("2")),
            (Happened::Fenced, 503, "busy", Level::Info, Some("2")),
            (Happened::RetryLater(now + wait), 503, "retry_later", Level::Info, Some("30")),
            (Happened::Failed(wait), 503, "failed", Level::Warn, Some("30")),
            (Happened::Deferred(wait), 503, "deferred", Level::Info, Some("30")),
            (Happened::Dead, 200, "dead", Level::Error, None),
        ];
        for (happened, status, name, level, retry_after) in outcomes {
            let exchange = Exchange {
                delivery_id: Some("d-1".into()),
                event_type: None,
                result: Ok(Reply::Delivery(Outcome {
                    happened,
                    attempt: Some(1),
                    reason: None,
                    payload_mismatch: false,
                    replayed_body: false,
                })),
            };
            let answered = answer(exchange, now);
            assert_eq!(answered.response.status().as_u16(), status, "{happened:?}");
            assert_eq!((answered.outcome, answered.level), (name, level), "{happened:?}");
            let header = answered.response.headers().get(http::header::RETRY_AFTER);
            assert_eq!(header.map(|v| v.to_str().unwrap()), retry_after, "{happened:?}");
            let body: serde_json::Value =
                serde_json::from_slice(answered.response.body().as_ref()).unwrap();
            assert_eq!(body, json!({"status": name, "delivery_id": "d-1"}));
        }
        let rejections = [
            (Rejection::MethodNotAllowed, Level::Info),
            (Rejection::UnknownSource, Level::Info),
            (Rejection::TooLarge, Level::Warn),
            (Rejection::Unverified(VerifyError::InvalidSignature), Level::Warn),
            (Rejection::Database(DbError::Timeout), Level::Error),
            (
                Rejection::Secrets(KeysError::Fetch("unreachable".into())),
                Level::Error,
            ),
        ];
        for (rejection, level) in rejections {
            assert_eq!(rejection.level(), level, "{rejection:?}");
        }
    }
}
