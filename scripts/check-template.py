#!/usr/bin/env python3
"""Deployment checks: template.yaml rendered for every parameter combination that matters.

For each combination the template's parameter defaults are set to its values and the result is
written to target/template-check/<name>.json. CloudFormation's Rules are evaluated for it, as
CloudFormation does before it creates anything: a combination that would make every cold start
fail must be refused, with the rule's message, and every other one accepted. Accepted ones must
be clean under `cfn-lint` and `sam validate --lint`, and translate under `sam validate`. Then:

- the settings the RDS Proxy option changes are exactly DATABASE_HOST (the proxy's endpoint),
  DATABASE_PORT (5432) and DATABASE_POOLED=true, for both functions; tests/it/pooler.rs runs with
  that DATABASE_POOLED value and the pooler's host and port;
- `cargo lambda deploy` gets the same settings as `sam deploy`: Cargo.toml's
  [package.metadata.lambda.bin.*.deploy] runtime, memory, timeout, log retention and every
  environment variable equal the template's defaults for that function;
- each destinations combination grants both functions exactly the destinations' actions
  (sqs:SendMessage, events:PutEvents, states:StartExecution) on the ARNs given, and the other
  combinations grant none of them;
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
import tomllib
import zipfile

from cfnlint.decode import decode_str

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "target" / "template-check"

SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:hookclaim/%s-AbCdEf"
LAYER = "arn:aws:lambda:eu-west-1:123456789012:layer:hookclaim-rds-ca:1"
REQUIRED = {
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
]

failures = []


def fail(message):
    failures.append(message)
    print("FAIL " + message)


# --- a small evaluator for the intrinsic functions Rules, Conditions and variables use --------

NO_VALUE = object()


class Context:
    def __init__(self, template, params):
        self.template = template
        self.params = params
        self.conditions = {}

    def condition(self, name):
        if name not in self.conditions:
            self.conditions[name] = self.value(self.template["Conditions"][name])
        return self.conditions[name]

    def value(self, node):
        if isinstance(node, dict) and len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                if arg == "AWS::NoValue":
                    return NO_VALUE
                if arg.startswith("AWS::"):
                    return "<%s>" % arg
                if arg in self.params:
                    return self.params[arg]
                return "<%s>" % arg  # a resource's id
            if key == "Fn::Equals":
                return self.value(arg[0]) == self.value(arg[1])
            if key == "Fn::Not":
                return not self.value(arg[0])
            if key == "Fn::And":
                return all(self.value(a) for a in arg)
            if key == "Fn::Or":
                return any(self.value(a) for a in arg)
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::If":
                return self.value(arg[1] if self.condition(arg[0]) else arg[2])
            if key == "Fn::GetAtt":
                target = arg if isinstance(arg, str) else ".".join(arg)
                return "<%s>" % target
            if key == "Fn::Join":
                parts = self.value(arg[1])
                return arg[0].join(parts if isinstance(parts, list) else [parts])
            if key.startswith("Fn::"):
                return "<%s>" % key  # Sub, Select, Split: not needed to decide anything here
        if isinstance(node, dict):
            return {k: v for k, v in ((k, self.value(v)) for k, v in node.items())
                    if v is not NO_VALUE}
        if isinstance(node, list):
            return [v for v in (self.value(v) for v in node) if v is not NO_VALUE]
        return node


def parameter_values(template, overrides):
    values = {}
    for name, spec in template["Parameters"].items():
        value = overrides.get(name, REQUIRED.get(name, spec.get("Default")))
        if value is None:
            raise SystemExit("combination leaves %s without a value" % name)
        value = str(value)
        if spec["Type"] in ("CommaDelimitedList", "List<AWS::EC2::Subnet::Id>",
                            "List<AWS::EC2::SecurityGroup::Id>"):
            value = value.split(",")
        values[name] = value
    return values


def refusals(template, params):
    """The rules whose assertions fail for these parameters, with their messages."""
    ctx = Context(template, params)
    refused = []
    for name, rule in template.get("Rules", {}).items():
        if "RuleCondition" in rule and not ctx.value(rule["RuleCondition"]):
            continue
        for assertion in rule["Assertions"]:
            if not ctx.value(assertion["Assert"]):
                refused.append((name, " ".join(str(assertion["AssertDescription"]).split())))
    return refused


def function_settings(template, params, logical_id):
    """A function's resolved properties, Globals merged, as SAM merges them."""
    ctx = Context(template, params)
    props = copy.deepcopy(template["Globals"]["Function"])
    own = template["Resources"][logical_id]["Properties"]
    for key, value in own.items():
        if key == "Environment":
            props["Environment"]["Variables"].update(value["Variables"])
        else:
            props[key] = value
    return ctx.value(props)


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
    print("%-34s %-9s %-10s %s" % ("combination", "verdict", "cfn-lint", "sam validate --lint"))
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
        code, out = run(["cfn-lint", str(path)])
        lint = "clean" if code == 0 else "FAILED"
        if code != 0:
            fail("%s: cfn-lint\n%s" % (name, out))
        validate = "not run"
        if sam:
            # Plain `sam validate` translates the SAM resources; `--lint` runs cfn-lint on it.
            results = []
            for args in (["--lint"], []):
                code, out = run([sam, "validate", *args, "-t", str(path)], env=offline_env())
                results.append(code == 0)
                if code != 0:
                    fail("%s: sam validate %s\n%s" % (name, " ".join(args), out))
            validate = "clean (and translates)" if all(results) else "FAILED"
        print("%-34s accepted  %-10s %s" % (name, lint, validate))
        resolved[name] = {
            fn: function_settings(template, params, fn)
            for fn in ("WebhookFunction", "RetentionFunction")
        }
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
    pooler = (ROOT / "tests" / "pooler.rs").read_text()
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


def check_cargo_metadata(template, resolved):
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    bins = cargo["package"]["metadata"]["lambda"]["bin"]
    defaults = resolved["direct-password-verify-full-ca"]
    for binary, fn in (("webhook", "WebhookFunction"), ("retention", "RetentionFunction")):
        deploy = bins[binary]["deploy"]
        sam = defaults[fn]
        env = sam["Environment"]["Variables"]
        log_group_id = template["Resources"][fn]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        log_group = template["Resources"][log_group_id]
        retention_param = log_group["Properties"]["RetentionInDays"]["Ref"]
        pairs = [
            ("runtime", deploy.get("runtime"), sam["Runtime"]),
            ("memory", deploy.get("memory"), sam["MemorySize"]),
            ("timeout", deploy.get("timeout"), sam["Timeout"]),
            ("log_retention", deploy.get("log_retention"),
             int(template["Parameters"][retention_param]["Default"])),
        ]
        for key, value in deploy.get("env", {}).items():
            pairs.append(("env " + key, value, env.get(key)))
        for key, cargo_value, sam_value in pairs:
            if str(cargo_value) != str(sam_value):
                fail("%s: Cargo.toml %s = %r but template.yaml gives %r"
                     % (binary, key, cargo_value, sam_value))
        print("cargo lambda deploy %-9s = sam deploy defaults: runtime, memory, timeout, "
              "log retention and %d variables" % (binary, len(deploy.get("env", {}))))


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
    template, matches = decode_str((ROOT / "template.yaml").read_text())
    if matches:
        raise SystemExit("template.yaml does not parse: %s" % matches)
    resolved = check_combinations(template)
    if "proxy-password-require" in resolved and "direct-password-require" in resolved:
        check_proxy_settings(resolved)
    if "direct-password-verify-full-ca" in resolved:
        check_cargo_metadata(template, resolved)
    check_destination_grants(resolved)
    check_ca_layer_script()
    if failures:
        print("\n%d failure(s)" % len(failures))
        return 1
    print("\nall deployment checks passed (rendered templates in %s)" % OUT.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
