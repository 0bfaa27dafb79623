#!/usr/bin/env python3
"""Writes crates/hookclaim-verify/src/vectors.json: one signed request per preset, signed (or,
where a provider publishes only a verifier, accepted) by the provider's own SDK, with its
provenance.

Not part of the tests or the build: the committed file is the test data, and the tests never
need these SDKs. Regenerate by hand, offline once the packages are installed:

    python3 -m venv /tmp/sdk && /tmp/sdk/bin/pip install slack-sdk==3.48.0 svix==2.9.1 \\
        standardwebhooks==1.1.0 twilio==9.13.0 pynacl==1.6.2 hubspot-api-client==12.0.0 \\
        squareup==46.0.0.20260916 paddle-python-sdk==1.16.1 polar-sdk==1.0.2
    (mkdir -p /tmp/npm && cd /tmp/npm && npm init -y && npm install discord-interactions@4.4.0 \\
        @linear/sdk@98.0.0 @shopify/shopify-api@13.1.0 @zoom/rivet@0.4.0 \\
        @twurple/eventsub-http@8.1.4)
    HOOKCLAIM_NODE_MODULES=/tmp/npm/node_modules /tmp/sdk/bin/python scripts/provider-vectors.py

Each vector is signed a few seconds before the moment it records as `now`, because several SDKs
check timestamps against the real clock while they verify. The secrets are test secrets
(`hookclaim-<preset>-vector-secret`); scripts/check-secrets.py scans test output for them.
"""

import base64
import hashlib
import hmac
import importlib.metadata as md
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "crates", "hookclaim-verify", "src", "vectors.json")
NODE_MODULES = os.environ.get("HOOKCLAIM_NODE_MODULES", "/tmp/npm/node_modules")

NOW = int(time.time())
T = NOW - 5  # when the vectors are signed


def secret(preset, n=""):
    return "hookclaim-%s-vector-secret%s" % (preset, n)


def version(dist):
    return "%s %s" % (dist, md.version(dist))


def npm_version(pkg):
    with open(os.path.join(NODE_MODULES, pkg, "package.json")) as f:
        return "%s %s" % (pkg, json.load(f)["version"])


def node(script):
    """Runs JavaScript with the SDKs' node_modules; returns its stdout, stripped."""
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True,
                         cwd=os.path.dirname(NODE_MODULES), check=False)
    if out.returncode != 0:
        sys.exit("node failed: " + out.stderr)
    return out.stdout.strip()


def js(value):
    return json.dumps(value)


def compact(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


vectors = []


def add(preset, provenance, body, headers, expected, *, secrets=None, query="", method="POST",
        public_url=None, signed_at=None, tolerance=None, tamper_detected=True,
        malformed=None, other_secret=None):
    vectors.append({
        "preset": preset,
        "provenance": provenance,
        "secrets": secrets or [secret(preset)],
        "other_secret": other_secret or secret(preset, "-other"),
        "public_url": public_url,
        "method": method,
        "query": query,
        "headers": headers,
        "body": body.decode(),
        "now": NOW,
        "signed_at_ms": signed_at,
        "tolerance": tolerance,
        "tamper_detected": tamper_detected,
        "malformed": malformed,
        "expected": expected,
    })


def ok(delivery_id, origin, event_type):
    return {"delivery_id": delivery_id, "id_origin": origin, "event_type": event_type}


# ---- Slack: slack_sdk SignatureVerifier -----------------------------------------------------
from slack_sdk.signature import SignatureVerifier, Clock  # noqa: E402


class FixedClock(Clock):
    def now(self):
        return float(NOW)


body = compact({"token": "XXYYZZ", "team_id": "T0001", "api_app_id": "A0001",
                "event": {"type": "app_mention", "user": "U0001", "text": "<@U0002> hi",
                          "ts": "1767225600.000100", "channel": "C0001"},
                "type": "event_callback", "event_id": "Ev0HOOKCLAIM01", "event_time": T})
v = SignatureVerifier(secret("slack"), clock=FixedClock())
sig = v.generate_signature(timestamp=str(T), body=body)
hdrs = {"X-Slack-Request-Timestamp": str(T), "X-Slack-Signature": sig, "X-Slack-Retry-Num": "1",
        "Content-Type": "application/json"}
assert v.is_valid_request(body, hdrs)
add("slack", "signed by %s SignatureVerifier.generate_signature, accepted by is_valid_request"
    % version("slack_sdk"), body, hdrs, ok("Ev0HOOKCLAIM01", "body", "app_mention"),
    signed_at=T * 1000, tolerance={"secs": 300, "future": True},
    malformed={"value": sig[:-2], "error": "malformed"})

# ---- Shopify: @shopify/shopify-api createSHA256HMAC ------------------------------------------
body = compact({"id": 820982911946154508, "email": "jon@example.com", "total_price": "49.00"})
sig = node("require(%s).createSHA256HMAC(%s,%s).then(console.log)" % (
    js(NODE_MODULES + "/@shopify/shopify-api/dist/cjs/runtime/crypto/utils.js"),
    js(secret("shopify")), js(body.decode())))
hdrs = {"X-Shopify-Hmac-Sha256": sig, "X-Shopify-Topic": "orders/create",
        "X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        "X-Shopify-Event-Id": "98880550-7158-44d4-b7cd-2c97c8a091b5",
        "X-Shopify-Shop-Domain": "hookclaim.myshopify.com", "X-Shopify-API-Version": "2026-07",
        "Content-Type": "application/json"}
add("shopify", "signed by %s createSHA256HMAC (runtime/crypto/utils)" % npm_version(
    "@shopify/shopify-api"), body, hdrs,
    ok("b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "header", "orders/create"),
    malformed={"value": sig[:-4], "error": "malformed"})

# ---- Zoom: signed per Zoom's docs, accepted by @zoom/rivet's AwsLambdaReceiver ----------------
body = compact({"event": "meeting.started", "event_ts": T * 1000 + 123,
                "payload": {"account_id": "AAAAAABBBB", "object": {
                    "id": "1234567890", "uuid": "4444AAAiAAAAAiAiAiiAii==", "topic": "hookclaim"}}})
sig = "v0=" + hmac.new(secret("zoom").encode(), b"v0:%d:" % T + body, hashlib.sha256).hexdigest()
rivet = node("""
const {AwsLambdaReceiver} = require('@zoom/rivet/users');
const r = new AwsLambdaReceiver({webhooksSecretToken: %s});
r.init({eventEmitter: {emit: async () => {}}});
r.start()({body: %s, headers: {'x-zm-signature': %s, 'x-zm-request-timestamp': %s},
           isBase64Encoded: false}, {}).then(x => console.log(x.statusCode));
""" % (js(secret("zoom")), js(body.decode()), js(sig), js(str(T))))
assert rivet.splitlines()[-1] == "200", rivet
hdrs = {"x-zm-signature": sig, "x-zm-request-timestamp": str(T), "Content-Type": "application/json"}
add("zoom", "HMAC per Zoom's documented v0:{timestamp}:{body}; accepted by %s AwsLambdaReceiver"
    % npm_version("@zoom/rivet"), body, hdrs,
    ok(hashlib.sha256(body).hexdigest(), "body_sha256", "meeting.started"),
    signed_at=T * 1000, tolerance={"secs": 300, "future": True},
    malformed={"value": sig[3:], "error": "malformed"})

# ---- Paddle: paddle_billing PaddleSignature -------------------------------------------------
from paddle_billing.Notifications.PaddleSignature import PaddleSignature  # noqa: E402
from paddle_billing.Notifications.Secret import Secret as PaddleSecret  # noqa: E402

body = compact({"event_id": "evt_01hookclaimpaddle000000001", "event_type": "transaction.completed",
                "occurred_at": "2026-01-01T00:00:00.000000Z", "notification_id": "ntf_01hookclaim",
                "data": {"id": "txn_01hookclaim", "status": "completed"}})
new_sig = PaddleSignature.calculate_hmac(secret("paddle"), b"%d:" % T + body).hexdigest()
old_sig = PaddleSignature.calculate_hmac(secret("paddle", "-old"), b"%d:" % T + body).hexdigest()
header = "ts=%d;h1=%s;h1=%s" % (T, old_sig, new_sig)
assert PaddleSignature().verify(header, body.decode(), [PaddleSecret(secret("paddle"))])
hdrs = {"Paddle-Signature": header, "Content-Type": "application/json"}
add("paddle", "signed by %s PaddleSignature.calculate_hmac (two h1 entries: a rotation), "
    "accepted by PaddleSignature.verify" % version("paddle-python-sdk"), body, hdrs,
    ok("evt_01hookclaimpaddle000000001", "body", "transaction.completed"),
    # The SDK refuses a timestamp more than 5 s from now on either side.
    signed_at=T * 1000, tolerance={"secs": 5, "future": True},
    malformed={"value": "ts=%d;h1=%s;ts=%d" % (T, new_sig, T), "error": "malformed"})

# ---- Linear: accepted by @linear/sdk LinearWebhookClient.verify -------------------------------
ts_ms = T * 1000 + 250
body = compact({"action": "create", "type": "Issue", "createdAt": "2026-01-01T00:00:00.000Z",
                "data": {"id": "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9", "title": "Fix rounding"},
                "url": "https://linear.app/hookclaim/issue/HC-1", "organizationId": "org-1",
                "webhookTimestamp": ts_ms, "webhookId": "000042e3-d123-4980-b49f-8e140eef9329"})
sig = hmac.new(secret("linear").encode(), body, hashlib.sha256).hexdigest()
out = node("""
import(%s).then(({LinearWebhookClient}) =>
  console.log(new LinearWebhookClient(%s).verify(Buffer.from(%s), %s)));
""" % (js(NODE_MODULES + "/@linear/sdk/dist/webhooks/index.mjs"), js(secret("linear")),
       js(body.decode()), js(sig)))
assert out == "true", out
hdrs = {"Linear-Signature": sig, "Linear-Delivery": "234d1a4e-b617-4388-90fe-adc3633d6b72",
        "Linear-Event": "Issue", "Content-Type": "application/json; charset=utf-8"}
add("linear", "HMAC per Linear's docs; accepted by %s LinearWebhookClient.verify" % npm_version(
    "@linear/sdk"), body, hdrs, ok("234d1a4e-b617-4388-90fe-adc3633d6b72", "header", "Issue"),
    signed_at=ts_ms, tolerance={"secs": 60, "future": True},
    malformed={"value": sig + "00", "error": "malformed"})

# ---- Twitch: Twitch's documented algorithm, accepted by @twurple/eventsub-http ---------------
msg_id = "befa7b53-d79d-478f-86b9-120f112b044e"
stamp = datetime.fromtimestamp(T, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + ".634234626Z"
body = compact({"subscription": {"id": "f1c2a387-161a-49f9-a165-0f21d7a4e1c4", "status": "enabled",
                                 "type": "channel.follow", "version": "2",
                                 "condition": {"broadcaster_user_id": "1337"}},
                "event": {"user_id": "1234", "user_login": "cool_user",
                          "broadcaster_user_id": "1337"}})
sig = "sha256=" + hmac.new(secret("twitch").encode(), msg_id.encode() + stamp.encode() + body,
                           hashlib.sha256).hexdigest()
out = node("""
const {EventSubHttpBase} = require(%s);
console.log(EventSubHttpBase.prototype._verifyData.call({_secret: %s}, %s, %s, %s, %s));
""" % (js(NODE_MODULES + "/@twurple/eventsub-http/lib/EventSubHttpBase.js"), js(secret("twitch")),
       js(msg_id), js(stamp), js(body.decode()), js(sig)))
assert out == "true", out
hdrs = {"Twitch-Eventsub-Message-Id": msg_id, "Twitch-Eventsub-Message-Retry": "0",
        "Twitch-Eventsub-Message-Type": "notification", "Twitch-Eventsub-Message-Signature": sig,
        "Twitch-Eventsub-Message-Timestamp": stamp,
        "Twitch-Eventsub-Subscription-Type": "channel.follow",
        "Twitch-Eventsub-Subscription-Version": "2", "Content-Type": "application/json"}
add("twitch", "HMAC per Twitch's documented {id}{timestamp}{body} (Twitch publishes no SDK); "
    "accepted by %s (the library Twitch's docs list)" % npm_version("@twurple/eventsub-http"),
    body, hdrs, ok(msg_id, "header", "channel.follow"),
    signed_at=T * 1000 + 634, tolerance={"secs": 600, "future": False},
    malformed={"value": sig[len("sha256="):], "error": "malformed"})

# ---- Discord: PyNaCl signs, discord-interactions verifyKey accepts ---------------------------
import nacl.signing  # noqa: E402

key = nacl.signing.SigningKey(hashlib.sha256(b"hookclaim-discord-vector-seed").digest())
other = nacl.signing.SigningKey(hashlib.sha256(b"hookclaim-discord-other-seed").digest())
public = key.verify_key.encode().hex()
body = compact({"type": 2, "id": "1336789012345678901", "application_id": "1234567890123456789",
                "token": "aW50ZXJhY3Rpb24", "version": 1,
                "data": {"id": "1000", "name": "hello", "type": 1}})
sig = key.sign(str(T).encode() + body).signature.hex()
out = node("require('discord-interactions').verifyKey(%s,%s,%s,%s).then(console.log)" % (
    js(body.decode()), js(sig), js(str(T)), js(public)))
assert out == "true", out
hdrs = {"X-Signature-Ed25519": sig, "X-Signature-Timestamp": str(T),
        "Content-Type": "application/json"}
add("discord", "signed by %s (libsodium, as Discord's examples), accepted by %s verifyKey" % (
    version("PyNaCl"), npm_version("discord-interactions")), body, hdrs,
    ok("1336789012345678901", "body", "2"), secrets=[public],
    other_secret=other.verify_key.encode().hex(),
    signed_at=T * 1000, tolerance={"secs": 300, "future": True},
    malformed={"value": sig[:-2], "error": "malformed"})

# ---- GitLab: the documented headers (a token, no signature) ----------------------------------
body = compact({"object_kind": "push", "event_name": "push", "ref": "refs/heads/main",
                "checkout_sha": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"})
hdrs = {"X-Gitlab-Token": secret("gitlab"), "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e",
        "X-Gitlab-Webhook-UUID": "2b8e2c3a-3f6b-4d4e-9c1a-6a7e0c0d1e2f",
        "Idempotency-Key": "f5e5f7f0-0b5e-4b4a-8d5f-4b7e3f9c2a10",
        "X-Gitlab-Instance": "https://gitlab.example.com", "Content-Type": "application/json"}
add("gitlab", "GitLab's documented webhook headers (the token is compared, nothing is signed)",
    body, hdrs, ok("f5e5f7f0-0b5e-4b4a-8d5f-4b7e3f9c2a10", "header", "Push Hook"),
    tamper_detected=False, malformed={"value": secret("gitlab")[:-1], "error": "invalid"})

# ---- Bitbucket: documented algorithm (no SDK) -------------------------------------------------
body = compact({"push": {"changes": []}, "repository": {"full_name": "hookclaim/demo"},
                "actor": {"display_name": "Octo"}})
sig = "sha256=" + hmac.new(secret("bitbucket").encode(), body, hashlib.sha256).hexdigest()
hdrs = {"X-Hub-Signature": sig, "X-Event-Key": "repo:push",
        "X-Request-UUID": "d4c7a7d3-8b5f-4c51-9ab2-0f7f3c1b4e55", "X-Attempt-Number": "2",
        "X-Hook-UUID": "{6a1f3b6e-1c7a-4d4e-9f8b-2c3d4e5f6a7b}", "Content-Type": "application/json"}
add("bitbucket", "HMAC-SHA256 per Bitbucket Cloud's documented X-Hub-Signature (Atlassian "
    "publishes no verifier); computed with Python's hmac", body, hdrs,
    ok("d4c7a7d3-8b5f-4c51-9ab2-0f7f3c1b4e55", "header", "repo:push"),
    malformed={"value": "sha1=" + sig[7:], "error": "malformed"})

# ---- Meta: documented algorithm (no SDK verifier) --------------------------------------------
body = compact({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398",
                "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
                             "messages": [{"id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERTI",
                                           "type": "text", "text": {"body": "hello"}}]}}]}]})
sig = "sha256=" + hmac.new(secret("meta").encode(), body, hashlib.sha256).hexdigest()
hdrs = {"X-Hub-Signature-256": sig, "Content-Type": "application/json"}
add("meta", "HMAC-SHA256 of the body under the app secret, per Meta's documented "
    "X-Hub-Signature-256 (Meta publishes no verifier); computed with Python's hmac", body, hdrs,
    ok(hashlib.sha256(body).hexdigest(), "body_sha256", "whatsapp_business_account"),
    malformed={"value": sig.upper(), "error": "malformed"})

# ---- Twilio: twilio RequestValidator ----------------------------------------------------------
from twilio.request_validator import RequestValidator  # noqa: E402

url = "https://hooks.example.com/webhooks/twilio"
validator = RequestValidator(secret("twilio"))
params = {"AccountSid": "ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", "Body": "Hello from Zoë",
          "From": "+15017250604", "MessageSid": "SM1234567890abcdef1234567890abcdef",
          "To": "+15558675310"}
sig = validator.compute_signature(url, params)
assert validator.validate(url, params, sig)
from urllib.parse import urlencode  # noqa: E402

body = urlencode(params).encode()
hdrs = {"X-Twilio-Signature": sig, "I-Twilio-Idempotency-Token": "0d8f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
        "Content-Type": "application/x-www-form-urlencoded"}
add("twilio", "signed by %s RequestValidator.compute_signature (form parameters), accepted by "
    "validate" % version("twilio"), body, hdrs,
    ok("0d8f1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", "header", None), public_url=url,
    malformed={"value": sig[:-2], "error": "malformed"})
body = compact({"EventType": "com.twilio.messaging.message.delivered", "Sid": "SM0001"})
body_hash = hashlib.sha256(body).hexdigest()
query = "bodySHA256=" + body_hash
sig = validator.compute_signature(url + "?" + query, {})
assert validator.validate(url + "?" + query, body.decode(), sig)
hdrs = {"X-Twilio-Signature": sig, "I-Twilio-Idempotency-Token": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
        "Content-Type": "application/json"}
add("twilio", "signed by %s RequestValidator.compute_signature (JSON body: bodySHA256 in the URL), "
    "accepted by validate" % version("twilio"), body, hdrs,
    ok("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "header", None), public_url=url, query=query,
    malformed={"value": "", "error": "malformed"})
params = {"CallSid": "CA0001", "CallStatus": "completed"}
sig = validator.compute_signature(url, params, algorithm="HMAC_SHA256")
assert validator.validate(url, params, sig, algorithm="HMAC_SHA256")
body = urlencode(params).encode()
hdrs = {"X-Twilio-Signature": sig, "X-Twilio-Webhooks-Signature-Settings":
        "key=webhooks_sharedkey_hookclaim,algorithm=HMAC_SHA256",
        "I-Twilio-Idempotency-Token": "1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e",
        "Content-Type": "application/x-www-form-urlencoded"}
add("twilio", "signed by %s RequestValidator.compute_signature with HMAC_SHA256 (a shared key), "
    "accepted by validate" % version("twilio"), body, hdrs,
    ok("1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e", "header", None), public_url=url,
    malformed={"value": sig[:-4], "error": "malformed"})

# ---- Square: accepted by squareup's verify_signature ------------------------------------------
from square.utils.webhooks_helper import verify_signature as square_verify  # noqa: E402

url = "https://hooks.example.com/webhooks/square"
body = compact({"merchant_id": "6SSW7HV8K2ST5", "type": "payment.updated",
                "event_id": "13b867cf-db3d-4b1c-90b6-2f32a9d78124",
                "created_at": "2026-01-01T00:00:00.000Z",
                "data": {"type": "payment", "id": "KkAkhdMsgzn59SM8A89WgKwekxLZY"}})
sig = base64.b64encode(hmac.new(secret("square").encode(), url.encode() + body,
                                hashlib.sha256).digest()).decode()
assert square_verify(request_body=body.decode(), signature_header=sig,
                     signature_key=secret("square"), notification_url=url)
hdrs = {"X-Square-HmacSha256-Signature": sig, "Content-Type": "application/json"}
add("square", "HMAC per Square's docs; accepted by %s webhooks_helper.verify_signature" % version(
    "squareup"), body, hdrs, ok("13b867cf-db3d-4b1c-90b6-2f32a9d78124", "body", "payment.updated"),
    public_url=url, malformed={"value": sig[:-2], "error": "malformed"})

# ---- HubSpot v3: hubspot-api-client Signature ------------------------------------------------
from hubspot.utils.signature import Signature  # noqa: E402

url = "https://hooks.example.com/webhooks/hubspot"
body = compact([{"eventId": 1937291839, "subscriptionId": 2507, "portalId": 62515,
                 "appId": 1160452, "occurredAt": T * 1000 - 2000,
                 "subscriptionType": "contact.propertyChange", "attemptNumber": 0,
                 "objectId": 123, "propertyName": "firstname", "propertyValue": "Zoë",
                 "changeSource": "CRM"}])
ts_ms = T * 1000 + 500
sig = Signature.get_signature(secret("hubspot"), body.decode(), "v3", http_uri=url,
                              http_method="POST", timestamp=str(ts_ms))
assert Signature.is_valid(sig, secret("hubspot"), body.decode(), http_uri=url,
                          signature_version="v3", timestamp=str(ts_ms))
hdrs = {"X-HubSpot-Signature-v3": sig, "X-HubSpot-Request-Timestamp": str(ts_ms),
        "Content-Type": "application/json"}
add("hubspot", "signed by %s Signature.get_signature (v3), accepted by is_valid" % version(
    "hubspot-api-client"), body, hdrs,
    ok("62515:2507:1937291839:%d" % (T * 1000 - 2000), "body", "contact.propertyChange"),
    public_url=url, signed_at=ts_ms, tolerance={"secs": 300, "future": False},
    malformed={"value": sig[:-2], "error": "malformed"})

# ---- Intercom: documented algorithm (no SDK verifier) ----------------------------------------
body = compact({"type": "notification_event", "app_id": "abc123", "id": "notif_hookclaim_0001",
                "topic": "conversation.user.created", "delivery_attempts": 2,
                "first_sent_at": T - 120, "data": {"item": {"type": "conversation", "id": "1"}}})
sig = "sha1=" + hmac.new(secret("intercom").encode(), body, hashlib.sha1).hexdigest()
hdrs = {"X-Hub-Signature": sig, "Content-Type": "application/json"}
add("intercom", "HMAC-SHA1 of the body under the client secret, per Intercom's documented "
    "X-Hub-Signature (Intercom publishes no verifier); computed with Python's hmac", body, hdrs,
    ok("notif_hookclaim_0001", "body", "conversation.user.created"),
    malformed={"value": "sha256=" + sig[5:], "error": "malformed"})

# ---- Clerk, Resend, Svix: svix; Polar: standardwebhooks + polar-sdk ----------------------------
from svix.webhooks import Webhook as SvixWebhook  # noqa: E402

at = datetime.fromtimestamp(T, tz=timezone.utc)
for preset, spelling, body, msg_id, event_type in [
    ("clerk", "svix", compact({"type": "user.created", "object": "event",
                               "data": {"id": "user_29w83sxmDNGwOuEthce5gg56FcC"}}),
     "msg_2hookclaimClerkVector001", "user.created"),
    ("resend", "svix", compact({"type": "email.delivered", "created_at": "2026-01-01T00:00:00Z",
                                "data": {"email_id": "56761188-7520-42d8-8898-ff6fc54ce618"}}),
     "msg_2hookclaimResendVector01", "email.delivered"),
    ("svix", "webhook", compact({"type": "invoice.paid", "data": {"id": "inv_1"}}),
     "msg_2hookclaimSvixVector0001", "invoice.paid"),
]:
    whsec = "whsec_" + base64.b64encode(secret(preset).encode()).decode()
    wh = SvixWebhook(whsec)
    sig = wh.sign(msg_id, at, body.decode())
    other_sig = SvixWebhook("whsec_" + base64.b64encode(b"hookclaim-previous-key").decode()).sign(
        msg_id, at, body.decode())
    hdrs = {"%s-id" % spelling: msg_id, "%s-timestamp" % spelling: str(T),
            "%s-signature" % spelling: other_sig + " " + sig, "Content-Type": "application/json"}
    check = {k.replace("svix-", "webhook-"): v for k, v in hdrs.items()}
    wh.verify(body, check)
    # The unpadded, unprefixed spelling of the same secret, as the specification allows.
    secrets = [base64.b64encode(secret(preset).encode()).decode().rstrip("=")]
    add(preset, "signed by %s Webhook.sign (two v1 entries: a rotation), accepted by "
        "Webhook.verify" % version("svix"), body, hdrs, ok(msg_id, "header", event_type),
        secrets=secrets if preset == "svix" else [whsec],
        other_secret="whsec_" + base64.b64encode(b"hookclaim-other-key").decode(),
        signed_at=T * 1000, tolerance={"secs": 300, "future": True},
        malformed={"value": sig.replace("v1,", "v1,!"), "error": "invalid"})

import standardwebhooks  # noqa: E402
from polar import webhooks as polar_webhooks  # noqa: E402

polar_secret = "polar_whs_hookclaimVectorSecret0001"
body = compact({"type": "order.paid", "timestamp": "2026-01-01T00:00:00Z",
                "data": {"id": "1b7d3f0e-5c2a-4e8b-9f61-0a2c4e6b8d01", "status": "paid"}})
msg_id = "msg_2hookclaimPolarVector001"
wh = standardwebhooks.Webhook(base64.b64encode(polar_secret.encode()).decode())
sig = wh.sign(msg_id, at, body.decode())
hdrs = {"webhook-id": msg_id, "webhook-timestamp": str(T), "webhook-signature": sig,
        "Content-Type": "application/json"}
polar_webhooks._verify_signature(body.decode(), hdrs, polar_secret)
add("polar", "signed by %s Webhook.sign with the raw secret's bytes (as Polar's SDK does), "
    "accepted by %s polar.webhooks._verify_signature" % (version("standardwebhooks"),
                                                          version("polar-sdk")),
    body, hdrs, ok(msg_id, "header", "order.paid"), secrets=[polar_secret],
    other_secret="polar_whs_hookclaimOtherSecret",
    signed_at=T * 1000, tolerance={"secs": 300, "future": True},
    malformed={"value": "v1," + sig[3:-2], "error": "invalid"})

# ---- Standard Webhooks v1a: Ed25519 under a whpk_ key, signed with PyNaCl per the spec --------
sk = nacl.signing.SigningKey(hashlib.sha256(b"hookclaim-standard-v1a-seed").digest())
whpk = "whpk_" + base64.b64encode(sk.verify_key.encode()).decode()
other_pk = "whpk_" + base64.b64encode(other.verify_key.encode()).decode()
body = compact({"type": "invoice.paid", "data": {"id": "inv_v1a"}})
msg_id = "msg_2hookclaimV1aVector0001"
sig = base64.b64encode(sk.sign(b"%s.%d.%s" % (msg_id.encode(), T, body)).signature).decode()
hdrs = {"webhook-id": msg_id, "webhook-timestamp": str(T), "webhook-signature": "v1a," + sig,
        "Content-Type": "application/json"}
nacl.signing.VerifyKey(sk.verify_key.encode()).verify(b"%s.%d.%s" % (msg_id.encode(), T, body),
                                                      base64.b64decode(sig))
add("svix", "v1a: Ed25519 per the Standard Webhooks specification (asymmetric signatures; the "
    "reference libraries do not implement v1a), signed and checked with %s" % version("PyNaCl"),
    body, hdrs, ok(msg_id, "header", "invoice.paid"), secrets=[whpk], other_secret=other_pk,
    signed_at=T * 1000, tolerance={"secs": 300, "future": True},
    malformed={"value": "v1a," + sig[:-4], "error": "invalid"})

with open(OUT, "w") as f:
    json.dump({"generated_by": "scripts/provider-vectors.py", "vectors": vectors}, f, indent=2,
              ensure_ascii=False)
    f.write("\n")
print("wrote %d vectors to %s" % (len(vectors), os.path.relpath(OUT, ROOT)))
