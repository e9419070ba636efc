"""Every Kubernetes object the program sends validates against its schema, as the API server would.

Core and resource.k8s.io/v1 objects: the schemas of every Kubernetes version a stack may run
(1.34, 1.35 and 1.36: stackconfig/versions.py EKS_ADDONS), strict (kubernetes-validate). Every
stack is planned at its own version, and one also at the newest version offered (1.36, not the
default), so that version's objects pass the same checks.

Karpenter objects: the NodePool and EC2NodeClass CRDs of aws/karpenter-provider-aws at tag v1.14.1
(commit bde00654, pkg/apis/crds/), vendored in tests/data/karpenter-crds-v1.14.1/, made strict
here (unknown fields rejected: the API server would silently prune a misspelled one), and their
x-kubernetes-validations CEL rules evaluated on every object (the API server evaluates them on
create; a JSON-schema check alone does not). The program pins Karpenter 1.15.0, whose CRD files
could not be read here; the changes to these two CRDs seen on Karpenter's main branch after
v1.14.1 (EC2NodeClass spec.kubelet became a pass-through object; one more restricted NodePool
label, karpenter.k8s.aws/nitro-sandbox) touch no field the program sets, and 1.15's documented
addition (EC2NodeClass enclaveOptions) is optional.
"""
from __future__ import annotations

import copy
import re
from functools import lru_cache
from pathlib import Path

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml
from celpy import celtypes

from offline.stacks import load_stack, run_stack
from stackconfig.versions import AMI_RELEASE, EKS_ADDONS

from .conftest import STACKS, recorded

KUBERNETES_VERSIONS = [f"{version}.0" for version in EKS_ADDONS]
NEWEST = max(EKS_ADDONS, key=lambda version: tuple(map(int, version.split("."))))
PLANS = [(stack, None) for stack in STACKS] + [("qwen3-32b-qwen3-1.7b", NEWEST)]
CRD_DIR = Path(__file__).parent / "data" / "karpenter-crds-v1.14.1"
CRD_FILES = {
    ("karpenter.sh/v1", "NodePool"): "karpenter.sh_nodepools.yaml",
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): "karpenter.k8s.aws_ec2nodeclasses.yaml",
}


@lru_cache(maxsize=None)
def recorded_at(stack: str, version: str):
    return run_stack(load_stack(stack, {"sd-trn2:cluster": {"kubernetesVersion": version}}))


@pytest.fixture(params=PLANS, ids=[stack if version is None else f"{stack}-at-{version}" for stack, version in PLANS])
def recording(request):
    """Each stack as its file says, and one at the newest Kubernetes version offered."""
    stack, version = request.param
    return recorded(stack) if version is None else recorded_at(stack, version)


def test_the_newest_version_offered_is_planned():
    plan = recorded_at(*PLANS[-1])
    assert plan.one("eks:index:Cluster").inputs["version"] == NEWEST
    assert plan.stack_outputs["versions"]["kubernetes"] == NEWEST


def strict(schema):
    """Reject properties a CRD schema does not declare (where it does not preserve unknowns)."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@lru_cache(maxsize=None)
def crd_schema(api_version: str, kind: str) -> dict:
    """The served version's openAPIV3Schema, as the CRD declares it."""
    crd = yaml.safe_load((CRD_DIR / CRD_FILES[(api_version, kind)]).read_text())
    version = api_version.split("/")[1]
    (entry,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return entry["schema"]["openAPIV3Schema"]


@lru_cache(maxsize=None)
def strict_schema(api_version: str, kind: str) -> dict:
    schema = strict(copy.deepcopy(crd_schema(api_version, kind)))
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


# --- CEL, as the API server evaluates x-kubernetes-validations ------------------------------------
# The rules use CEL's standard macros and two Kubernetes library functions, which cel-python lacks:
# string.find(regex), the first match or "" (Kubernetes CEL regex library), and
# string.split(separator) (Kubernetes CEL strings extension), per the Kubernetes documentation
# "CEL in Kubernetes".

def _find(text, regex):
    match = re.search(str(regex), str(text))
    return celtypes.StringType(match.group(0) if match else "")


def _split(text, separator):
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(separator))])


CEL = celpy.Environment()
KUBERNETES_FUNCTIONS = {"find": _find, "split": _split}


@lru_cache(maxsize=None)
def cel_program(rule: str):
    return CEL.program(CEL.compile(rule), functions=KUBERNETES_FUNCTIONS)


def cel_rules(schema: dict, value, path: str = "self") -> list[tuple[str, dict, object]]:
    """(path, rule, value at that path) for every x-kubernetes-validations rule whose node the
    object has, as the API server binds `self` to the value at the rule's node."""
    found = [(path, rule, value) for rule in schema.get("x-kubernetes-validations", [])]
    properties = schema.get("properties") or {}
    if isinstance(value, dict):
        for key, item in value.items():
            child = properties.get(key) or (schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None)
            if child:
                found += cel_rules(child, item, f"{path}.{key}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            found += cel_rules(schema["items"], item, f"{path}[{index}]")
    return found


def failed_cel_rules(obj: dict) -> list[str]:
    """The rules an object breaks on create. Transition rules (those reading oldSelf) apply to
    updates only and are left out, as the API server leaves them out on create."""
    schema = crd_schema(obj["apiVersion"], obj["kind"])
    failed = []
    for path, rule, value in cel_rules(schema, obj):
        if "oldSelf" in rule["rule"]:
            continue
        if not bool(cel_program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})):
            failed.append(f"{path}: {rule.get('message') or rule['rule']}")
    return failed


def test_every_object_validates(recording):
    objects = [r.inputs for r in recording.kubernetes_objects()]
    assert objects
    for obj in objects:
        key = (obj["apiVersion"], obj["kind"])
        if key in CRD_FILES:
            jsonschema.validate(obj, strict_schema(*key))
            assert failed_cel_rules(obj) == [], obj["metadata"]
        else:
            for version in KUBERNETES_VERSIONS:
                kubernetes_validate.validate(obj, version, strict=True)


def test_karpenter_objects_are_checked_against_the_crds(recording):
    kinds = {(o.inputs["apiVersion"], o.inputs["kind"]) for o in recording.kubernetes_objects()}
    assert set(CRD_FILES) <= kinds
    # The strict schema must catch a misspelled field, or the check above proves nothing.
    pool = copy.deepcopy(recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool").inputs)
    pool["spec"]["replicaz"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(pool, strict_schema("karpenter.sh/v1", "NodePool"))


def test_every_cel_rule_on_the_objects_is_evaluated_and_can_fail(recording):
    """The rules that apply to what the program sends do run, and each kind of object breaks one
    when it should: a static NodePool limited by CPU (replicas allow only a node limit), an
    EC2NodeClass tagging what Karpenter reserves, an AMI alias of an unknown family."""
    pool = recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool").inputs
    node_class = recording.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "trn2-nodeclass").inputs
    assert len(cel_rules(crd_schema("karpenter.sh/v1", "NodePool"), pool)) >= 15
    assert len(cel_rules(crd_schema("karpenter.k8s.aws/v1", "EC2NodeClass"), node_class)) >= 30
    limited = copy.deepcopy(pool)
    limited["spec"]["limits"] = {"cpu": "1000"}
    assert failed_cel_rules(limited) == ["self.spec: only 'limits.nodes' is supported on static NodePools"]
    tagged = copy.deepcopy(node_class)
    tagged["spec"]["tags"]["karpenter.sh/nodepool"] = "mine"
    assert failed_cel_rules(tagged) == ["self.spec.tags: tag contains a restricted tag matching karpenter.sh/nodepool"]
    aliased = copy.deepcopy(node_class)
    aliased["spec"]["amiSelectorTerms"] = [{"alias": f"ubuntu@{AMI_RELEASE.tag}"}]
    assert [f.split(":")[0] for f in failed_cel_rules(aliased)] == ["self.spec.amiSelectorTerms[0].alias"]


def test_the_vendored_crds_are_the_tag_they_say():
    """tests/data/karpenter-crds-v1.14.1 holds the CRDs as published at v1.14.1: their own
    annotation names the controller-gen version of that release, and the static-capacity field the
    program relies on (spec.replicas) is in the NodePool schema."""
    for filename in CRD_FILES.values():
        crd = yaml.safe_load((CRD_DIR / filename).read_text())
        assert crd["metadata"]["annotations"]["controller-gen.kubebuilder.io/version"]
    assert "replicas" in crd_schema("karpenter.sh/v1", "NodePool")["properties"]["spec"]["properties"]


def test_core_validation_rejects_a_bad_object(recording):
    template = copy.deepcopy(recording.of_type("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate")[0].inputs)
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["cuont"] = 1
    for version in KUBERNETES_VERSIONS:
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(template, version, strict=True)
