#!/usr/bin/env python3
"""Secret hygiene: fails if any secret the tests configure appears in the given log files.

Each secret is searched for raw, base64-encoded and hex-encoded (lower and upper case); for
Standard Webhooks `whsec_` secrets the decoded key bytes are searched in the same three forms.
A hit prints the file, the line number and which secret and form matched, never the value.

    python3 scripts/check-secrets.py target/test-output.log [more logs...]
    python3 scripts/check-secrets.py --self-test    # a planted secret must be found
"""
import base64
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Secrets the tests use besides env.local.json's (tests/it/aws.rs rotations and database logins,
# the destinations' signing secret).
TEST_SECRETS = [
    "the-real-secret",
    "old-secret",
    "new-secret",
    "first-password",
    "second-password",
    "changed-elsewhere",
    "hookclaim-github-next-secret",
    # tests/it/destinations.rs: the HTTP destinations' signing secret.
    "whsec_aG9va2NsYWltLWRlc3RpbmF0aW9uLXRlc3Q=",
    # tests/it/harness.rs: the harness's sources' secrets.
    "whsec_harness_test",
    "harness-github-secret",
    # examples/orders/tests: the example's Stripe secret.
    "whsec_orders_example_test",
]


def configured_secrets():
    env = json.loads((ROOT / "env.local.json").read_text())
    doc = json.loads(env["WebhookFunction"]["HOOKCLAIM_SECRETS"])
    # Every value is a secret or a list of them, Meta's "meta.verify_token" included.
    for value in doc.values():
        yield from ([value] if isinstance(value, str) else value)
    # The provider vectors' secrets (crates/hookclaim-verify/src/vectors.json); Ed25519 public
    # keys are not secrets and are left out.
    vectors = json.loads(
        (ROOT / "crates" / "hookclaim-verify" / "src" / "vectors.json").read_text()
    )["vectors"]
    for vector in vectors:
        for secret in vector["secrets"] + [vector["other_secret"]]:
            if "-vector-secret" in secret or secret.startswith(("whsec_", "polar_")):
                yield secret
    yield from TEST_SECRETS


def needles():
    for secret in configured_secrets():
        keys = [(secret, secret.encode())]
        if secret.startswith("whsec_"):
            # A Standard Webhooks secret's key is the base64 after the prefix; Stripe's
            # whsec_ secrets are used as they are and need not decode.
            try:
                keys.append((secret + " (decoded key)", base64.b64decode(secret[len("whsec_"):], validate=True)))
            except ValueError:
                pass
        for name, key in keys:
            yield name, "raw", key
            yield name, "base64", base64.b64encode(key)
            yield name, "base64 (unpadded)", base64.b64encode(key).rstrip(b"=")
            yield name, "hex", key.hex().encode()
            yield name, "HEX", key.hex().upper().encode()


def scan(paths, quiet=False):
    """Number of (line, secret form) hits in the files."""
    checks = list(needles())
    hits = 0
    scanned = 0
    for path in paths:
        data = pathlib.Path(path).read_bytes()
        scanned += len(data)
        for lineno, line in enumerate(data.splitlines(), 1):
            for name, form, needle in checks:
                if needle in line:
                    hits += 1
                    if not quiet:
                        print(f"{path}:{lineno}: secret {name[:6]}… appears ({form})")
    if not quiet:
        print(f"secret hygiene: {len(checks)} secret forms searched in {scanned} bytes of logs, {hits} hits")
    return hits


def self_test():
    """The check must fail on a leak: plant each form of each secret in a log and expect a hit."""
    import tempfile
    for name, form, needle in needles():
        with tempfile.NamedTemporaryFile(suffix=".log") as f:
            f.write(b'{"level":"INFO","message":"x ' + needle + b' y"}\n')
            f.flush()
            if scan([f.name], quiet=True) == 0:
                print(f"self-test: a planted {form} form of {name[:6]}… was not found", file=sys.stderr)
                return 1
    print("secret hygiene self-test: every planted form was found")
    return 0


def main(paths):
    if paths == ["--self-test"]:
        return self_test()
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    return 1 if scan(paths) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
