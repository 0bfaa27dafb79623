#!/usr/bin/env python3
"""Writes hookclaim's sample Lambda events, signed with the TEST secrets below.

Python 3 standard library only. Every file is a complete Lambda event that works with both
`sam local invoke -e events/<file>` and `cargo lambda invoke --data-file events/<file>`.

TEST SECRETS (never use them anywhere real)
===========================================
  source  kind      secret                                   key bytes used by the HMAC
  ------  --------  ---------------------------------------  ------------------------------------
  stripe  stripe    whsec_hookclaim_stripe_test              the secret string's bytes
  github  github    hookclaim-github-test-secret             the secret string's bytes
  svix    standard  whsec_aG9va2NsYWltLXN0YW5kYXJkLXRlc3Qta2V5
                                                             base64-decoded part after whsec_,
                                                             i.e. b"hookclaim-standard-test-key"
  polar   standard  polar_whs_hookclaim_test                 the secret string's bytes (Polar
                                                             uses its raw secret, no whsec_)
  acme    hmac      hookclaim-acme-test-secret               the secret string's bytes
                    (X-Acme-Signature: sha256=<hex>, id in X-Acme-Delivery, type at /event)

The same sources and secrets are written to env.local.json (the `sam local invoke --env-vars`
file). There, github lists a second, newer secret first (HOOKCLAIM_SECRETS "github":
["hookclaim-github-next-secret", "hookclaim-github-test-secret"]) so that the samples also
exercise rotation: the older secret, which signed them, must still verify.

TIMESTAMPS
==========
By default every event is signed at the fixed time 1767225600 (2026-01-01T00:00:00Z), so the
committed files never change; a redelivery is re-signed 60 s later (1767225660), as a sender's
retry would be. Stripe and Standard Webhooks reject timestamps more than 300 s away, so the
committed files only verify against a fixed clock (the tests). To send them to a running
function, re-sign them right before sending:

    python3 scripts/events.py --now --out target/events

`--now` signs the originals 60 s before the current time and the redeliveries at the current
time. Bodies never depend on the time, so a redelivery's body and id equal the original's.

USAGE
=====
    python3 scripts/events.py                 # (re)write events/*.json and env.local.json
    python3 scripts/events.py --check         # exit 1 if a committed file differs
    python3 scripts/events.py --now --out target/events   # fresh signatures, for live runs
    python3 scripts/events.py --manifest      # JSON list: file, function, expected result, in
                                              # the order to send them
    python3 scripts/events.py --dotenv        # KEY='value' lines: the webhook function's local
                                              # environment (e.g. for `cargo lambda watch`)
    python3 scripts/events.py --judge FILE    # FILE: `file<TAB>answer JSON` lines; prints each
                                              # answer against its expectation, exit 1 if one
                                              # differs (scripts/run and scripts/invoke use it)

FILES (events/)
===============
  <source>.json             signed delivery (API Gateway HTTP API, payload format 2.0)
  <source>-redelivery.json  same delivery id and body; timestamped schemes re-signed 60 s later
  <source>-tampered.json    body altered after signing (expect 401)
  stripe-rest-v1.json       REST API v1 proxy event (`apigateway aws-proxy` shape)
  github-function-url.json  Lambda function URL event (a GitHub `ping`)
  github-base64.json        HTTP API v2 with a base64 body (isBase64Encoded: true)
  github-issues.json        a GitHub `issues` event (action `opened`)
  unknown-source.json       well-signed request to /webhooks/nope (expect 404)
  wrong-method.json         GET through a function URL, which forwards every method (expect 405;
                            an HTTP API with only the POST route answers 404 itself)
  retention-scheduled.json  EventBridge rule `Scheduled Event` (`cloudwatch scheduled-event`)
  retention-scheduler.json  EventBridge Scheduler invocation: the schedule's Input, `{}` in
                            template.yaml
  retention-<command>.json  operator commands (run, dry-run, purge, replay, stats, migrate)

stripe-rest-v1, github-function-url, github-base64 and github-issues carry their own delivery
ids, so each is a new delivery rather than a duplicate of <source>.json.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.parse

FIXED_TIMESTAMP = 1767225600  # 2026-01-01T00:00:00Z
REDELIVERY_DELAY_SECS = 60
PADDLE_DELAY_SECS = 28

SECRETS = {
    "stripe": "whsec_hookclaim_stripe_test",
    "github": "hookclaim-github-test-secret",
    "svix": "whsec_" + base64.b64encode(b"hookclaim-standard-test-key").decode("ascii"),
    "polar": "polar_whs_hookclaim_test",
    "acme": "hookclaim-acme-test-secret",
}
# One source per preset, named after it; each signs with hookclaim-<preset>-test-secret.
PRESET_SOURCES = ["slack", "shopify", "zoom", "paddle", "linear", "twitch", "discord", "gitlab",
                  "bitbucket", "meta", "twilio", "square", "hubspot", "intercom", "clerk",
                  "resend"]
for _preset in PRESET_SOURCES:
    SECRETS[_preset] = "hookclaim-%s-test-secret" % _preset
SECRETS["clerk"] = "whsec_" + base64.b64encode(b"hookclaim-clerk-test-key").decode("ascii")
SECRETS["resend"] = "whsec_" + base64.b64encode(b"hookclaim-resend-test-key").decode("ascii")
# Discord verifies with the application's public key; this seed makes the key pair.
DISCORD_SEED = hashlib.sha256(b"hookclaim-discord-test-seed").digest()
META_VERIFY_TOKEN = "hookclaim-meta-verify-token"
PUBLIC_BASE_URL = "https://hooks.example.com/webhooks/"
# Listed first in env.local.json to exercise rotation; nothing is signed with it.
GITHUB_NEXT_SECRET = "hookclaim-github-next-secret"

SOURCES = {
    "stripe": {"kind": "stripe", "tolerance_secs": 300},
    "github": {"kind": "github"},
    "svix": {"kind": "standard", "tolerance_secs": 300},
    "polar": {"kind": "polar"},
    "acme": {
        "kind": "hmac",
        "signature_header": "X-Acme-Signature",
        "prefix": "sha256=",
        "encoding": "hex",
        "id_header": "X-Acme-Delivery",
        "event_type_pointer": "/event",
        "max_body_bytes": 262144,
    },
}
for _preset in PRESET_SOURCES:
    SOURCES[_preset] = {"kind": _preset}
for _preset in ["twilio", "square", "hubspot"]:
    SOURCES[_preset]["public_url"] = PUBLIC_BASE_URL + _preset
# Paddle's own window is 5 s either way (the preset's default); a live run sends its sample up to
# a minute after it was signed (see paddle.json below).
SOURCES["paddle"]["tolerance_secs"] = 60

LOCAL_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/hookclaim"

REGION = "us-east-1"
ACCOUNT = "123456789012"
HTTP_API_ID = "h00kc1a1m0"
REST_API_ID = "r3stap1h00"
FUNCTION_URL_ID = "h00kc1a1mfunct10nur1samp1e000001"
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

# Delivery ids (deterministic; one per distinct delivery).
STRIPE_EVENT_ID = "evt_1HookclaimSample000000001"
STRIPE_REST_EVENT_ID = "evt_1HookclaimSample000000002"
GITHUB_PUSH_DELIVERY = "6f1c2a4e-9b1d-4c3e-8a57-2d1f0e9c4b7a"
GITHUB_PING_DELIVERY = "0d8e5b3c-27a4-4f6e-9c1b-83a5d2e7f406"
GITHUB_BASE64_DELIVERY = "a3b9c7d1-5e2f-4a8b-b6c4-1f0e2d3c4b5a"
GITHUB_ISSUES_DELIVERY = "c5d7e9f1-3a4b-4c6d-9e8f-7a6b5c4d3e2f"
SVIX_MESSAGE_ID = "msg_2hookclaimSvixSample0001"
POLAR_MESSAGE_ID = "msg_2hookclaimPolarSample001"
ACME_DELIVERY_ID = "dlv_acme_0001"


# --------------------------------------------------------------------------------------------
# Signing


def hmac_sha256(key, message):
    return hmac.new(key, message, hashlib.sha256).digest()


def standard_key(secret):
    """Standard Webhooks key: whsec_<base64> is decoded; any other secret is used raw (Polar)."""
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[len("whsec_"):])
    return secret.encode("utf-8")


def stripe_signature(body, ts):
    sig = hmac_sha256(SECRETS["stripe"].encode(), b"%d." % ts + body).hex()
    # Stripe may add a v0 entry (an older scheme); verifiers ignore it. This one verifies nothing.
    v0 = hashlib.sha256(b"hookclaim-stripe-v0" + body).hexdigest()
    return "t=%d,v1=%s,v0=%s" % (ts, sig, v0)


def github_signatures(body, secret=None):
    key = (secret or SECRETS["github"]).encode()
    return {
        "X-Hub-Signature": "sha1=" + hmac.new(key, body, hashlib.sha1).hexdigest(),
        "X-Hub-Signature-256": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest(),
    }


def standard_signature(source, msg_id, ts, body):
    key = standard_key(SECRETS[source])
    return base64.b64encode(hmac_sha256(key, b"%s.%d." % (msg_id.encode(), ts) + body)).decode()


def acme_signature(body):
    return "sha256=" + hmac_sha256(SECRETS["acme"].encode(), body).hex()


# Ed25519 (RFC 8032), standard library only: Discord signs its interactions with it.
_P = 2 ** 255 - 19
_Q = 2 ** 252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P


def _point_add(a, b):
    x = (a[1] - a[0]) * (b[1] - b[0]) % _P
    y = (a[1] + a[0]) * (b[1] + b[0]) % _P
    c = 2 * a[3] * b[3] * _D % _P
    d = 2 * a[2] * b[2] % _P
    e, f, g, h = y - x, d - c, d + c, y + x
    return (e * f, g * h, f * g, e * h)


def _point_mul(s, pt):
    q = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            q = _point_add(q, pt)
        pt = _point_add(pt, pt)
        s >>= 1
    return q


def _recover_x(y, sign):
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P)
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * pow(2, (_P - 1) // 4, _P) % _P
    if (x & 1) != sign:
        x = _P - x
    return x


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
_G = (_GX, _GY, 1, _GX * _GY % _P)


def _compress(pt):
    zinv = pow(pt[2], _P - 2, _P)
    x, y = pt[0] * zinv % _P, pt[1] * zinv % _P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def _expand(seed):
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def ed25519_public(seed):
    return _compress(_point_mul(_expand(seed)[0], _G))


def ed25519_sign(seed, message):
    a, prefix = _expand(seed)
    public = _compress(_point_mul(a, _G))
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % _Q
    big_r = _compress(_point_mul(r, _G))
    h = int.from_bytes(hashlib.sha512(big_r + public + message).digest(), "little") % _Q
    return big_r + int.to_bytes((r + h * a) % _Q, 32, "little")


SECRETS["discord"] = ed25519_public(DISCORD_SEED).hex()


def key(source):
    return SECRETS[source].encode()


def rfc3339(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".123456789Z"


# --------------------------------------------------------------------------------------------
# Bodies (never time-dependent: a redelivery carries the same bytes)


def dumps_compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def stripe_body(event_id, session_n, order_id, amount=4900):
    event = {
        "id": event_id,
        "object": "event",
        "api_version": "2025-03-31.basil",
        "created": FIXED_TIMESTAMP - 5,
        "data": {
            "object": {
                "id": "cs_test_hookclaim%04d" % session_n,
                "object": "checkout.session",
                "amount_subtotal": amount,
                "amount_total": amount,
                "currency": "eur",
                "customer": "cus_hookclaim0001",
                "customer_details": {"email": "buyer@example.com", "name": "Ada Buyer"},
                "livemode": False,
                "metadata": {"order_id": order_id},
                "mode": "payment",
                "payment_intent": "pi_hookclaim%04d" % session_n,
                "payment_status": "paid",
                "status": "complete",
            }
        },
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": "checkout.session.completed",
    }
    # Stripe sends pretty-printed JSON: a verifier that re-serialises the body breaks here.
    return json.dumps(event, indent=2, ensure_ascii=False).encode("utf-8")


GITHUB_REPOSITORY = {
    "id": 800000001,
    "node_id": "R_kgDOHookclaim",
    "name": "demo",
    "full_name": "hookclaim/demo",
    "private": True,
    "owner": {"login": "hookclaim", "id": 900000001, "type": "Organization"},
    "default_branch": "main",
}
GITHUB_SENDER = {"login": "octo-dev", "id": 900000002, "type": "User"}


def github_push_body(n, message):
    before = hashlib.sha1(b"hookclaim-before-%d" % n).hexdigest()
    after = hashlib.sha1(b"hookclaim-after-%d" % n).hexdigest()
    commit = {
        "id": after,
        "tree_id": hashlib.sha1(b"hookclaim-tree-%d" % n).hexdigest(),
        "distinct": True,
        "message": message,
        "timestamp": "2025-12-31T23:59:30Z",
        "author": {"name": "Octo Dev", "email": "octo-dev@example.com", "username": "octo-dev"},
        "committer": {"name": "Octo Dev", "email": "octo-dev@example.com", "username": "octo-dev"},
        "added": [],
        "removed": [],
        "modified": ["src/invoice.rs"],
    }
    return dumps_compact({
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "repository": GITHUB_REPOSITORY,
        "pusher": {"name": "octo-dev", "email": "octo-dev@example.com"},
        "sender": GITHUB_SENDER,
        "created": False,
        "deleted": False,
        "forced": False,
        "base_ref": None,
        "commits": [commit],
        "head_commit": commit,
    })


def github_ping_body():
    return dumps_compact({
        "zen": "Design for failure.",
        "hook_id": 500000001,
        "hook": {
            "type": "Repository",
            "id": 500000001,
            "name": "web",
            "active": True,
            "events": ["push"],
            "config": {"content_type": "json", "insecure_ssl": "0",
                       "url": "https://%s.lambda-url.%s.on.aws/webhooks/github"
                              % (FUNCTION_URL_ID, REGION)},
        },
        "repository": GITHUB_REPOSITORY,
        "sender": GITHUB_SENDER,
    })


def github_issues_body():
    """An `issues` event, action `opened`, as GitHub sends it for a new issue."""
    issue = {
        "url": "https://api.github.com/repos/hookclaim/demo/issues/42",
        "html_url": "https://github.com/hookclaim/demo/issues/42",
        "id": 700000042,
        "node_id": "I_kwDOHookclaim42",
        "number": 42,
        "title": "Invoice totals off by one cent",
        "user": GITHUB_SENDER,
        "labels": [{"id": 600000001, "name": "bug", "color": "d73a4a", "default": True}],
        "state": "open",
        "locked": False,
        "assignees": [],
        "comments": 0,
        "created_at": "2025-12-31T23:59:40Z",
        "updated_at": "2025-12-31T23:59:40Z",
        "closed_at": None,
        "author_association": "MEMBER",
        "body": "An order of 3 x 0.10 EUR is invoiced as 0.31 EUR.",
    }
    return dumps_compact({
        "action": "opened",
        "issue": issue,
        "repository": GITHUB_REPOSITORY,
        "sender": GITHUB_SENDER,
    })


def svix_body(amount=4900):
    return dumps_compact({
        "type": "invoice.paid",
        "timestamp": "2025-12-31T23:59:55.000000Z",
        "data": {"id": "inv_hookclaim0001", "customer_id": "cust_0001", "amount": amount,
                 "currency": "EUR", "metadata": {"order_id": "ord_3001"}},
    })


def polar_body(amount=4900):
    return dumps_compact({
        "type": "order.paid",
        "timestamp": "2025-12-31T23:59:58.123456Z",
        "data": {
            "id": "1b7d3f0e-5c2a-4e8b-9f61-0a2c4e6b8d01",
            "status": "paid",
            "paid": True,
            "billing_reason": "purchase",
            "total_amount": amount,
            "currency": "usd",
            "customer": {"id": "6e0a9c1d-2b4f-4a7e-8d35-9c1b2a3f4e50", "email": "buyer@example.com"},
            "product": {"id": "c2f4e6a8-0b1d-4c3e-a5f7-9e8d7c6b5a41", "name": "hookclaim Pro licence"},
            "metadata": {"order_id": "ord_2001"},
        },
    })


def acme_body(amount=4900):
    # Default json.dumps separators (with spaces) and a non-ASCII name: the MAC covers these
    # exact UTF-8 bytes.
    return json.dumps({
        "event": "invoice.paid",
        "invoice": {"id": "in_acme_0001", "customer": "Zoë Café", "amount_cents": amount,
                    "order_id": "ord_4001"},
        "sent_at": "2025-12-31T23:59:59Z",
    }, ensure_ascii=False).encode("utf-8")


# --------------------------------------------------------------------------------------------
# Event envelopes


def clf_time(ts):
    """API Gateway's requestContext time, e.g. 01/Jan/2026:00:00:00 +0000."""
    t = time.gmtime(ts)
    return "%02d/%s/%04d:%02d:%02d:%02d +0000" % (
        t.tm_mday, MONTHS[t.tm_mon - 1], t.tm_year, t.tm_hour, t.tm_min, t.tm_sec)


def iso_time(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def fake_uuid(seed):
    h = hashlib.sha256(seed.encode()).hexdigest()
    return "%s-%s-4%s-a%s-%s" % (h[0:8], h[8:12], h[13:16], h[17:20], h[20:32])


def http_api_request_id(seed):
    return base64.b64encode(hashlib.sha256(seed.encode()).digest()[:10]).decode().rstrip("=") + "="


def trace_id(seed, ts):
    return "Root=1-%08x-%s" % (ts, hashlib.sha256(seed.encode()).hexdigest()[:24])


class Request:
    """One HTTP request as the sender makes it: canonical-case headers and the exact body bytes."""

    def __init__(self, method, source, headers, body, source_ip, query=""):
        self.query = query
        self.method = method
        self.source = source
        self.path = "/webhooks/" + source
        self.headers = headers  # list of (Name, value), sender's casing
        self.body = body        # bytes, or None for no body
        self.source_ip = source_ip

    def user_agent(self):
        for name, value in self.headers:
            if name.lower() == "user-agent":
                return value
        return ""

    def body_fields(self, base64_body):
        if self.body is None:
            return {"isBase64Encoded": False}
        if base64_body:
            return {"body": base64.b64encode(self.body).decode("ascii"), "isBase64Encoded": True}
        return {"body": self.body.decode("utf-8"), "isBase64Encoded": False}

    def transport_headers(self, host, seed, ts):
        extra = [("Host", host)]
        if self.body is not None:
            extra.append(("Content-Length", str(len(self.body))))
        extra += [
            ("X-Amzn-Trace-Id", trace_id(seed, ts)),
            ("X-Forwarded-For", self.source_ip),
            ("X-Forwarded-Port", "443"),
            ("X-Forwarded-Proto", "https"),
        ]
        return self.headers + extra


def http_api_v2(req, ts, seed, base64_body=False):
    """API Gateway HTTP API, payload format 2.0 (`sam local generate-event apigateway http-api-proxy`)."""
    host = "%s.execute-api.%s.amazonaws.com" % (HTTP_API_ID, REGION)
    route_key = "%s /webhooks/{source}" % req.method
    headers = {k.lower(): v for k, v in req.transport_headers(host, seed, ts)}
    event = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": req.path,
        "rawQueryString": req.query,
        "headers": headers,
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": HTTP_API_ID,
            "domainName": host,
            "domainPrefix": HTTP_API_ID,
            "http": {"method": req.method, "path": req.path, "protocol": "HTTP/1.1",
                     "sourceIp": req.source_ip, "userAgent": req.user_agent()},
            "requestId": http_api_request_id(seed),
            "routeKey": route_key,
            "stage": "$default",
            "time": clf_time(ts),
            "timeEpoch": ts * 1000,
        },
        "pathParameters": {"source": req.source},
    }
    if req.query:
        event["queryStringParameters"] = dict(urllib.parse.parse_qsl(req.query))
    event.update(req.body_fields(base64_body))
    return event


def rest_api_v1(req, ts, seed):
    """API Gateway REST API proxy integration (`sam local generate-event apigateway aws-proxy`)."""
    host = "%s.execute-api.%s.amazonaws.com" % (REST_API_ID, REGION)
    headers = req.transport_headers(host, seed, ts)
    event = {
        "resource": "/webhooks/{source}",
        "path": req.path,
        "httpMethod": req.method,
        "headers": dict(headers),
        "multiValueHeaders": {k: [v] for k, v in headers},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"source": req.source},
        "stageVariables": None,
        "requestContext": {
            "resourceId": "w3bh00",
            "resourcePath": "/webhooks/{source}",
            "httpMethod": req.method,
            "extendedRequestId": http_api_request_id(seed + "/extended"),
            "requestTime": clf_time(ts),
            "path": "/prod" + req.path,
            "accountId": ACCOUNT,
            "protocol": "HTTP/1.1",
            "stage": "prod",
            "domainPrefix": REST_API_ID,
            "requestTimeEpoch": ts * 1000,
            "requestId": fake_uuid(seed),
            "identity": {
                "cognitoIdentityPoolId": None,
                "accountId": None,
                "cognitoIdentityId": None,
                "caller": None,
                "sourceIp": req.source_ip,
                "principalOrgId": None,
                "accessKey": None,
                "cognitoAuthenticationType": None,
                "cognitoAuthenticationProvider": None,
                "userArn": None,
                "userAgent": req.user_agent(),
                "user": None,
            },
            "domainName": host,
            "apiId": REST_API_ID,
        },
    }
    event.update(req.body_fields(False))
    return event


def function_url(req, ts, seed, base64_body=False):
    """Lambda function URL (payload format 2.0, routeKey $default, no pathParameters)."""
    host = "%s.lambda-url.%s.on.aws" % (FUNCTION_URL_ID, REGION)
    headers = {k.lower(): v for k, v in req.transport_headers(host, seed, ts)}
    headers["x-amzn-tls-cipher-suite"] = "TLS_AES_128_GCM_SHA256"
    headers["x-amzn-tls-version"] = "TLSv1.3"
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": req.path,
        "rawQueryString": req.query,
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": FUNCTION_URL_ID,
            "domainName": host,
            "domainPrefix": FUNCTION_URL_ID,
            "http": {"method": req.method, "path": req.path, "protocol": "HTTP/1.1",
                     "sourceIp": req.source_ip, "userAgent": req.user_agent()},
            "requestId": fake_uuid(seed),
            "routeKey": "$default",
            "stage": "$default",
            "time": clf_time(ts),
            "timeEpoch": ts * 1000,
        },
    }
    if req.query:
        event["queryStringParameters"] = dict(urllib.parse.parse_qsl(req.query))
    event.update(req.body_fields(base64_body))
    return event


def scheduled_event(ts):
    """EventBridge rule schedule (`sam local generate-event cloudwatch scheduled-event`)."""
    return {
        "version": "0",
        "id": fake_uuid("retention-scheduled-%d" % ts),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": iso_time(ts),
        "region": REGION,
        "resources": ["arn:aws:events:%s:%s:rule/hookclaim-retention" % (REGION, ACCOUNT)],
        "detail": {},
    }


# --------------------------------------------------------------------------------------------
# Senders' requests


def stripe_request(body, ts):
    return Request("POST", "stripe", [
        ("Accept", "*/*; q=0.5, application/xml"),
        ("Cache-Control", "no-cache"),
        ("Content-Type", "application/json; charset=utf-8"),
        ("Stripe-Signature", stripe_signature(body, ts)),
        ("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
    ], body, "203.0.113.10")


def github_request(body, delivery, event, source="github"):
    sigs = github_signatures(body)
    return Request("POST", source, [
        ("Accept", "*/*"),
        ("Content-Type", "application/json"),
        ("User-Agent", "GitHub-Hookshot/7c3d2a1"),
        ("X-GitHub-Delivery", delivery),
        ("X-GitHub-Event", event),
        ("X-GitHub-Hook-ID", "500000001"),
        ("X-GitHub-Hook-Installation-Target-ID", "800000001"),
        ("X-GitHub-Hook-Installation-Target-Type", "repository"),
        ("X-Hub-Signature", sigs["X-Hub-Signature"]),
        ("X-Hub-Signature-256", sigs["X-Hub-Signature-256"]),
    ], body, "203.0.113.20")


def svix_request(body, ts):
    # A `v1a` (asymmetric) entry comes first: verifiers skip it and match the `v1` entry.
    v1a = base64.b64encode(hashlib.sha512(b"hookclaim-v1a" + body).digest()).decode()
    sig = standard_signature("svix", SVIX_MESSAGE_ID, ts, body)
    return Request("POST", "svix", [
        ("Content-Type", "application/json"),
        ("User-Agent", "Svix-Webhooks/1.0"),
        ("webhook-id", SVIX_MESSAGE_ID),
        ("webhook-timestamp", str(ts)),
        ("webhook-signature", "v1a,%s v1,%s" % (v1a, sig)),
    ], body, "203.0.113.30")


def polar_request(body, ts):
    sig = standard_signature("polar", POLAR_MESSAGE_ID, ts, body)
    return Request("POST", "polar", [
        ("Content-Type", "application/json"),
        ("User-Agent", "polar-webhooks/1.0"),
        ("webhook-id", POLAR_MESSAGE_ID),
        ("webhook-timestamp", str(ts)),
        ("webhook-signature", "v1," + sig),
    ], body, "203.0.113.40")


def acme_request(body):
    return Request("POST", "acme", [
        ("Content-Type", "application/json; charset=utf-8"),
        ("User-Agent", "Acme-Webhooks/2.3"),
        ("X-Acme-Delivery", ACME_DELIVERY_ID),
        ("X-Acme-Signature", acme_signature(body)),
    ], body, "203.0.113.50")


def signed_request(source, headers, body, ip_suffix, query=""):
    return Request("POST", source, [("Content-Type", "application/json")] + headers, body,
                   "203.0.113.%d" % ip_suffix, query)


def hmac_hex(source, message, digest=hashlib.sha256):
    return hmac.new(key(source), message, digest).hexdigest()


def hmac_b64(source, message, digest=hashlib.sha256):
    return base64.b64encode(hmac.new(key(source), message, digest).digest()).decode()


def preset_samples(ts):
    """(file, expected, request, handshake) for every preset; `handshake` is what the provider
    must get back exactly: (status, content type or None, body)."""
    out = []

    def add(name, expected, req, handshake=None):
        out.append((name, expected, req, handshake))

    # Slack: an Events API event, then its two handshakes.
    body = dumps_compact({"token": "XXYYZZ", "team_id": "T0HOOKCLAIM", "type": "event_callback",
                          "event": {"type": "app_mention", "user": "U0001", "text": "hi",
                                    "channel": "C0001"},
                          "event_id": "Ev0HOOKCLAIMSAMPLE1", "event_time": FIXED_TIMESTAMP})
    slack = lambda b: [("X-Slack-Request-Timestamp", str(ts)),  # noqa: E731
                       ("X-Slack-Signature", "v0=" + hmac_hex("slack", b"v0:%d:" % ts + b))]
    add("slack.json", "200 new delivery, done", signed_request("slack", slack(body), body, 60))
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    body = dumps_compact({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": challenge,
                          "type": "url_verification"})
    add("slack-url-verification.json", "200 handshake: the challenge, as text/plain",
        signed_request("slack", slack(body), body, 60), (200, "text/plain", challenge))
    body = b"ssl_check=1&token=Jhj5dZrVaK7ZwHHjRyZWjbDl"
    add("slack-ssl-check.json", "200 handshake: empty",
        Request("POST", "slack", [("Content-Type", "application/x-www-form-urlencoded")], body,
                "203.0.113.60"), (200, None, ""))

    # Shopify.
    body = dumps_compact({"id": 820982911946154508, "email": "jon@example.com",
                          "total_price": "49.00"})
    add("shopify.json", "200 new delivery, done", signed_request("shopify", [
        ("X-Shopify-Hmac-Sha256", hmac_b64("shopify", body)),
        ("X-Shopify-Topic", "orders/create"),
        ("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"),
        ("X-Shopify-Shop-Domain", "hookclaim.myshopify.com")], body, 61))

    # Zoom: an event, then the URL validation.
    zoom = lambda b: [("x-zm-request-timestamp", str(ts)),  # noqa: E731
                      ("x-zm-signature", "v0=" + hmac_hex("zoom", b"v0:%d:" % ts + b))]
    body = dumps_compact({"event": "meeting.started", "event_ts": FIXED_TIMESTAMP * 1000 + 123,
                          "payload": {"account_id": "AAAAAABBBB",
                                      "object": {"id": "1234567890", "topic": "hookclaim"}}})
    add("zoom.json", "200 new delivery, done", signed_request("zoom", zoom(body), body, 62))
    plain = "qgg8vlvZRS6UYooatFL8Aw"
    body = dumps_compact({"payload": {"plainToken": plain}, "event_ts": FIXED_TIMESTAMP * 1000,
                          "event": "endpoint.url_validation"})
    add("zoom-url-validation.json", "200 handshake: plainToken and its HMAC, as JSON",
        signed_request("zoom", zoom(body), body, 62),
        (200, "application/json", json.dumps({
            "plainToken": plain,
            "encryptedToken": hmac_hex("zoom", plain.encode())}, separators=(",", ":"))))

    # Paddle.
    body = dumps_compact({"event_id": "evt_01hookclaimsample00000001",
                          "event_type": "transaction.completed",
                          "occurred_at": "2026-01-01T00:00:00.000000Z",
                          "data": {"id": "txn_01hookclaim", "status": "completed"}})
    # Paddle's libraries allow 5 s either way: signed 28 s after the other presets, 2 s before
    # the clock the tests verify them at (30 s after them). With --now that is 28 s ahead; the
    # local paddle source allows 60 s (SOURCES above), so a live run has time to send it.
    paddle_ts = ts + PADDLE_DELAY_SECS
    add("paddle.json", "200 new delivery, done", signed_request("paddle", [
        ("Paddle-Signature",
         "ts=%d;h1=%s" % (paddle_ts, hmac_hex("paddle", b"%d:" % paddle_ts + body)))],
        body, 63))

    # Linear: the timestamp is in the signed body.
    body = dumps_compact({"action": "create", "type": "Issue",
                          "data": {"id": "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"},
                          "webhookTimestamp": ts * 1000,
                          "webhookId": "000042e3-d123-4980-b49f-8e140eef9329"})
    add("linear.json", "200 new delivery, done", signed_request("linear", [
        ("Linear-Signature", hmac_hex("linear", body)),
        ("Linear-Delivery", "234d1a4e-b617-4388-90fe-adc3633d6b72"),
        ("Linear-Event", "Issue")], body, 64))

    # Twitch: a notification, the callback verification, a revocation.
    def twitch(kind, msg_id, b):
        stamp = rfc3339(ts)
        return [("Twitch-Eventsub-Message-Id", msg_id), ("Twitch-Eventsub-Message-Retry", "0"),
                ("Twitch-Eventsub-Message-Type", kind),
                ("Twitch-Eventsub-Message-Signature",
                 "sha256=" + hmac_hex("twitch", msg_id.encode() + stamp.encode() + b)),
                ("Twitch-Eventsub-Message-Timestamp", stamp),
                ("Twitch-Eventsub-Subscription-Type", "channel.follow"),
                ("Twitch-Eventsub-Subscription-Version", "2")]
    sub = {"id": "f1c2a387-161a-49f9-a165-0f21d7a4e1c4", "status": "enabled",
           "type": "channel.follow", "version": "2", "condition": {"broadcaster_user_id": "1337"}}
    body = dumps_compact({"subscription": sub, "event": {"user_id": "1234",
                                                         "broadcaster_user_id": "1337"}})
    add("twitch.json", "200 new delivery, done", signed_request(
        "twitch", twitch("notification", "befa7b53-d79d-478f-86b9-120f112b044e", body), body, 65))
    challenge = "pogchamp-kappa-360noscope-vohiyo"
    body = dumps_compact({"challenge": challenge, "subscription": dict(sub, status=
                          "webhook_callback_verification_pending")})
    add("twitch-verification.json", "200 handshake: the challenge, as text/plain",
        signed_request("twitch", twitch("webhook_callback_verification",
                                        "e76c6bd4-55c9-4987-8304-da1588d8988b", body), body, 65),
        (200, "text/plain", challenge))
    body = dumps_compact({"subscription": dict(sub, status="authorization_revoked")})
    add("twitch-revocation.json", "204 handshake: revocation logged and counted",
        signed_request("twitch", twitch("revocation", "84c1e79a-2a4b-4c13-ba0b-4312293e9308",
                                        body), body, 65), (204, None, ""))

    # Discord: an interaction, then the PING.
    def discord(b):
        return [("X-Signature-Ed25519", ed25519_sign(DISCORD_SEED, str(ts).encode() + b).hex()),
                ("X-Signature-Timestamp", str(ts))]
    body = dumps_compact({"type": 2, "id": "1336789012345678901",
                          "application_id": "1234567890123456789", "token": "aW50ZXJhY3Rpb24",
                          "version": 1, "data": {"id": "1000", "name": "hello", "type": 1}})
    add("discord.json", "200 new delivery, done", signed_request("discord", discord(body), body, 66))
    body = dumps_compact({"type": 1, "id": "1336789012345678900",
                          "application_id": "1234567890123456789", "token": "cGluZw", "version": 1})
    add("discord-ping.json", "200 handshake: type 1 (PONG), as JSON",
        signed_request("discord", discord(body), body, 66),
        (200, "application/json", '{"type":1}'))

    # GitLab: a token; then a delivery whose id header is not ASCII.
    body = dumps_compact({"object_kind": "push", "ref": "refs/heads/main"})
    gitlab = [("X-Gitlab-Token", SECRETS["gitlab"]), ("X-Gitlab-Event", "Push Hook")]
    add("gitlab.json", "200 new delivery, done", signed_request("gitlab", gitlab + [
        ("X-Gitlab-Event-UUID", "13792a34-cac6-4fda-95a8-c58e00a3954e"),
        ("Idempotency-Key", "f5e5f7f0-0b5e-4b4a-8d5f-4b7e3f9c2a10")], body, 67))
    add("gitlab-non-ascii-id.json", "400 delivery id header is not ASCII (reason in the body)",
        signed_request("gitlab", gitlab + [("Idempotency-Key", "clé-%d" % 1)], body, 67))

    # Bitbucket.
    body = dumps_compact({"push": {"changes": []}, "repository": {"full_name": "hookclaim/demo"}})
    add("bitbucket.json", "200 new delivery, done", signed_request("bitbucket", [
        ("X-Hub-Signature", "sha256=" + hmac_hex("bitbucket", body)),
        ("X-Event-Key", "repo:push"), ("X-Request-UUID", "d4c7a7d3-8b5f-4c51-9ab2-0f7f3c1b4e55"),
        ("X-Attempt-Number", "1")], body, 68))

    # Meta: a WhatsApp notification, then the subscription GET (right and wrong token).
    body = dumps_compact({"object": "whatsapp_business_account", "entry": [
        {"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messages": [{"id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERTI", "type": "text",
                          "text": {"body": "hello"}}]}}]}]})
    add("meta.json", "200 new delivery, done", signed_request("meta", [
        ("X-Hub-Signature-256", "sha256=" + hmac_hex("meta", body))], body, 69))
    for name, token, expected, answer in [
        ("meta-subscribe.json", META_VERIFY_TOKEN, "200 handshake: hub.challenge, as text/plain",
         (200, "text/plain", "1158201444")),
        ("meta-subscribe-wrong-token.json", "not-the-token", "403 handshake refused",
         (403, "application/json",
          '{"error":"verify token does not match","status":"forbidden"}')),
    ]:
        query = urllib.parse.urlencode({"hub.mode": "subscribe", "hub.challenge": "1158201444",
                                        "hub.verify_token": token})
        add(name, expected, Request("GET", "meta", [("User-Agent", "facebookplatform/1.0")],
                                    None, "203.0.113.69", query), answer)

    # Twilio: form parameters signed with the public URL.
    params = [("AccountSid", "ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"), ("Body", "Hello from Zoë"),
              ("From", "+15017250604"), ("MessageSid", "SM1234567890abcdef1234567890abcdef"),
              ("To", "+15558675310")]
    signed = PUBLIC_BASE_URL + "twilio" + "".join(k + v for k, v in sorted(params))
    body = urllib.parse.urlencode(params).encode()
    add("twilio.json", "200 new delivery, done", Request("POST", "twilio", [
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("X-Twilio-Signature", hmac_b64("twilio", signed.encode(), hashlib.sha1)),
        ("I-Twilio-Idempotency-Token", "0d8f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b")], body,
        "203.0.113.70"))

    # Square: the notification URL and the body.
    body = dumps_compact({"merchant_id": "6SSW7HV8K2ST5", "type": "payment.updated",
                          "event_id": "13b867cf-db3d-4b1c-90b6-2f32a9d78124",
                          "data": {"type": "payment", "id": "KkAkhdMsgzn59SM8A89WgKwekxLZY"}})
    add("square.json", "200 new delivery, done", signed_request("square", [
        ("X-Square-HmacSha256-Signature",
         hmac_b64("square", (PUBLIC_BASE_URL + "square").encode() + body))], body, 71))

    # HubSpot v3: method, URL, body, timestamp (ms).
    body = dumps_compact([{"eventId": 1937291839, "subscriptionId": 2507, "portalId": 62515,
                           "appId": 1160452, "occurredAt": FIXED_TIMESTAMP * 1000 - 2000,
                           "subscriptionType": "contact.propertyChange", "attemptNumber": 0,
                           "objectId": 123, "propertyName": "firstname", "propertyValue": "Zoë"}])
    ms = str(ts * 1000)
    add("hubspot.json", "200 new delivery, done", signed_request("hubspot", [
        ("X-HubSpot-Request-Timestamp", ms),
        ("X-HubSpot-Signature-v3", hmac_b64("hubspot", b"POST" + (PUBLIC_BASE_URL + "hubspot")
                                            .encode() + body + ms.encode()))], body, 72))

    # Intercom: HMAC-SHA1.
    body = dumps_compact({"type": "notification_event", "id": "notif_hookclaim_0001",
                          "topic": "conversation.user.created", "delivery_attempts": 1,
                          "data": {"item": {"type": "conversation", "id": "1"}}})
    add("intercom.json", "200 new delivery, done", signed_request("intercom", [
        ("X-Hub-Signature", "sha1=" + hmac_hex("intercom", body, hashlib.sha1))], body, 73))

    # Clerk and Resend: Svix, with the svix- header spelling.
    for source, msg_id, event_type in [("clerk", "msg_2hookclaimClerkSample01", "user.created"),
                                       ("resend", "msg_2hookclaimResendSample1", "email.sent")]:
        body = dumps_compact({"type": event_type, "data": {"id": "%s_sample_1" % source}})
        sig = base64.b64encode(hmac_sha256(standard_key(SECRETS[source]),
                                           b"%s.%d." % (msg_id.encode(), ts) + body)).decode()
        add("%s.json" % source, "200 new delivery, done", signed_request(source, [
            ("svix-id", msg_id), ("svix-timestamp", str(ts)), ("svix-signature", "v1," + sig)],
            body, 74))
    return out


def tampered(req, body):
    """The same request (headers and signature untouched) with another body."""
    return Request(req.method, req.source, list(req.headers), body, req.source_ip)


# --------------------------------------------------------------------------------------------
# The catalogue: (file, function, expected, event). Order = the order to send them in.


# Handshake events: the exact answer each provider needs (filled in by `build`).
HANDSHAKES = {}
# Retention commands: fields their report must have (filled in by `build`).
REPORTS = {}


# --------------------------------------------------------------------------------------------
# Judging answers: the one table of expectations, used by every script that sends the samples
# (scripts/run through the cargo-lambda emulator, scripts/invoke through AWS's RIE).


def _field(obj, path):
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return KeyError
        obj = obj[part]
    return obj


def judge(entry, answer):
    """(ok, shown): whether a function's answer to a manifest entry is what the entry expects,
    and a short text of what it said."""
    if not isinstance(answer, dict):
        return False, str(answer)[:60]
    report = entry.get("report", {})
    if "errorType" in answer:
        ok = answer["errorType"] == report.get("errorType")
        return ok, "%s: %s" % (answer["errorType"], answer.get("errorMessage", "")[:60])
    if entry["function"] == "retention":
        wrong = [k for k, v in report.items() if _field(answer, k) != v]
        if answer.get("phase_errors"):
            wrong.append("phase_errors")
        shown = "%s report" % answer.get("command")
        return not wrong, shown + ("" if not wrong else " (wrong: %s)" % ", ".join(wrong))
    text = answer.get("body") or ""
    try:
        shown = json.loads(text or "{}").get("status", "")
    except (ValueError, AttributeError):
        shown = text  # a handshake's answer is the provider's own format, e.g. a text/plain challenge
    shown = str(shown or text)
    status = str(answer.get("statusCode"))
    expected = entry["expected"]
    ok = expected.split()[0] == status
    if "new delivery" in expected:
        ok = ok and shown == "processed"
    elif "duplicate" in expected:
        ok = ok and shown == "duplicate"
    return ok, "%s %s" % (status, shown[:30])


def judge_answers(path):
    """Reads `file<TAB>answer JSON` lines, prints each against its expectation and the count;
    exit status 1 unless every answer was expected."""
    entries = {e["file"]: e for e in manifest(build(FIXED_TIMESTAMP))}
    good = total = 0
    with open(path, encoding="utf-8") as f:
        for row in f:
            file, raw = row.rstrip("\n").split("\t", 1)
            entry = entries[os.path.basename(file)]
            try:
                answer = json.loads(raw)
            except ValueError:
                answer = raw
            ok, shown = judge(entry, answer)
            total += 1
            good += ok
            print("%-10s %-9s %-34s %-24s (expected %s)" % (
                "ok" if ok else "UNEXPECTED", entry["function"], file, shown, entry["expected"]))
    print("\n%d of %d samples answered as expected" % (good, total))
    return 0 if good == total and total else 1


def manifest(catalogue):
    """The catalogue without its events: file, function, expected, and the handshake answer or
    report fields where there are some."""
    rows = [{"file": n, "function": f, "expected": e} for n, f, e, _ in catalogue]
    for row in rows:
        if row["file"] in HANDSHAKES:
            row["handshake"] = HANDSHAKES[row["file"]]
        if row["file"] in REPORTS:
            row["report"] = REPORTS[row["file"]]
    return rows


def build(base_ts):
    t0 = base_ts
    t1 = base_ts + REDELIVERY_DELAY_SECS
    out = []

    def add(name, function, expected, event, report=None):
        out.append((name, function, expected, event))
        if report is not None:
            REPORTS[name] = report

    # stripe
    body = stripe_body(STRIPE_EVENT_ID, 1, "ord_1001")
    add("stripe.json", "webhook", "200 new delivery, done",
        http_api_v2(stripe_request(body, t0), t0, "stripe"))
    add("stripe-redelivery.json", "webhook", "200 duplicate (re-signed 60 s later)",
        http_api_v2(stripe_request(body, t1), t1, "stripe-redelivery"))
    add("stripe-tampered.json", "webhook", "401 bad signature",
        http_api_v2(tampered(stripe_request(body, t0),
                             stripe_body(STRIPE_EVENT_ID, 1, "ord_1001", amount=1)),
                    t0, "stripe-tampered"))

    # github
    body = github_push_body(1, "Fix rounding in invoice totals")
    add("github.json", "webhook", "200 new delivery, done",
        http_api_v2(github_request(body, GITHUB_PUSH_DELIVERY, "push"), t0, "github"))
    add("github-redelivery.json", "webhook", "200 duplicate (same signature: no timestamp)",
        http_api_v2(github_request(body, GITHUB_PUSH_DELIVERY, "push"), t1, "github-redelivery"))
    forged = github_push_body(1, "Fix rounding in invoice totals; also pay me")
    add("github-tampered.json", "webhook", "401 bad signature",
        http_api_v2(tampered(github_request(body, GITHUB_PUSH_DELIVERY, "push"), forged),
                    t0, "github-tampered"))

    # svix (Standard Webhooks, whsec_ secret)
    body = svix_body()
    add("svix.json", "webhook", "200 new delivery, done",
        http_api_v2(svix_request(body, t0), t0, "svix"))
    add("svix-redelivery.json", "webhook", "200 duplicate (re-signed 60 s later)",
        http_api_v2(svix_request(body, t1), t1, "svix-redelivery"))
    add("svix-tampered.json", "webhook", "401 bad signature",
        http_api_v2(tampered(svix_request(body, t0), svix_body(amount=1)), t0, "svix-tampered"))

    # polar (Standard Webhooks, raw secret)
    body = polar_body()
    add("polar.json", "webhook", "200 new delivery, done",
        http_api_v2(polar_request(body, t0), t0, "polar"))
    add("polar-redelivery.json", "webhook", "200 duplicate (re-signed 60 s later)",
        http_api_v2(polar_request(body, t1), t1, "polar-redelivery"))
    add("polar-tampered.json", "webhook", "401 bad signature",
        http_api_v2(tampered(polar_request(body, t0), polar_body(amount=1)), t0, "polar-tampered"))

    # acme (generic HMAC)
    body = acme_body()
    add("acme.json", "webhook", "200 new delivery, done",
        http_api_v2(acme_request(body), t0, "acme"))
    add("acme-redelivery.json", "webhook", "200 duplicate (same signature: no timestamp)",
        http_api_v2(acme_request(body), t1, "acme-redelivery"))
    add("acme-tampered.json", "webhook", "401 bad signature",
        http_api_v2(tampered(acme_request(body), acme_body(amount=1)), t0, "acme-tampered"))

    # presets, signed at the redelivery time (Linear allows only 60 s), and their handshakes
    for name, expected, req, answer in preset_samples(t1):
        if req.method == "GET":
            event = function_url(req, t1, name)
        else:
            event = http_api_v2(req, t1, name)
        add(name, "webhook", expected, event)
        if answer is not None:
            HANDSHAKES[name] = {"status": answer[0], "content_type": answer[1], "body": answer[2]}

    # other envelopes, each a new delivery
    body = stripe_body(STRIPE_REST_EVENT_ID, 2, "ord_1002")
    add("stripe-rest-v1.json", "webhook", "200 new delivery, done (REST API v1 event)",
        rest_api_v1(stripe_request(body, t0), t0, "stripe-rest-v1"))
    add("github-function-url.json", "webhook", "200 new delivery, done (function URL event)",
        function_url(github_request(github_ping_body(), GITHUB_PING_DELIVERY, "ping"),
                     t0, "github-function-url"))
    add("github-base64.json", "webhook", "200 new delivery, done (base64 body)",
        http_api_v2(github_request(github_push_body(2, "Add licence issuing"),
                                   GITHUB_BASE64_DELIVERY, "push"),
                    t0, "github-base64", base64_body=True))
    add("github-issues.json", "webhook", "200 new delivery, done (an `issues` event)",
        http_api_v2(github_request(github_issues_body(), GITHUB_ISSUES_DELIVERY, "issues"),
                    t0, "github-issues"))

    # refusals
    body = github_push_body(3, "Nobody configured this source")
    add("unknown-source.json", "webhook", "404 unknown source",
        http_api_v2(github_request(body, "f2e4c6a8-1b3d-4e5f-8a7b-9c0d1e2f3a4b", "push",
                                   source="nope"), t0, "unknown-source"))
    get = Request("GET", "github", [("Accept", "*/*"), ("User-Agent", "curl/8.5.0")], None,
                  "198.51.100.7")
    add("wrong-method.json", "webhook", "405 method not allowed (function URL event)",
        function_url(get, t0, "wrong-method"))

    # retention: `report` holds the fields (dotted paths) its answer must have, with their
    # values; an error answer's must have its `errorType`
    run = {"command": "run", "stopped_early": False}
    add("retention-scheduled.json", "retention", "run report (EventBridge rule payload ignored)",
        scheduled_event(t0), report=run)
    add("retention-scheduler.json", "retention", "run report (EventBridge Scheduler Input {})", {},
        report=run)
    add("retention-run.json", "retention", "run report", {"command": "run"}, report=run)
    add("retention-dry-run.json", "retention", "dry-run report, nothing changed",
        {"command": "dry_run"}, report={"command": "dry_run", "reclaimed": 0, "purged": 0})
    add("retention-stats.json", "retention", "counts by source and status", {"command": "stats"},
        report={"command": "stats"})
    add("retention-replay.json", "retention",
        "refused: the stripe sample is done (a done delivery is replayed only with force)",
        {"command": "replay", "source": "stripe", "delivery_id": STRIPE_EVENT_ID, "force": False},
        report={"errorType": "hookclaim.ReplayRefused"})
    add("retention-purge.json", "retention", "purge report (done/dead rows older than 7 days)",
        {"command": "purge", "older_than_days": 7}, report={"command": "purge"})
    add("retention-migrate.json", "retention", "migrations applied (none pending)",
        {"command": "migrate"}, report={"command": "migrate", "migrations.applied": []})
    return out


def local_environment():
    """The `sam local invoke --env-vars` document: logical function ids, plus Parameters for all."""
    secrets = dict(SECRETS)
    secrets["github"] = [GITHUB_NEXT_SECRET, SECRETS["github"]]
    # Meta's verify token is a secret too: beside the app secret, never in HOOKCLAIM_SOURCES.
    secrets["meta.verify_token"] = META_VERIFY_TOKEN
    return {
        "Parameters": {
            "DATABASE_URL": LOCAL_DATABASE_URL,
            "DATABASE_SECRET_ARN": "",
            "DATABASE_TLS": "disable",
            "DATABASE_CA_FILE": "",
            "DATABASE_IAM_AUTH": "false",
            "HOOKCLAIM_SOURCES": json.dumps(SOURCES, separators=(",", ":")),
            "HOOKCLAIM_PROCESSOR": "store",
            # Locally both functions apply the migrations; the template's webhook never does.
            "HOOKCLAIM_MIGRATE": "auto",
        },
        "WebhookFunction": {
            "HOOKCLAIM_SECRETS": json.dumps(secrets, separators=(",", ":")),
            "HOOKCLAIM_SECRETS_ARN": "",
        },
        # The template gives the retention function the owner's secret to migrate with; locally
        # the one login (DATABASE_URL) migrates too.
        "RetentionFunction": {
            "DATABASE_OWNER_SECRET_ARN": "",
        },
    }


def render(obj):
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(repo, "events"),
                        help="directory to write the events to (default: events/)")
    parser.add_argument("--now", action="store_true",
                        help="sign at the current time instead of %d" % FIXED_TIMESTAMP)
    parser.add_argument("--check", action="store_true",
                        help="regenerate in memory; exit 1 if any file in --out (or env.local.json) differs")
    parser.add_argument("--manifest", action="store_true",
                        help="print the files in sending order with their function and expected result")
    parser.add_argument("--dotenv", action="store_true",
                        help="print the webhook function's local environment as KEY='value' lines")
    parser.add_argument("--judge", metavar="ANSWERS",
                        help="check `file<TAB>answer` lines against the samples' expectations")
    args = parser.parse_args()

    if args.judge:
        return judge_answers(args.judge)
    if args.check and args.now:
        parser.error("--check compares the fixed-timestamp files; it cannot be combined with --now")

    base_ts = FIXED_TIMESTAMP
    if args.now:
        base_ts = int(time.time()) - REDELIVERY_DELAY_SECS
    catalogue = build(base_ts)

    if args.manifest:
        sys.stdout.write(json.dumps(manifest(catalogue), indent=2) + "\n")
        return 0
    if args.dotenv:
        env = local_environment()
        merged = dict(env["Parameters"])
        merged.update(env["WebhookFunction"])
        for key, value in merged.items():
            if value:
                sys.stdout.write("%s='%s'\n" % (key, value))
        return 0

    files = [(os.path.join(args.out, name), render(event)) for name, _, _, event in catalogue]
    if not args.now:
        files.append((os.path.join(repo, "env.local.json"), render(local_environment())))

    if args.check:
        stale = []
        for path, data in files:
            try:
                with open(path, "rb") as f:
                    if f.read() != data:
                        stale.append(path)
            except FileNotFoundError:
                stale.append(path)
        for path in stale:
            sys.stderr.write("differs or missing: %s\n" % os.path.relpath(path))
        if stale:
            sys.stderr.write("run `python3 scripts/events.py` to regenerate\n")
            return 1
        print("%d files up to date" % len(files))
        return 0

    os.makedirs(args.out, exist_ok=True)
    for path, data in files:
        with open(path, "wb") as f:
            f.write(data)
    print("wrote %d files (signed at %d)" % (len(files), base_ts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
