#!/usr/bin/env python3
"""Deployment checks, offline: the documented deploy commands do what the template does.

1. The README's quick start is run by bash with stand-ins for `aws`, `sam`, the CA layer script
   and scripts/deploy-cargo-lambda that only record their arguments (nothing reaches AWS). The
   `sam deploy` command line it ran goes through the SAM CLI's own parser for
   `--parameter-overrides` (the click parser of `sam deploy`, then its CfnParameterOverridesType),
   and every parameter SAM read must be one of the template's, satisfy its type, pattern, allowed
   values and bounds, every required one must be there, and the JSON ones must parse.
2. The cargo-lambda command the quick start names runs for real with --dry-run: it runs
   `cargo lambda deploy --dry` (on stand-in arm64 binaries), and each function's environment,
   layers, subnets, security groups, runtime, memory and timeout in cargo-lambda's own output must
   equal what template.yaml gives the same parameters in a stack of the same name, a variable
   left unset counting as its default in the code. The same for examples/orders, deployed the
   same way with its own binaries.
3. scripts/cargo-lambda-stack.json (roles, schedule, alarms and dashboard for the cargo-lambda
   path) is what this script generates from template.yaml, and cfn-lint passes it.
4. Defaults in one place: Cargo.toml's deploy env (hookclaim's and the example's) sets no
   variable to the code's default, and its log retention is the template's; docs/configuration.md's
   table names every variable the template sets, with the template parameter that sets it and a
   default the template and the code (src/config) agree with; docs/deployment.md's parameter
   table is the one generated from template.yaml.
5. sam local invoke: every variable env.local.json sets is one the template declares for that
   function (SAM ignores the others).

    python3 scripts/check-deploy.py           # exit 1 on any failure
    python3 scripts/check-deploy.py --write   # regenerate scripts/cargo-lambda-stack.json and
                                              # docs/deployment.md's parameter table
Needs the SAM CLI and cfn-lint in the Python that runs it (scripts/lib.sh puts them in
target/venv), and cargo-lambda.
"""
import copy
import json
import os
import pathlib
import re
import shlex
import struct
import subprocess
import sys
import tempfile
import tomllib

import cfn
from cfn import ROOT

README = ROOT / "README.md"
STACK_FILE = ROOT / "scripts" / "cargo-lambda-stack.json"
CONFIGURATION = ROOT / "docs" / "configuration.md"
DEPLOYMENT = ROOT / "docs" / "deployment.md"
TABLE_START = "<!-- parameters: generated from template.yaml by scripts/check-deploy.py --write -->"
TABLE_END = "<!-- end of the generated parameters -->"
FUNCTIONS = {"webhook": "WebhookFunction", "retention": "RetentionFunction"}

failures = []


def fail(message):
    failures.append(message)
    print("FAIL " + message)


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=kwargs.pop("cwd", ROOT), **kwargs)
    return result.returncode, result.stdout, result.stderr


# --- 1. the README's quick start through SAM's parser ------------------------------------------

STAND_INS = r'''
record() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> "$CALLS"; }
aws() {
  record aws "$@"
  case "$*" in
    *create-secret*) echo "arn:aws:secretsmanager:eu-west-1:123456789012:secret:${4:-x}-AbCdEf" ;;
    *describe-stacks*) echo "https://h00kc1a1m0.execute-api.eu-west-1.amazonaws.com/webhooks/" ;;
  esac
}
sam() { record sam "$@"; }
stripe() { record stripe "$@"; }
'''


def quick_start_blocks():
    text = README.read_text()
    match = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.S | re.M)
    if not match:
        raise SystemExit("README.md has no \"## Quick start\" section")
    return re.findall(r"```sh\n(.*?)```", match.group(1), re.S)


def run_quick_start(workdir):
    """Runs the quick start's blocks in workdir; returns the calls the stand-ins recorded."""
    scripts = workdir / "scripts"
    scripts.mkdir()
    calls = workdir / "calls.jsonl"
    (scripts / "rds-ca-layer.sh").write_text(
        "#!/bin/sh\necho arn:aws:lambda:eu-west-1:123456789012:layer:hookclaim-rds-ca:1\n")
    (scripts / "deploy-cargo-lambda").write_text(
        "#!/bin/sh\npython3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "
        "scripts/deploy-cargo-lambda \"$@\" >> \"$CALLS\"\n")
    for f in scripts.iterdir():
        f.chmod(0o755)
    script = "set -euo pipefail\n" + STAND_INS + "\n".join(quick_start_blocks())
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["CALLS"] = str(calls)
    code, out, err = run(["bash", "-c", script], cwd=workdir, env=env)
    if code != 0:
        fail("the README's quick start does not run (exit %d):\n%s%s" % (code, out, err))
        return []
    return [json.loads(line) for line in calls.read_text().splitlines()]


def sam_parameter_overrides(argv, workdir):
    """The parameters `sam deploy argv` reads, by SAM's own click parser and parameter type."""
    import click
    from samcli.commands.deploy.command import cli as deploy
    ctx = click.Context(deploy, info_name="deploy")
    opts, _, _ = deploy.make_parser(ctx).parse_args(list(argv))
    option = next(p for p in deploy.params if p.name == "parameter_overrides")
    cwd = os.getcwd()
    os.chdir(workdir)  # file:// paths are read relative to where sam runs
    try:
        return option.type.convert(opts.get("parameter_overrides") or (), option, ctx)
    finally:
        os.chdir(cwd)


def check_parameters(template, params, where):
    """As CloudFormation checks a stack's parameters before it creates anything."""
    declared = template["Parameters"]
    for name in sorted(set(params) - set(declared)):
        fail("%s: %s is not a parameter of template.yaml" % (where, name))
    for name, spec in declared.items():
        if "Default" not in spec and not params.get(name):
            fail("%s: the required parameter %s has no value" % (where, name))
    for name, value in params.items():
        spec = declared.get(name)
        if spec is None:
            continue
        items = value.split(",") if spec["Type"] in cfn.LIST_TYPES else [value]
        for item in items:
            if "AllowedValues" in spec and item not in [str(v) for v in spec["AllowedValues"]]:
                fail("%s: %s = %r is not one of %s" % (where, name, item, spec["AllowedValues"]))
            if "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], item):
                fail("%s: %s = %r does not match %s" % (where, name, item, spec["AllowedPattern"]))
            if spec["Type"] == "Number":
                try:
                    number = float(item)
                except ValueError:
                    fail("%s: %s = %r is not a number" % (where, name, item))
                    continue
                if "MinValue" in spec and number < float(spec["MinValue"]):
                    fail("%s: %s = %s is below %s" % (where, name, item, spec["MinValue"]))
                if "MaxValue" in spec and number > float(spec["MaxValue"]):
                    fail("%s: %s = %s is above %s" % (where, name, item, spec["MaxValue"]))
            if spec["Type"] == "List<AWS::EC2::Subnet::Id>" and not re.fullmatch(r"subnet-[0-9a-f]+", item):
                fail("%s: %s = %r is not a subnet id" % (where, name, item))
            if spec["Type"] == "List<AWS::EC2::SecurityGroup::Id>" and not re.fullmatch(r"sg-[0-9a-f]+", item):
                fail("%s: %s = %r is not a security group id" % (where, name, item))
        if "MinLength" in spec and len(value) < int(spec["MinLength"]):
            fail("%s: %s = %r is shorter than %s" % (where, name, value, spec["MinLength"]))
        if name.endswith("Json") and value:
            try:
                if not isinstance(json.loads(value), dict):
                    fail("%s: %s = %r is not a JSON object" % (where, name, value))
            except ValueError as e:
                fail("%s: %s = %r is not JSON (%s)" % (where, name, value, e))
    refused = cfn.refusals(template, cfn.parameter_values(template, params))
    for rule, message in refused:
        fail("%s: template rule %s refuses it: %s" % (where, rule, message))


def check_quick_start(template, workdir):
    calls = run_quick_start(workdir)
    deploys = [c[1:] for c in calls if c[:2] == ["sam", "deploy"]]
    if len(deploys) != 1:
        fail("the README's quick start runs `sam deploy` %d times, expected once" % len(deploys))
        return None, None
    argv = deploys[0][1:]
    print("README quick start, as bash runs it:\n  sam deploy " + shlex.join(argv))
    params = sam_parameter_overrides(argv, workdir)
    print("SAM CLI's parser reads %d parameters:" % len(params))
    for name, value in params.items():
        print("  %-24s %s" % (name, value))
    before = len(failures)
    check_parameters(template, params, "README's sam deploy")
    if len(failures) == before:
        print("  every one a parameter of template.yaml, valid, rules satisfied, JSON parsed")
    stack = argv[argv.index("--stack-name") + 1] if "--stack-name" in argv else "hookclaim"
    others = [c for c in calls if c[:1] == ["scripts/deploy-cargo-lambda"]]
    if len(others) != 1:
        fail("the README's quick start names scripts/deploy-cargo-lambda %d times, expected once"
             % len(others))
        return params, None
    return params, (stack, others[0][1:])


# --- 2. the cargo-lambda path: cargo lambda deploy --dry against the template --------------------

def arm64_stand_in(path):
    """A minimal arm64 ELF header: enough for cargo-lambda to package and describe it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header += struct.pack("<HHIQQQIHHHHHH", 2, 0xB7, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0)
    path.write_bytes(header)


def dry_run_deployments(output):
    """{binary: {env, layer, subnets, security_groups, runtime, memory, timeout, url, role}}
    read from `cargo lambda deploy --dry`'s own description of each deployment."""
    found = {}
    current = None
    for line in output.splitlines():
        m = re.search(r"deployment for function `([^`]+)`", line)
        if m:
            current = found.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = re.match(r"\s*- (env_options|layer|VPC subnets|VPC security groups|runtime|memory|"
                     r"timeout|enable_function_url|role): (.*)$", line)
        if not m:
            continue
        key, value = m.groups()
        # Rust's Debug output: Some(x) or None around strings, lists and maps that read as JSON.
        inner = re.fullmatch(r"Some\((.*)\)", value)
        value = inner.group(1) if inner else value
        if key == "env_options":
            current["env"] = json.loads(value)
        elif key in ("layer", "role") or key.startswith("VPC"):
            current[key] = None if value == "None" else json.loads(value)
        elif key in ("memory", "timeout"):
            current[key] = int(re.search(r"\d+", value).group(0))
        elif key == "runtime":
            current[key] = json.loads(value)
        else:
            current[key] = value == "true"
    return found


def template_deployment(template, params, stack):
    """What template.yaml gives each function, for these parameters and this stack name."""
    values = cfn.parameter_values(template, params)
    out = {}
    for fn, logical_id in FUNCTIONS.items():
        settings = cfn.function_settings(template, values, logical_id, stack)
        env = {k: str(v) for k, v in settings["Environment"]["Variables"].items() if str(v) != ""}
        out[fn] = {
            "env": env,
            "layer": settings.get("Layers"),
            "VPC subnets": settings["VpcConfig"]["SubnetIds"],
            "VPC security groups": settings["VpcConfig"]["SecurityGroupIds"],
            "runtime": settings["Runtime"],
            "memory": int(settings["MemorySize"]),
            "timeout": int(settings["Timeout"]),
            "enable_function_url": fn == "webhook",
        }
    return out


def check_cargo_lambda(template, params_file, stack, extra_args, binaries, label):
    with tempfile.TemporaryDirectory() as lambda_dir:
        for binary in binaries.values():
            arm64_stand_in(pathlib.Path(lambda_dir) / binary / "bootstrap")
        cmd = [sys.executable, "scripts/deploy-cargo-lambda", str(params_file), *extra_args,
               "--dry-run", "--lambda-dir", lambda_dir]
        env = dict(os.environ, AWS_ACCESS_KEY_ID="offline", AWS_SECRET_ACCESS_KEY="offline",
                   AWS_REGION="eu-west-1", AWS_ENDPOINT_URL="http://127.0.0.1:9",
                   AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
        env.pop("AWS_PROFILE", None)
        code, out, err = run(cmd, env=env)
    if code != 0:
        fail("%s: scripts/deploy-cargo-lambda --dry-run failed (exit %d)\n%s%s" % (label, code, out, err))
        return
    commands = [line[2:] for line in out.splitlines() if line.startswith("+ ")]
    print("%s: scripts/deploy-cargo-lambda %s --dry-run runs:" % (label, shlex.join(extra_args)))
    for command in commands:
        print("  " + (command if len(command) < 200 else command[:197] + "..."))
    given = read_toml(params_file)
    expected = template_deployment(template, given, stack)
    got = dry_run_deployments(out)
    defaults = code_defaults()
    for fn, binary in binaries.items():
        deployed = got.get(binary)
        if deployed is None:
            fail("%s: cargo lambda deploy --dry described no deployment of %s" % (label, binary))
            continue
        for key, want in expected[fn].items():
            have = deployed.get(key)
            if key == "env":
                # Unset and set to the code's default are the same function.
                have = {k: v for k, v in (have or {}).items() if v not in ("", defaults.get(k))}
                want = {k: v for k, v in want.items() if v != defaults.get(k)}
                missing = {k: v for k, v in want.items() if k not in have}
                extra = {k: v for k, v in have.items() if k not in want}
                differ = {k: (have[k], v) for k, v in want.items() if k in have and have[k] != v}
                if missing or extra or differ:
                    fail("%s %s: cargo-lambda's environment differs from the template's: "
                         "missing %s, extra %s, different (cargo-lambda, template) %s"
                         % (label, fn, missing, extra, differ))
                continue
            if have != want:
                fail("%s %s: cargo-lambda %s = %r, the template gives %r" % (label, fn, key, have, want))
        print("  %s: cargo lambda deploy --dry = template.yaml: %d variables, layers, subnets, "
              "security groups, runtime, memory, timeout%s" % (
                  binary, len(expected[fn]["env"]), ", function URL" if fn == "webhook" else ""))
    stack_deploys = [c for c in commands if c.startswith("aws cloudformation deploy")]
    if len(stack_deploys) != 1:
        fail("%s: expected one `aws cloudformation deploy` of scripts/cargo-lambda-stack.json" % label)
    else:
        stack_template = json.loads(STACK_FILE.read_text())
        words = shlex.split(stack_deploys[0])
        overrides = words[words.index("--parameter-overrides") + 1:]
        for word in overrides:
            name = word.split("=", 1)[0]
            if name not in stack_template["Parameters"]:
                fail("%s: the stack is given %s, which it does not declare" % (label, name))
    for needed in ("put-function-concurrency", "--logging-config", "put-function-event-invoke-config",
                   '{"command":"migrate"}'):
        if not any(needed in c for c in commands):
            fail("%s: scripts/deploy-cargo-lambda never runs %s" % (label, needed))


def read_toml(path):
    return {k: (",".join(v) if isinstance(v, list) else str(v))
            for k, v in tomllib.loads(pathlib.Path(path).read_text()).items()}


# --- 3. the cargo-lambda path's stack, generated from template.yaml ------------------------------

def references(node, found):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Condition" and isinstance(value, str):
                found.add("Condition:" + value)
            elif key == "Fn::If":
                found.add("Condition:" + value[0])
                references(value[1:], found)
                continue
            elif key == "Fn::Sub":
                text = value if isinstance(value, str) else value[0]
                for name in re.findall(r"\$\{([^}.!]+)\}", text):
                    found.add(name)
                if not isinstance(value, str):
                    references(value[1], found)
                continue
            references(value, found)
    elif isinstance(node, list):
        for value in node:
            references(value, found)
    return found


def replace_functions(node):
    """Ref WebhookFunction / RetentionFunction -> the names the cargo-lambda path deploys."""
    if isinstance(node, dict):
        if node.get("Ref") in ("WebhookFunction", "RetentionFunction"):
            return {"Fn::Sub": "${AWS::StackName}-" + node["Ref"][:-len("Function")].lower()}
        return {k: replace_functions(v) for k, v in node.items()}
    if isinstance(node, list):
        return [replace_functions(v) for v in node]
    return node


def without_proxy(node):
    """The template's `!If [CreateProxy, a, b]` as b: the cargo-lambda path makes no proxy."""
    if isinstance(node, dict):
        if list(node) == ["Fn::If"] and node["Fn::If"][0] == "CreateProxy":
            return without_proxy(node["Fn::If"][2])
        return {k: without_proxy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [without_proxy(v) for v in node]
    return node


def uses_the_api(resource):
    text = json.dumps(resource)
    return "WebhookHttpApi" in text or "HttpApiAccessLogGroup" in text or "api_throttled" in text


def cargo_lambda_stack(template):
    """The stack scripts/deploy-cargo-lambda creates next to the functions cargo-lambda deploys:
    template.yaml's roles (from the functions' policies), schedule, topic, alarms and dashboard,
    without what belongs to the HTTP API."""
    resources = {}
    function_arn = {"Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:"
                               "function:${AWS::StackName}-retention"}
    for fn, logical_id in FUNCTIONS.items():
        props = template["Resources"][logical_id]["Properties"]
        role = fn.capitalize() + "Role"
        resources[role] = {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Description": "hookclaim %s function (deployed by cargo-lambda)" % fn,
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                                   "Action": "sts:AssumeRole"}]},
                # What SAM attaches to a function in a VPC: ENIs and its logs.
                "ManagedPolicyArns": [{"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/"
                                                  "service-role/AWSLambdaVPCAccessExecutionRole"}],
                "Policies": [{"PolicyName": "hookclaim-%s" % fn, "PolicyDocument": without_proxy(policy)}
                             for policy in props["Policies"]],
            },
        }
    schedule = template["Resources"]["RetentionFunction"]["Properties"]["Events"]["Schedule"]["Properties"]
    resources["SchedulerRole"] = {
        "Type": "AWS::IAM::Role",
        "Properties": {
            "Description": "Lets EventBridge Scheduler invoke the hookclaim retention function",
            "AssumeRolePolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Principal": {"Service": "scheduler.amazonaws.com"},
                               "Action": "sts:AssumeRole"}]},
            "Policies": [{"PolicyName": "invoke-retention", "PolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "lambda:InvokeFunction",
                               "Resource": function_arn}]}}],
        },
    }
    resources["Schedule"] = {
        "Type": "AWS::Scheduler::Schedule",
        "Properties": {
            "Description": schedule["Description"],
            "ScheduleExpression": schedule["ScheduleExpression"],
            "FlexibleTimeWindow": schedule["FlexibleTimeWindow"],
            "Target": {"Arn": function_arn, "RoleArn": {"Fn::GetAtt": ["SchedulerRole", "Arn"]},
                       "Input": schedule["Input"], "RetryPolicy": schedule["RetryPolicy"]},
        },
    }
    for logical_id, resource in template["Resources"].items():
        kind = resource["Type"]
        if kind in ("AWS::SNS::Topic", "AWS::SNS::Subscription") or (
                kind == "AWS::CloudWatch::Alarm" and not uses_the_api(resource)):
            resources[logical_id] = replace_functions(copy.deepcopy(resource))
    dashboard = copy.deepcopy(template["Resources"]["Dashboard"])
    body = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
    parsed = json.loads(body)
    kept = []
    for widget in parsed["widgets"]:
        if widget["type"] == "alarm":
            widget["properties"]["alarms"] = [
                a for a in widget["properties"]["alarms"] if a.split(".")[0][2:] in resources]
        elif uses_the_api(widget):
            continue
        kept.append(widget)
    parsed["widgets"] = kept
    body = json.dumps(parsed, indent=1)
    body = body.replace("${WebhookFunction}", "${AWS::StackName}-webhook")
    body = body.replace("${RetentionFunction}", "${AWS::StackName}-retention")
    dashboard["Properties"]["DashboardBody"] = {"Fn::Sub": body}
    resources["Dashboard"] = dashboard

    found = references(resources, set())
    conditions = {}
    pending = sorted(n.split(":", 1)[1] for n in found if n.startswith("Condition:"))
    while pending:
        name = pending.pop()
        if name in conditions:
            continue
        conditions[name] = template["Conditions"][name]
        inner = references(conditions[name], set())
        found |= inner
        pending += [n.split(":", 1)[1] for n in inner if n.startswith("Condition:")]
    rules = {}
    for name, rule in template["Rules"].items():
        if name == "ProxyNeedsOneTargetAndTls":
            continue  # the cargo-lambda path makes no proxy: the script refuses CreateRdsProxy
        rules[name] = rule
    found |= references(rules, set())
    parameters = {name: spec for name, spec in template["Parameters"].items() if name in found}
    outputs = {
        "WebhookRoleArn": {"Description": "The webhook function's role",
                           "Value": {"Fn::GetAtt": ["WebhookRole", "Arn"]}},
        "RetentionRoleArn": {"Description": "The retention function's role",
                             "Value": {"Fn::GetAtt": ["RetentionRole", "Arn"]}},
    }
    for name in ("AlarmTopicArn", "AlarmSubscribers", "MetricsNamespace", "DashboardUrl"):
        outputs[name] = template["Outputs"][name]
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "hookclaim deployed by cargo-lambda: what the functions need besides their "
                       "code. Generated from template.yaml by scripts/check-deploy.py --write; "
                       "do not edit.",
        "Metadata": {"Hookclaim": {
            "Defaults": {name: str(spec["Default"]) for name, spec in template["Parameters"].items()
                         if "Default" in spec},
            "Required": [name for name, spec in template["Parameters"].items() if "Default" not in spec],
        }},
        "Parameters": parameters,
        "Rules": rules,
        "Conditions": conditions,
        "Resources": resources,
        "Outputs": outputs,
    }


def check_stack_file(template, write):
    generated = json.dumps(cargo_lambda_stack(template), indent=1) + "\n"
    if write:
        STACK_FILE.write_text(generated)
        print("wrote %s" % STACK_FILE.relative_to(ROOT))
    elif not STACK_FILE.exists() or STACK_FILE.read_text() != generated:
        fail("scripts/cargo-lambda-stack.json is not what template.yaml gives: run "
             "`python3 scripts/check-deploy.py --write`")
        return
    if len(generated.encode()) > 51200:
        fail("scripts/cargo-lambda-stack.json is %d bytes: `aws cloudformation deploy` takes at most "
             "51,200 without an S3 bucket" % len(generated.encode()))
    code, out, err = run(["cfn-lint", str(STACK_FILE)])
    if code != 0:
        fail("cfn-lint scripts/cargo-lambda-stack.json\n%s%s" % (out, err))
    else:
        stack = json.loads(generated)
        alarms = [k for k, v in stack["Resources"].items() if v["Type"] == "AWS::CloudWatch::Alarm"]
        print("scripts/cargo-lambda-stack.json: up to date, cfn-lint clean; roles, schedule, "
              "%d alarms, dashboard" % len(alarms))


# --- 4. defaults in one place --------------------------------------------------------------------

def check_cargo_metadata(template):
    packages = [("hookclaim", ROOT / "Cargo.toml", {"webhook": "webhook", "retention": "retention"}),
                ("examples/orders", ROOT / "examples" / "orders" / "Cargo.toml",
                 {"webhook": "orders-webhook", "retention": "orders-retention"})]
    defaults = code_defaults()
    for label, manifest, binaries in packages:
        bins = tomllib.loads(manifest.read_text())["package"]["metadata"]["lambda"]["bin"]
        for fn, binary in binaries.items():
            deploy = bins[binary]["deploy"]
            settings = template["Resources"][FUNCTIONS[fn]]["Properties"]
            log_group = template["Resources"][settings["LoggingConfig"]["LogGroup"]["Ref"]]
            retention = template["Parameters"][log_group["Properties"]["RetentionInDays"]["Ref"]]
            if str(deploy.get("log_retention")) != str(retention["Default"]):
                fail("%s %s: Cargo.toml log_retention = %r but template.yaml gives %r"
                     % (label, binary, deploy.get("log_retention"), retention["Default"]))
            restated = {k: v for k, v in deploy.get("env", {}).items() if defaults.get(k) == v}
            if restated:
                fail("%s %s: Cargo.toml's deploy env restates the code's defaults %s"
                     % (label, binary, restated))
            else:
                print("%s %s: Cargo.toml's deploy env sets %d variables, none to the code's default"
                      % (label, binary, len(deploy.get("env", {}))))


def template_sets(template):
    """{variable: {parameter or None}}: what sets each variable in either function."""
    sets = {}
    envs = [template["Globals"]["Function"]["Environment"]["Variables"]]
    envs += [template["Resources"][i]["Properties"]["Environment"]["Variables"] for i in FUNCTIONS.values()]
    for env in envs:
        for var, value in env.items():
            params = {r for r in references(value, set()) if r in template["Parameters"]}
            sets.setdefault(var, set()).update(params)
    return sets


def code_defaults():
    """{variable: default}: docs/configuration.md's defaults, which check_configuration_table
    holds to the template's and src/config's."""
    return {var: m.group(1) for var, (cell, _) in configuration_table().items()
            if (m := re.match(r"`([^`]*)`", cell))}


def numeric_code_defaults():
    """{variable: default} for the numeric defaults src/config reads with a literal."""
    found = {}
    for path in (ROOT / "src").rglob("*.rs"):
        for var, number in re.findall(r'get,\s*"([A-Z][A-Z0-9_]+)",\s*([0-9][0-9_]*)\b', path.read_text()):
            found[var] = number.replace("_", "")
    return found


def configuration_table():
    """The rows of docs/configuration.md's settings table: {variable: (default cell, params)}."""
    rows = {}
    for line in CONFIGURATION.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        for var in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]):
            rows[var] = (cells[1], re.findall(r"`([A-Za-z0-9]+)`", cells[2]))
    return rows


def check_configuration_table(template):
    rows = configuration_table()
    if not rows:
        fail("docs/configuration.md has no settings table")
        return
    sets = template_sets(template)
    code = numeric_code_defaults()
    checked = 0
    for var, params in sorted(sets.items()):
        if var not in rows:
            fail("docs/configuration.md: the template sets %s, which the table does not list" % var)
            continue
        documented = set(rows[var][1])
        if documented != params:
            fail("docs/configuration.md: %s is set by %s in the template, by %s in the table"
                 % (var, sorted(params) or "no parameter", sorted(documented) or "no parameter"))
    for var, (cell, params) in sorted(rows.items()):
        code_default = re.match(r"`([^`]*)`", cell)
        code_default = code_default.group(1) if code_default else None
        if cell.startswith("unset") or cell.startswith("—"):
            code_default = ""
        template_default = re.search(r"template: `([^`]*)`", cell)
        template_default = template_default.group(1) if template_default else code_default
        if var in code and code_default not in (None, "") and code[var] != code_default:
            fail("docs/configuration.md: %s defaults to %s in the table, %s in src/config"
                 % (var, code_default, code[var]))
        for param in params:
            spec = template["Parameters"].get(param)
            if spec is None:
                fail("docs/configuration.md: %s names %s, not a parameter of template.yaml" % (var, param))
                continue
            required = "required" in cell
            if required != ("Default" not in spec):
                fail("docs/configuration.md: %s is %srequired in the table, %srequired in the template (%s)"
                     % (var, "" if required else "not ", "" if "Default" not in spec else "not ", param))
                continue
            if required:
                checked += 1
                continue
            default = str(spec["Default"])
            if default != "" and default != template_default:
                fail("docs/configuration.md: %s defaults to %r there, template.yaml's %s to %r"
                     % (var, template_default, param, default))
            checked += 1
    undocumented = [p for p, spec in template["Parameters"].items()
                    if p not in DEPLOYMENT.read_text()]
    for param in undocumented:
        fail("docs/deployment.md never names the template parameter %s" % param)
    print("docs/configuration.md: %d variables; all %d the template sets listed with their "
          "parameters; %d parameter defaults agree with the table (and %d numeric defaults with src/config)"
          % (len(rows), len(sets), checked, len([v for v in rows if v in code])))


def parameters_table(template):
    lines = [TABLE_START, "", "| parameter | default | what it sets |", "|---|---|---|"]
    for name, spec in template["Parameters"].items():
        default = spec.get("Default")
        if default is None:
            shown = "required"
        elif str(default) == "":
            shown = "empty"
        else:
            shown = "`%s`" % default
        description = " ".join(str(spec.get("Description", "")).split()).replace("|", "\\|")
        lines.append("| `%s` | %s | %s |" % (name, shown, description))
    lines += ["", TABLE_END]
    return "\n".join(lines)


def check_parameters_table(template, write):
    text = DEPLOYMENT.read_text()
    match = re.search(re.escape(TABLE_START) + ".*?" + re.escape(TABLE_END), text, re.S)
    if not match:
        fail("docs/deployment.md lacks the generated parameter table's markers")
        return
    table = parameters_table(template)
    if write:
        DEPLOYMENT.write_text(text[:match.start()] + table + text[match.end():])
        print("wrote docs/deployment.md's parameter table")
    elif match.group(0) != table:
        fail("docs/deployment.md's parameter table is not template.yaml's: run "
             "`python3 scripts/check-deploy.py --write`")
    else:
        print("docs/deployment.md: the parameter table is template.yaml's (%d parameters)"
              % len(template["Parameters"]))


# --- 5. sam local invoke -------------------------------------------------------------------------

def check_local_env(template):
    local = json.loads((ROOT / "env.local.json").read_text())
    declared_all = set(template["Globals"]["Function"]["Environment"]["Variables"])
    for section, variables in local.items():
        if section == "Parameters":
            declared = declared_all.copy()
            for logical_id in FUNCTIONS.values():
                declared |= set(template["Resources"][logical_id]["Properties"]["Environment"]["Variables"])
        elif section in FUNCTIONS.values():
            declared = declared_all | set(
                template["Resources"][section]["Properties"]["Environment"]["Variables"])
        else:
            fail("env.local.json: %s is not a function of template.yaml" % section)
            continue
        for var in variables:
            if var not in declared:
                fail("env.local.json: %s.%s is not declared in template.yaml, so sam local ignores it"
                     % (section, var))
    print("env.local.json: every variable is one the template declares (sam local sets only those)")


def main():
    write = "--write" in sys.argv[1:]
    template = cfn.load()
    check_stack_file(template, write)
    check_parameters_table(template, write)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        params, cargo_lambda = check_quick_start(template, workdir)
        if cargo_lambda:
            stack, argv = cargo_lambda
            params_file = workdir / argv[0]
            extra = argv[1:]
            check_cargo_lambda(template, params_file, stack, extra,
                               {"webhook": "webhook", "retention": "retention"}, "hookclaim")
            example = ["--stack", stack + "-orders", "--package", "hookclaim-example-orders",
                       "--webhook-bin", "orders-webhook", "--retention-bin", "orders-retention"]
            check_cargo_lambda(template, params_file, stack + "-orders", example,
                               {"webhook": "orders-webhook", "retention": "orders-retention"},
                               "examples/orders")
    check_cargo_metadata(template)
    check_configuration_table(template)
    check_local_env(template)
    if failures:
        print("\n%d failure(s)" % len(failures))
        return 1
    print("\nall deploy-path checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
