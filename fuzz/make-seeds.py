#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus, fuzz/corpus/<target>/, from events/*.json.

Python 3 standard library only. Deterministic, so the committed corpus only changes when the
sample events (or this file) do:

    python3 fuzz/make-seeds.py            # (re)write fuzz/corpus/
    python3 fuzz/make-seeds.py --check    # exit 1 if the committed corpus differs

  request_to_delivery/  every webhook event in events/, as it is
  retention_command/    every retention-*.json in events/, as it is, plus a few refusals
  verify_providers/     each provider vector (crates/hookclaim-verify/src/vectors.json) as it
                        is, signed again with another body, at both sides of its clock, and
                        each handshake
  verify_signature/     the signed samples' scheme, secrets, signature headers and exact body in
                        the target's text format (fuzz/verify/src/verify_signature.rs), plus
                        seeds for what the samples do not show (generic HMAC in base64, ids
                        from a JSON pointer or the body hash, the svix- spelling, refusals);
                        `@sign` lines have the harness compute a genuine signature

verify_signature seeds are named after the answer `verify` gives (ok-, unauthorized-,
bad-request-, no-secret-); `cargo test` in fuzz/verify/ checks that they still do.
"""

import base64
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVENTS = os.path.join(ROOT, "events")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")

# Headers a scheme reads (or the generic acme sample's), kept in verify seeds; the rest of an
# event's headers (host, tracing, forwarding) never reach `verify`.
SIGNATURE_HEADERS = {
    "stripe-signature",
    "x-hub-signature-256",
    "x-github-delivery",
    "x-github-event",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "x-acme-signature",
    "x-acme-delivery",
    "content-type",
}


def load_sources():
    with open(os.path.join(ROOT, "env.local.json")) as f:
        env = json.load(f)
    return json.loads(env["Parameters"]["HOOKCLAIM_SOURCES"])


def scheme_line(spec):
    kind = spec["kind"]
    if kind in ("stripe", "standard"):
        return "%s %d" % (kind, spec.get("tolerance_secs", 300))
    if kind == "polar":
        return "standard %d raw" % spec.get("tolerance_secs", 300)
    if kind == "github":
        return "github"
    if "id_header" in spec:
        id_spec = "header=" + spec["id_header"]
    elif "id_pointer" in spec:
        id_spec = "pointer=" + spec["id_pointer"]
    else:
        id_spec = "sha256"
    return " ".join(
        [
            "hmac",
            spec["signature_header"],
            spec.get("prefix") or "-",
            spec.get("encoding", "hex"),
            id_spec,
            spec.get("event_type_pointer") or "-",
        ]
    )


def verify_seed(scheme, headers=(), body=b"", secrets=None, now=None, signs=()):
    lines = [scheme]
    if now is not None:
        lines.append("@now %s" % now)
    if secrets is not None:
        lines.append("@secrets " + secrets)
    lines += ["%s: %s" % (k, v) for k, v in headers]
    lines += ["@sign " + s for s in signs]
    return ("\n".join(lines) + "\n\n").encode() + body


def with_now(seed, now):
    """The seed with an `@now` line after its scheme line."""
    scheme, rest = seed.split(b"\n", 1)
    return scheme + b"\n@now " + now.encode() + b"\n" + rest


def webhook_events():
    """(file stem, event) for every webhook event, in name order."""
    for name in sorted(os.listdir(EVENTS)):
        if name.endswith(".json") and not name.startswith("retention-"):
            with open(os.path.join(EVENTS, name)) as f:
                yield name[: -len(".json")], json.load(f)


def event_source(event):
    params = event.get("pathParameters") or {}
    if params.get("source"):
        return params["source"]
    path = event.get("rawPath") or event.get("path") or ""
    return path.split("/webhooks/", 1)[-1].split("/")[0]


def event_body(event):
    body = (event.get("body") or "").encode()
    return base64.b64decode(body) if event.get("isBase64Encoded") else body


def sample_verify_seeds(sources):
    seeds = {}
    for stem, event in webhook_events():
        source = event_source(event)
        if source not in sources or stem == "wrong-method":
            continue
        # This target covers the four fixed kinds (and Polar's raw Standard Webhooks secret);
        # the presets' kinds have their own target, verify_providers.
        if sources[source]["kind"] not in ("stripe", "github", "standard", "hmac", "polar"):
            continue
        headers = [
            (k.lower(), v)
            for k, v in sorted((event.get("headers") or {}).items())
            if k.lower() in SIGNATURE_HEADERS
        ]
        answer = "unauthorized" if stem.endswith("-tampered") else "ok"
        seeds["%s-%s.txt" % (answer, stem)] = verify_seed(
            scheme_line(sources[source]), headers, event_body(event), secrets=source
        )
    return seeds


def synthetic_verify_seeds(samples):
    order = json.dumps({"id": "ord_7", "data": {"id": 42}, "type": "order.paid"}).encode()
    seeds = {
        # Generic HMAC variants the samples do not have.
        "ok-hmac-base64-pointer-integer-id.txt": verify_seed(
            "hmac X-Signature - base64 pointer=/data/id /type",
            body=order, secrets="raw:generic-key", signs=["raw:generic-key"],
        ),
        "ok-hmac-hex-pointer-string-id.txt": verify_seed(
            "hmac x-hook-sig sha256= hex pointer=/id /missing",
            body=order, secrets="raw:generic-key", signs=["raw:generic-key upper"],
        ),
        "ok-hmac-body-sha256-id.txt": verify_seed(
            "hmac X-Checksum v1= hex sha256 -",
            body=b"plain text, not JSON", secrets="raw:generic-key", signs=["raw:generic-key"],
        ),
        "bad-request-hmac-pointer-id-body-not-json.txt": verify_seed(
            "hmac X-Signature - base64 pointer=/id -",
            body=b"id=1", secrets="raw:generic-key", signs=["raw:generic-key"],
        ),
        "bad-request-hmac-header-id-too-long.txt": verify_seed(
            "hmac X-Acme-Signature sha256= hex header=X-Acme-Delivery /event",
            headers=[("x-acme-delivery", "d" * 600)], body=b'{"event":"ping"}',
            secrets="acme", signs=["acme"],
        ),
        "unauthorized-hmac-prefix-missing.txt": verify_seed(
            "hmac X-Acme-Signature sha256= hex header=X-Acme-Delivery /event",
            headers=[("x-acme-signature", "0" * 64), ("x-acme-delivery", "d1")],
            body=b"{}", secrets="acme",
        ),
        # Stripe: rotation, v0 first, time, missing id, two timestamps.
        "ok-stripe-rotated-second-key-first-entry.txt": verify_seed(
            "stripe 300",
            headers=[("stripe-signature", "t=1767225600,v0=00")],
            body=b'{"id":"evt_r","type":"x"}',
            secrets="raw:whsec_new,stripe", signs=["stripe first"],
        ),
        "unauthorized-stripe-too-old.txt": with_now(samples["ok-stripe.txt"], "+400"),
        "bad-request-stripe-no-id.txt": verify_seed(
            "stripe 300", body=b'{"type":"invoice.paid"}', secrets="stripe", signs=["stripe"],
        ),
        "unauthorized-stripe-two-timestamps.txt": verify_seed(
            "stripe 300",
            headers=[("stripe-signature", "t=1767225600,t=1767225601")],
            body=b'{"id":"evt_t"}', secrets="stripe", signs=["stripe"],
        ),
        # Standard: the svix- spelling, a v1a entry, a timestamp from the future.
        "ok-standard-svix-spelling-v1a.txt": verify_seed(
            "standard 300",
            headers=[
                ("svix-id", "msg_svix_1"),
                ("svix-timestamp", "1767225650"),
                ("svix-signature", "v1a,AAAA v2,BBBB"),
            ],
            body=b'{"type":"user.created"}', secrets="svix", signs=["svix"],
        ),
        "ok-standard-not-json.txt": verify_seed(
            "standard 0 raw",
            headers=[("webhook-id", "msg_plain"), ("webhook-timestamp", "1767225690")],
            body=b"\x00\xffnot json", secrets="polar", signs=["polar first"],
        ),
        "unauthorized-standard-from-the-future.txt": with_now(samples["ok-svix.txt"], "-400"),
        "bad-request-standard-empty-id.txt": verify_seed(
            "standard 300",
            headers=[("webhook-id", ""), ("webhook-timestamp", "1767225690")],
            body=b"{}", secrets="svix", signs=["svix"],
        ),
        # GitHub: rotation with the sign in upper case, a missing delivery id, bad hex.
        "ok-github-upper-hex.txt": verify_seed(
            "github",
            headers=[("x-github-delivery", "d-1"), ("x-github-event", "ping")],
            body=b'{"zen":"x"}', secrets="github", signs=["raw:hookclaim-github-test-secret upper"],
        ),
        "bad-request-github-no-delivery.txt": verify_seed(
            "github", body=b"{}", secrets="github", signs=["github"],
        ),
        "unauthorized-github-bad-hex.txt": verify_seed(
            "github", headers=[("x-hub-signature-256", "sha256=zz")], body=b"{}",
            secrets="github",
        ),
        # No usable secret.
        "no-secret-empty-only.txt": verify_seed(
            "github", body=b"{}", secrets="empty", signs=["raw:x"],
        ),
    }
    return seeds


def request_seeds():
    seeds = {}
    for stem, _ in webhook_events():
        with open(os.path.join(EVENTS, stem + ".json"), "rb") as f:
            seeds[stem + ".json"] = f.read()
    return seeds


def retention_seeds():
    seeds = {}
    for name in sorted(os.listdir(EVENTS)):
        if name.startswith("retention-") and name.endswith(".json"):
            with open(os.path.join(EVENTS, name), "rb") as f:
                seeds[name] = f.read()
    seeds.update(
        {
            "null.json": b"null",
            "bare-string.json": b'"stats"',
            "purge-zero-days.json": b'{"command":"purge","older_than_days":0}',
            "replay-empty-source.json": b'{"command":"replay","source":"","delivery_id":"d"}',
            "run-extra-field.json": b'{"command":"run","force":true}',
        }
    )
    return seeds


def provider_seeds():
    """verify_providers: each provider vector as it is, signed again with another body, at each
    side of its clock, and with its signature header removed; plus each handshake's body under
    the preset that answers it."""
    with open(os.path.join(ROOT, "crates", "hookclaim-verify", "src", "vectors.json")) as f:
        vectors = json.load(f)["vectors"]
    seeds = {}
    index = {}
    for i, v in enumerate(vectors):
        name = "%02d-%s" % (i, v["preset"])
        index.setdefault(v["preset"], i)
        pick = bytes([i])
        seeds[name + ".bin"] = pick
        seeds[name + "-resigned.bin"] = pick + b"@sign\n\n" + v["body"].encode()[::-1]
        seeds[name + "-late.bin"] = pick + b"@now +3600"
        seeds[name + "-early.bin"] = pick + b"@now -3600"
    for preset, body, extra in [
        ("slack", b'{"type":"url_verification","challenge":"c"}', b""),
        ("slack", b"ssl_check=1&token=t", b"Content-Type: application/x-www-form-urlencoded\n"),
        ("zoom", b'{"event":"endpoint.url_validation","payload":{"plainToken":"p"}}', b""),
        ("twitch", b'{"challenge":"c"}', b"Twitch-Eventsub-Message-Type: webhook_callback_verification\n"),
        ("twitch", b'{"subscription":{"type":"t","status":"s"}}', b"Twitch-Eventsub-Message-Type: revocation\n"),
        ("discord", b'{"type":1}', b""),
        ("meta", b"", b"@method GET\n@query hub.mode=subscribe&hub.challenge=1&hub.verify_token=hookclaim-meta-verify-token\n"),
    ]:
        seeds["handshake-%s-%d.bin" % (preset, len(seeds))] = (
            bytes([index[preset]]) + extra + b"@sign\n\n" + body)
    return seeds


def all_seeds():
    sources = load_sources()
    samples = sample_verify_seeds(sources)
    verify = dict(samples)
    verify.update(synthetic_verify_seeds(samples))
    return {
        "verify_signature": verify,
        "verify_providers": provider_seeds(),
        "request_to_delivery": request_seeds(),
        "retention_command": retention_seeds(),
    }


def main():
    check = "--check" in sys.argv[1:]
    differs = []
    for target, seeds in all_seeds().items():
        folder = os.path.join(CORPUS, target)
        existing = set(os.listdir(folder)) if os.path.isdir(folder) else set()
        # regression-* seeds are inputs a run once found, committed by hand: kept as they are.
        for name in sorted(n for n in existing - set(seeds) if not n.startswith("regression-")):
            differs.append(os.path.join(target, name))
            if not check:
                os.remove(os.path.join(folder, name))
        os.makedirs(folder, exist_ok=True)
        for name, data in sorted(seeds.items()):
            path = os.path.join(folder, name)
            old = open(path, "rb").read() if os.path.exists(path) else None
            if old != data:
                differs.append(os.path.join(target, name))
                if not check:
                    with open(path, "wb") as f:
                        f.write(data)
    if check and differs:
        print("fuzz/corpus differs from make-seeds.py for: " + ", ".join(differs), file=sys.stderr)
        print("run: python3 fuzz/make-seeds.py", file=sys.stderr)
        sys.exit(1)
    if not check:
        total = sum(len(s) for s in all_seeds().values())
        print("wrote %d seeds under fuzz/corpus/ (%d changed)" % (total, len(differs)))


if __name__ == "__main__":
    main()
