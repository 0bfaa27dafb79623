#!/usr/bin/env python3
"""Secret hygiene: fails if any secret the tests configure appears in the given log files.

Each secret is searched for raw, base64-encoded and hex-encoded (lower and upper case); for
Standard Webhooks `whsec_` secrets the decoded key bytes are searched in the same three forms.
A hit prints the file, the line number and which secret and form matched, never the value.

    python3 scripts/check-secrets.py target/test-output.log [more logs...]
"""
import base64
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Secrets the tests use besides env.local.json's (tests/aws.rs rotations and database logins).
TEST_SECRETS = [
    "the-real-secret",
    "old-secret",
    "new-secret",
    "first-password",
    "second-password",
    "changed-elsewhere",
    "hookclaim-github-next-secret",
]


def configured_secrets():
    env = json.loads((ROOT / "env.local.json").read_text())
    doc = json.loads(env["WebhookFunction"]["HOOKCLAIM_SECRETS"])
    for value in doc.values():
        yield from ([value] if isinstance(value, str) else value)
    yield from TEST_SECRETS


def needles():
    for secret in configured_secrets():
        keys = [(secret, secret.encode())]
        if secret.startswith("whsec_"):
            keys.append((secret + " (decoded key)", base64.b64decode(secret[len("whsec_"):])))
        for name, key in keys:
            yield name, "raw", key
            yield name, "base64", base64.b64encode(key)
            yield name, "base64 (unpadded)", base64.b64encode(key).rstrip(b"=")
            yield name, "hex", key.hex().encode()
            yield name, "HEX", key.hex().upper().encode()


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
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
                    print(f"{path}:{lineno}: secret {name.split()[0][:6]}… appears ({form})")
    print(f"secret hygiene: {len(checks)} secret forms searched in {scanned} bytes of logs, {hits} hits")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
