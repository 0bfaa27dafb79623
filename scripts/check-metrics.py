#!/usr/bin/env python3
"""Checks that every hookclaim metric the template's alarms and dashboard read is one the
functions emit, with the same name and dimensions.

    scripts/check-metrics.py [--stack-name NAME] template.yaml LOG [LOG...]
    scripts/check-metrics.py [--stack-name NAME] --namespace template.yaml

The template's namespaces may depend on the stack's name (`!Sub hookclaim/${AWS::StackName}`):
they are read as for a stack called NAME (default `hookclaim-check`). `--namespace` prints the
namespace the template's functions emit under, their HOOKCLAIM_METRICS_NAMESPACE (the functions'
default, `hookclaim`, when the template sets none), so that functions run locally for the check
emit under the same one.

The template's side: each AWS::CloudWatch::Alarm (MetricName/Namespace/Dimensions, or the
MetricStat entries of its Metrics) and each metric of the AWS::CloudWatch::Dashboard's widgets
(metric arrays, with the "." and "..." shorthands, and SEARCH expressions, whose schema names the
exact dimension set). The emitted side: the CloudWatch Embedded Metric Format lines in the logs
(one JSON object per line with an `_aws` block); each directive's metrics under each of its
dimension sets, with the dimension values read from the line, as CloudWatch reads them.

A watched metric is covered when some line emits the same namespace and metric name with exactly
the watched dimension keys and, where the template names values, the same values. Prints one line
per watched metric and exits 1 when any is not covered (or nothing is watched at all). Metrics in
AWS namespaces (AWS/Lambda…) are emitted by AWS, not by hookclaim, and are not checked.
"""

import json
import re
import sys

import yaml


class CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation's short tags (!Ref, !Sub…) as their long form."""


def _intrinsic(loader, suffix, node):
    name = "Ref" if suffix == "Ref" else "Fn::" + suffix
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


CfnLoader.add_multi_constructor("!", _intrinsic)

# The functions' namespace when HOOKCLAIM_METRICS_NAMESPACE is not set.
DEFAULT_NAMESPACE = "hookclaim"
DEFAULT_STACK = "hookclaim-check"
SEARCH = re.compile(r"SEARCH\(\s*'\{([^}]*)\}\s*([^']*)'")
TERM = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def substitute(template, stack):
    """Resolves a Fn::Sub string enough to parse it: the stack's name as given, other names
    (region, attributes) as placeholders."""
    if isinstance(template, list):
        template = template[0]

    def name(m):
        if m.group(1) == "AWS::StackName":
            return stack
        return "sub-" + m.group(1).replace(":", "-")

    return re.sub(r"\$\{([^}!]+)\}", name, template)


def namespace_of(value, stack, where):
    """A namespace as the template writes it: a literal, or a Fn::Sub of the stack's name."""
    if isinstance(value, dict) and list(value) == ["Fn::Sub"]:
        return substitute(value["Fn::Sub"], stack)
    return plain(value, where)


def plain(value, where):
    if not isinstance(value, (str, int, float)):
        raise SystemExit(f"{where}: {value!r} is not a literal; the check cannot read it")
    return str(value)


def watched(template, stack):
    """(where, namespace, name, dimension keys, {key: value}) for each metric read."""
    out = []
    # Metrics the template makes itself from log lines (metric filters), not the functions.
    from_logs = {
        (namespace_of(t["MetricNamespace"], stack, rid), t["MetricName"])
        for rid, res in template.get("Resources", {}).items()
        if res.get("Type") == "AWS::Logs::MetricFilter"
        for t in res["Properties"]["MetricTransformations"]
    }
    for rid, res in template.get("Resources", {}).items():
        props = res.get("Properties", {})
        if res.get("Type") == "AWS::CloudWatch::Alarm":
            stats = []
            if "MetricName" in props:
                stats.append(props)
            for m in props.get("Metrics", []):
                if "MetricStat" in m:
                    stats.append(m["MetricStat"]["Metric"])
            for s in stats:
                namespace = namespace_of(s["Namespace"], stack, rid)
                if namespace.startswith("AWS/"):
                    continue  # published by AWS, whose dimension values are the stack's resources
                dims = {plain(d["Name"], rid): plain(d["Value"], rid) for d in s.get("Dimensions", [])}
                out.append((f"alarm {rid}", namespace, s["MetricName"], frozenset(dims), dims))
        elif res.get("Type") == "AWS::CloudWatch::Dashboard":
            body = json.loads(substitute(props["DashboardBody"]["Fn::Sub"], stack))
            for widget in body["widgets"]:
                title = f"dashboard {rid} '{widget['properties'].get('title', '')}'"
                previous = []
                for row in widget["properties"].get("metrics", []):
                    fields = [f for f in row if not isinstance(f, dict)]
                    options = [f for f in row if isinstance(f, dict)]
                    for o in options:
                        if "expression" in o:
                            for schema, rest in SEARCH.findall(o["expression"]):
                                keys = [k.strip().strip('"') for k in schema.split(",")]
                                terms = dict(TERM.findall(rest))
                                name = terms.pop("MetricName", None)
                                if name is None:
                                    raise SystemExit(f"{title}: SEARCH without MetricName")
                                out.append((title, keys[0], name, frozenset(keys[1:]), terms))
                    if not fields:
                        continue
                    if fields[0] == "...":
                        fields = previous
                    else:
                        fields = [previous[i] if f == "." else f for i, f in enumerate(fields)]
                    previous = fields
                    namespace, name, rest = fields[0], fields[1], fields[2:]
                    dims = dict(zip(rest[0::2], rest[1::2]))
                    out.append((title, namespace, name, frozenset(dims), dims))
    return [w for w in out if (w[1], w[2]) not in from_logs]


def emitted(paths):
    """{(namespace, name, dimension keys)}: [{key: value}] over every EMF line in the logs."""
    seen = {}
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for text in f:
                text = text.strip()
                if not text.startswith("{"):
                    continue
                try:
                    line = json.loads(text)
                except ValueError:
                    continue
                for directive in line.get("_aws", {}).get("CloudWatchMetrics", []):
                    for dimset in directive["Dimensions"]:
                        if any(k not in line for k in dimset):
                            continue
                        values = {k: str(line[k]) for k in dimset}
                        for metric in directive["Metrics"]:
                            # CloudWatch drops a metric whose value is missing or not a number.
                            if not isinstance(line.get(metric["Name"]), (int, float)):
                                continue
                            key = (directive["Namespace"], metric["Name"], frozenset(dimset))
                            seen.setdefault(key, []).append(values)
    return seen


def functions_namespace(template, stack):
    """The namespace the template's functions emit under: each one's HOOKCLAIM_METRICS_NAMESPACE
    (its own, else the Globals', else the default), which must be the same for all of them."""

    def setting(props, where):
        value = props.get("Environment", {}).get("Variables", {}).get("HOOKCLAIM_METRICS_NAMESPACE")
        return None if value is None else namespace_of(value, stack, where)

    shared = setting(template.get("Globals", {}).get("Function", {}), "Globals")
    found = {}
    for rid, res in template.get("Resources", {}).items():
        if res.get("Type") == "AWS::Serverless::Function":
            own = setting(res.get("Properties", {}), rid)
            found[rid] = own or shared or DEFAULT_NAMESPACE
    if len(set(found.values())) > 1:
        raise SystemExit(f"the functions emit under different namespaces: {found}")
    return next(iter(found.values()), shared or DEFAULT_NAMESPACE)


def main(argv):
    args = argv[1:]
    stack = DEFAULT_STACK
    if args[:1] == ["--stack-name"] and len(args) > 1:
        stack, args = args[1], args[2:]
    if args[:1] == ["--namespace"] and len(args) == 2:
        with open(args[1], encoding="utf-8") as f:
            print(functions_namespace(yaml.load(f, Loader=CfnLoader), stack))
        return 0
    if len(args) < 2 or args[0].startswith("--"):
        raise SystemExit(__doc__)
    with open(args[0], encoding="utf-8") as f:
        template = yaml.load(f, Loader=CfnLoader)
    seen = emitted(args[1:])
    missing = 0
    checked = 0
    for where, namespace, name, keys, values in watched(template, stack):
        if namespace.startswith("AWS/"):
            print(f"skip     {namespace} {name}  ({where}: emitted by AWS)")
            continue
        checked += 1
        dims = ",".join(f"{k}={values.get(k, '*')}" for k in sorted(keys))
        lines = seen.get((namespace, name, keys), [])
        found = sum(1 for v in lines if all(v[k] == want for k, want in values.items()))
        if found:
            print(f"ok       {namespace} {name} {{{dims}}}  ({where}; {found} lines)")
        else:
            missing += 1
            print(f"MISSING  {namespace} {name} {{{dims}}}  ({where}): no EMF line emits it")
    if checked == 0:
        print("the template watches no hookclaim metric: nothing was checked")
        return 1
    print(f"{checked} watched metrics, {missing} not emitted")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
