#!/usr/bin/env python3
"""Checks that every hookclaim metric the template's alarms and dashboard read is one the
functions emit, with the same name and dimensions.

    scripts/check-metrics.py template.yaml LOG [LOG...]

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

NAMESPACE = "hookclaim"
SEARCH = re.compile(r"SEARCH\(\s*'\{([^}]*)\}\s*([^']*)'")
TERM = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def substitute(template):
    """Resolves a Fn::Sub string enough to parse it: region, stack, attributes."""
    if isinstance(template, list):
        template = template[0]
    return re.sub(r"\$\{([^}!]+)\}", lambda m: "sub-" + m.group(1).replace(":", "-"), template)


def plain(value, where):
    if not isinstance(value, (str, int, float)):
        raise SystemExit(f"{where}: {value!r} is not a literal; the check cannot read it")
    return str(value)


def watched(template):
    """(where, namespace, name, dimension keys, {key: value}) for each metric read."""
    out = []
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
                dims = {plain(d["Name"], rid): plain(d["Value"], rid) for d in s.get("Dimensions", [])}
                out.append((f"alarm {rid}", s["Namespace"], s["MetricName"], frozenset(dims), dims))
        elif res.get("Type") == "AWS::CloudWatch::Dashboard":
            body = json.loads(substitute(props["DashboardBody"]["Fn::Sub"]))
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
    return out


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


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    with open(argv[1], encoding="utf-8") as f:
        template = yaml.load(f, Loader=CfnLoader)
    seen = emitted(argv[2:])
    missing = 0
    checked = 0
    for where, namespace, name, keys, values in watched(template):
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
