#!/usr/bin/env python3
"""Deployment checks: template.yaml rendered for every parameter combination that matters.

For each combination the template's parameter defaults are set to its values and the result is
written to target/template-check/<name>.json. CloudFormation's Rules are evaluated for it, as
CloudFormation does before it creates anything: a combination that would make every cold start
fail must be refused, with the rule's message, and every other one accepted. Accepted ones must
be clean under `cfn-lint` (which is what `sam validate --lint` runs; that runs once, on
template.yaml) and translate under `sam validate`. Then:

- the settings the RDS Proxy option changes are exactly DATABASE_HOST (the proxy's endpoint),
  DATABASE_PORT (5432) and DATABASE_POOLED=true, for both functions; tests/it/pooler.rs runs with
  that DATABASE_POOLED value and the pooler's host and port;
- each destinations combination grants both functions exactly the destinations' actions
  (sqs:SendMessage, events:PutEvents, states:StartExecution) on the ARNs given, and the other
  combinations grant none of them;
- the Tracing parameter turns active X-Ray tracing on for both functions in its combination and
  leaves it off (SAM's `Disabled`) in every other;
- scripts/rds-ca-layer.sh passes `bash -n` and shellcheck (when installed) and builds a layer zip
  from a local bundle (it is never published here).

`sam validate` runs with dummy credentials, a dummy region and every AWS endpoint pointed at a
closed loopback port, so it cannot reach AWS.

    python3 scripts/check-template.py          # exit 1 on any failure
"""
import copy
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor

from cfn import ROOT, function_settings, refusals
import cfn
OUT = ROOT / "target" / "template-check"

SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:hookclaim/%s-AbCdEf"
LAYER = "arn:aws:lambda:eu-west-1:123456789012:layer:hookclaim-rds-ca:1"
REQUIRED = {
    "SourcesJson": '{"stripe":{"kind":"stripe"},"github":{"kind":"github"}}',
    "WebhookSecretsArn": SECRET % "webhooks",
    "DatabaseSecretArn": SECRET % "db-app",
    "DatabaseOwnerSecretArn": SECRET % "db-owner",
    "SubnetIds": "subnet-0123456789abcdef0,subnet-0fedcba9876543210",
    "SecurityGroupIds": "sg-0123456789abcdef0",
}
HOST = "mydb.cluster-abcdefghijkl.eu-west-1.rds.amazonaws.com"
IAM = {"DbIamAuth": "true", "DbUser": "hookclaim_app"}
PROXY = {"CreateRdsProxy": "true", "ProxyTargetInstanceId": "mydb"}
QUEUE = "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"
AUDIT_QUEUE = "arn:aws:sqs:eu-west-1:123456789012:audit"
BUS = "arn:aws:events:eu-west-1:123456789012:event-bus/orders"
MACHINE = "arn:aws:states:eu-west-1:123456789012:stateMachine:fulfil"
DESTINATIONS = {"Processor": "destinations", "DatabaseHost": HOST, "DatabaseTls": "require",
                "DestinationsJson": '{"stripe":[{"kind":"sqs","queue_url":'
                                    '"https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"}]}'}

# The destination actions each accepted combination grants both functions: {action: resources}.
# Combinations not listed grant none.
GRANTS = {
    "destinations-sqs": {"sqs:SendMessage": [QUEUE]},
    "destinations-eventbridge": {"events:PutEvents": [BUS]},
    "destinations-stepfunctions": {"states:StartExecution": [MACHINE]},
    "destinations-all": {"sqs:SendMessage": [QUEUE, AUDIT_QUEUE], "events:PutEvents": [BUS],
                         "states:StartExecution": [MACHINE]},
}
DESTINATION_ACTIONS = ("sqs:", "events:", "states:")

# (name, parameters over REQUIRED and the defaults, None if accepted or the refusing rule)
COMBINATIONS = [
    ("direct-password-verify-full-ca",
     {"DatabaseHost": HOST, "DatabaseCaLayerArn": LAYER}, None),
    ("direct-password-require", {"DatabaseHost": HOST, "DatabaseTls": "require"}, None),
    ("direct-iam-verify-full-ca",
     {**IAM, "DatabaseHost": HOST, "DbResourceId": "db-ABCDEFGHIJKLMNOP",
      "DatabaseCaLayerArn": LAYER}, None),
    ("direct-iam-require",
     {**IAM, "DatabaseHost": HOST, "DbResourceId": "cluster-ABCDEFGHIJKLMNOP",
      "DatabaseTls": "require"}, None),
    ("own-pooler-require",
     {"DatabaseHost": "pgbouncer.internal", "DatabasePort": "6432", "DatabasePooled": "true",
      "DatabaseTls": "require"}, None),
    ("proxy-password-verify-full-ca", {**PROXY, "DatabaseCaLayerArn": LAYER}, None),
    ("proxy-password-require", {**PROXY, "DatabaseTls": "require"}, None),
    ("proxy-iam-verify-full-ca",
     {"CreateRdsProxy": "true", "ProxyTargetClusterId": "mycluster", **IAM,
      "DatabaseCaLayerArn": LAYER, "ProxySecurityGroupIds": "sg-0aaaaaaaaaaaaaaaa"}, None),
    ("proxy-iam-require", {**PROXY, **IAM, "DatabaseTls": "require"}, None),
    ("destinations-sqs", {**DESTINATIONS, "DestinationQueueArns": QUEUE}, None),
    ("destinations-eventbridge", {**DESTINATIONS, "DestinationEventBusArns": BUS}, None),
    ("destinations-stepfunctions", {**DESTINATIONS, "DestinationStateMachineArns": MACHINE}, None),
    ("destinations-all",
     {**DESTINATIONS, "DestinationQueueArns": QUEUE + "," + AUDIT_QUEUE,
      "DestinationEventBusArns": BUS, "DestinationStateMachineArns": MACHINE,
      "DestinationSigningSecret": "whsec_aG9va2NsYWltLXRlbXBsYXRlLWNoZWNr"}, None),
    ("tracing-active", {"DatabaseHost": HOST, "DatabaseTls": "require", "Tracing": "Active"}, None),
    ("forward-signed",
     {"Processor": "forward", "ForwardUrl": "https://erp.example.com/hooks",
      "ForwardSigningSecret": "whsec_aG9va2NsYWltLXRlbXBsYXRlLWNoZWNr", "DatabaseHost": HOST,
      "DatabaseTls": "require"}, None),
    # Refused: each would fail every cold start (or the deploy itself).
    ("defaults-verify-full-without-ca", {"DatabaseHost": HOST}, "VerifyFullNeedsTheCaBundle"),
    ("proxy-verify-full-without-ca", dict(PROXY), "VerifyFullNeedsTheCaBundle"),
    ("iam-without-tls",
     {**IAM, "DatabaseHost": HOST, "DbResourceId": "db-ABCDEFGHIJKLMNOP",
      "DatabaseTls": "disable"}, "IamAuthNeedsUserAndTls"),
    ("iam-without-user",
     {"DbIamAuth": "true", "DatabaseHost": HOST, "DbResourceId": "db-ABCDEFGHIJKLMNOP",
      "DatabaseTls": "require"}, "IamAuthNeedsUserAndTls"),
    ("iam-direct-without-resource-id",
     {**IAM, "DatabaseHost": HOST, "DatabaseTls": "require"},
     "IamAuthWithoutProxyNeedsResourceId"),
    ("proxy-without-target",
     {"CreateRdsProxy": "true", "DatabaseTls": "require"}, "ProxyNeedsOneTargetAndTls"),
    ("proxy-with-two-targets",
     {**PROXY, "ProxyTargetClusterId": "mycluster", "DatabaseTls": "require"},
     "ProxyNeedsOneTargetAndTls"),
    ("proxy-without-tls", {**PROXY, "DatabaseTls": "disable"}, "ProxyNeedsOneTargetAndTls"),
    ("destinations-without-list", {**DESTINATIONS, "DestinationsJson": ""},
     "DestinationsNeedTheirList"),
    ("forward-without-url", {"Processor": "forward", "DatabaseHost": HOST, "DatabaseTls": "require"},
     "ForwardNeedsItsUrl"),
]

failures = []


def fail(message):
    failures.append(message)
    print("FAIL " + message)


def parameter_values(template, overrides):
    return cfn.parameter_values(template, overrides, REQUIRED)


def render(template, overrides):
    """The template with the combination's values (and the required ones) as defaults."""
    rendered = copy.deepcopy(template)
    for name, value in {**REQUIRED, **overrides}.items():
        rendered["Parameters"][name]["Default"] = value
    return rendered


def run(cmd, env=None):
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    return result.returncode, (result.stdout + result.stderr).strip()


def offline_env():
    env = dict(os.environ)
    env.update({
        "AWS_ACCESS_KEY_ID": "AKIAHOOKCLAIMOFFLINE",
        "AWS_SECRET_ACCESS_KEY": "offline",
        "AWS_SESSION_TOKEN": "offline",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_REGION": "eu-west-1",
        # Any AWS call goes to a closed port on loopback and fails at once.
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "SAM_CLI_TELEMETRY": "0",
        "AWS_EC2_METADATA_DISABLED": "true",
    })
    for var in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        env.pop(var, None)
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    return env


# --- the checks ------------------------------------------------------------------------------

def check_combinations(template):
    sam = shutil.which("sam")
    if sam is None:
        fail("the sam CLI is not installed (pip install aws-sam-cli)")
    OUT.mkdir(parents=True, exist_ok=True)
    resolved = {}
    accepted = {}
    for name, overrides, expected_rule in COMBINATIONS:
        params = parameter_values(template, overrides)
        path = OUT / (name + ".json")
        path.write_text(json.dumps(render(template, overrides), indent=1) + "\n")
        refused = refusals(template, params)
        if expected_rule:
            rules = [r for r, _ in refused]
            if expected_rule not in rules:
                fail("%s: expected rule %s to refuse it, got %s" % (name, expected_rule, rules))
            else:
                message = dict(refused)[expected_rule]
                print("%-34s refused   %s: %s" % (name, expected_rule, message))
            continue
        if refused:
            fail("%s: refused by %s" % (name, refused))
            continue
        accepted[name] = path
        resolved[name] = {
            fn: function_settings(template, params, fn)
            for fn in ("WebhookFunction", "RetentionFunction")
        }
    # The linters and validators, each a Python process busy for a second or more, run on every
    # core at once; their verdicts are reported in order below.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        # cfn-lint (what `sam validate --lint` runs) once over every accepted combination: one
        # start of its rule set instead of one per file. Its findings name the file they are in.
        lint = pool.submit(run, ["cfn-lint", *map(str, accepted.values())])
        if sam:
            # SAM's own linting entry point, once, on the template as committed.
            sam_lint = pool.submit(run, [sam, "validate", "--lint", "-t", "template.yaml"],
                                   env=offline_env())
            # `sam validate` translates the SAM resources into CloudFormation, as a deploy
            # would.
            translations = {name: pool.submit(run, [sam, "validate", "-t", str(path)],
                                              env=offline_env())
                            for name, path in accepted.items()}
        code, out = lint.result()
        if code != 0:
            fail("cfn-lint\n%s" % out)
        print("cfn-lint, the %d accepted combinations: %s"
              % (len(accepted), "clean" if code == 0 else "FAILED"))
        if sam:
            code, out = sam_lint.result()
            if code != 0:
                fail("template.yaml: sam validate --lint\n%s" % out)
            print("template.yaml: sam validate --lint %s" % ("clean" if code == 0 else "FAILED"))
        print("%-34s %-9s %s" % ("combination", "verdict", "sam validate"))
        for name in accepted:
            translates = "not run"
            if sam:
                code, out = translations[name].result()
                translates = "translates" if code == 0 else "FAILED"
                if code != 0:
                    fail("%s: sam validate\n%s" % (name, out))
            print("%-34s accepted  %s" % (name, translates))
    return resolved


def check_proxy_settings(resolved):
    expected = {"DATABASE_HOST": "<RdsProxy.Endpoint>", "DATABASE_PORT": "5432",
                "DATABASE_POOLED": "true"}
    pairs = [("proxy-password-require", "direct-password-require"),
             ("proxy-iam-require", "direct-iam-require")]
    for with_proxy, without in pairs:
        for fn in ("WebhookFunction", "RetentionFunction"):
            on = resolved[with_proxy][fn]["Environment"]["Variables"]
            off = resolved[without][fn]["Environment"]["Variables"]
            changed = {k: on.get(k) for k in set(on) | set(off) if on.get(k) != off.get(k)}
            if changed != expected:
                fail("%s %s: the proxy option changes %s, expected %s"
                     % (with_proxy, fn, changed, expected))
    pooler = (ROOT / "tests" / "it" / "pooler.rs").read_text()
    block = re.search(r"const POOLED: &\[\(&str, &str\)\] = &\[(.*?)\];", pooler, re.S)
    if not block or '("DATABASE_POOLED", "true")' not in block.group(1):
        fail("tests/it/pooler.rs: POOLED must set DATABASE_POOLED=true, as the proxy option does")
    print("proxy option sets, for both functions: %s" % ", ".join(
        "%s=%s" % kv for kv in sorted(expected.items())))


def check_destination_grants(resolved):
    for name, functions in resolved.items():
        expected = GRANTS.get(name, {})
        for fn, settings in functions.items():
            granted = {}
            for policy in settings.get("Policies", []):
                for statement in policy.get("Statement", []):
                    actions = statement.get("Action")
                    actions = actions if isinstance(actions, list) else [actions]
                    resources = statement.get("Resource")
                    resources = resources if isinstance(resources, list) else [resources]
                    for action in actions:
                        if str(action).startswith(DESTINATION_ACTIONS):
                            granted.setdefault(action, []).extend(resources)
            if granted != expected:
                fail("%s %s: grants %s, expected %s" % (name, fn, granted, expected))
    print("destination grants: exactly the configured actions on the given ARNs in %d "
          "combinations, none in the %d others"
          % (len(GRANTS), len(resolved) - len(GRANTS)))


def check_tracing(resolved):
    for name, functions in resolved.items():
        expected = "Active" if name == "tracing-active" else "Disabled"
        for fn, settings in functions.items():
            if settings.get("Tracing") != expected:
                fail("%s %s: Tracing %s, expected %s" % (name, fn, settings.get("Tracing"), expected))
    print("tracing: Active for both functions with Tracing=Active, Disabled in the %d other "
          "combinations" % (len(resolved) - 1))


def check_ca_layer_script():
    script = ROOT / "scripts" / "rds-ca-layer.sh"
    code, out = run(["bash", "-n", str(script)])
    if code != 0:
        fail("scripts/rds-ca-layer.sh: bash -n\n" + out)
    if shutil.which("shellcheck"):
        code, out = run(["shellcheck", str(script)])
        if code != 0:
            fail("scripts/rds-ca-layer.sh: shellcheck\n" + out)
        checked = "bash -n and shellcheck"
    else:
        checked = "bash -n (shellcheck not installed)"
    with tempfile.TemporaryDirectory() as tmp:
        pem = pathlib.Path(tmp) / "bundle.pem"
        pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" * 2)
        code, out = run(["bash", str(script), "--zip-only", str(pem)])
        if code != 0:
            fail("scripts/rds-ca-layer.sh --zip-only\n" + out)
        else:
            with zipfile.ZipFile(ROOT / "target" / "rds-ca-layer.zip") as z:
                names = z.namelist()
                body = z.read("rds/global-bundle.pem").decode() if names else ""
            if names != ["rds/global-bundle.pem"] or body.count("BEGIN CERTIFICATE") != 2:
                fail("scripts/rds-ca-layer.sh: the zip holds %s" % names)
        empty = pathlib.Path(tmp) / "empty.pem"
        empty.write_text("not a certificate\n")
        code, _ = run(["bash", str(script), "--zip-only", str(empty)])
        if code == 0:
            fail("scripts/rds-ca-layer.sh accepted a file without a certificate")
    print("scripts/rds-ca-layer.sh: %s clean; builds rds/global-bundle.pem into a layer zip; "
          "refuses a file without a certificate" % checked)


def main():
    template = cfn.load()
    resolved = check_combinations(template)
    if "proxy-password-require" in resolved and "direct-password-require" in resolved:
        check_proxy_settings(resolved)
    check_destination_grants(resolved)
    check_tracing(resolved)
    check_ca_layer_script()
    if failures:
        print("\n%d failure(s)" % len(failures))
        return 1
    print("\nall deployment checks passed (rendered templates in %s)" % OUT.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
