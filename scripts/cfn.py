"""template.yaml read and evaluated for given parameter values, for the deployment checks.

A small evaluator of the intrinsic functions the template's Rules, Conditions, environment
variables, policies and alarms use (Ref, Fn::If, Fn::Equals, Fn::Not, Fn::And, Fn::Or,
Condition, Fn::Join, Fn::Sub, Fn::GetAtt), as CloudFormation would resolve them for a stack of
a given name in a given account and region. What it cannot know before the stack exists (a
resource's id or attribute) becomes a placeholder such as "<RdsProxy.Endpoint>".

Used by scripts/check-template.py and scripts/check-deploy.py; needs cfn-lint's decoder.
"""
import copy
import pathlib
import re

from cfnlint.decode import decode_str

ROOT = pathlib.Path(__file__).resolve().parent.parent

NO_VALUE = object()

# The account and region the checks resolve stacks in.
PSEUDO = {
    "AWS::AccountId": "123456789012",
    "AWS::Region": "eu-west-1",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
}

LIST_TYPES = ("CommaDelimitedList", "List<AWS::EC2::Subnet::Id>",
              "List<AWS::EC2::SecurityGroup::Id>")


def load(path=None):
    """template.yaml (or the given file) as plain dicts, intrinsic functions in long form."""
    text = pathlib.Path(path or ROOT / "template.yaml").read_text()
    template, matches = decode_str(text)
    if matches:
        raise SystemExit("%s does not parse: %s" % (path or "template.yaml", matches))
    return template


def parameter_values(template, given, required=None):
    """Every parameter's value: `given`, else `required`, else its Default. Lists are split."""
    values = {}
    for name, spec in template["Parameters"].items():
        value = given.get(name, (required or {}).get(name, spec.get("Default")))
        if value is None:
            raise SystemExit("no value for parameter %s" % name)
        value = str(value)
        if spec["Type"] in LIST_TYPES:
            value = [v for v in value.split(",")] if value else [""]
        values[name] = value
    return values


class Context:
    """Evaluates intrinsic functions for one stack's parameter values."""

    def __init__(self, template, params, stack_name="hookclaim"):
        self.template = template
        self.params = params
        self.pseudo = dict(PSEUDO, **{"AWS::StackName": stack_name})
        self.conditions = {}

    def condition(self, name):
        if name not in self.conditions:
            self.conditions[name] = self.value(self.template["Conditions"][name])
        return self.conditions[name]

    def ref(self, name):
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.params:
            return self.params[name]
        return self.resource_name(name)

    def resource_name(self, logical_id):
        """A resource's Ref: its explicit name where the template gives one, else a placeholder."""
        resource = self.template.get("Resources", {}).get(logical_id, {})
        props = resource.get("Properties", {})
        if resource.get("Type") == "AWS::Serverless::Function" and "FunctionName" in props:
            return self.value(props["FunctionName"])
        return "<%s>" % logical_id

    def sub(self, text, variables):
        def one(match):
            name = match.group(1)
            if name in variables:
                value = variables[name]
            elif "." in name:
                value = "<%s>" % name
            else:
                value = self.ref(name)
            if isinstance(value, list):
                value = ",".join(value)
            return str(value)
        return re.sub(r"\$\{([^}!]+)\}", one, text)

    def value(self, node):
        if isinstance(node, dict) and len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                return self.ref(arg)
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
            if key == "Fn::Sub":
                if isinstance(arg, str):
                    return self.sub(arg, {})
                return self.sub(arg[0], {k: self.value(v) for k, v in arg[1].items()})
            if key.startswith("Fn::"):
                return "<%s>" % key  # Select, Split: not needed to decide anything here
        if isinstance(node, dict):
            return {k: v for k, v in ((k, self.value(v)) for k, v in node.items())
                    if v is not NO_VALUE}
        if isinstance(node, list):
            return [v for v in (self.value(v) for v in node) if v is not NO_VALUE]
        return node


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


def function_settings(template, params, logical_id, stack_name="hookclaim"):
    """A function's resolved properties, Globals merged, as SAM merges them."""
    ctx = Context(template, params, stack_name)
    props = copy.deepcopy(template["Globals"]["Function"])
    own = template["Resources"][logical_id]["Properties"]
    for key, value in own.items():
        if key == "Environment":
            props["Environment"]["Variables"].update(value["Variables"])
        else:
            props[key] = value
    return ctx.value(props)
