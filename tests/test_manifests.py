"""Every Kubernetes object the program sends validates against its schema.

Core and resource.k8s.io/v1 objects: Kubernetes 1.34 schemas, strict (kubernetes-validate).
Karpenter objects: the v1.14.1 CRD schemas in ../shared/schemas, made strict here (unknown
fields rejected), since the API server would silently prune a misspelled field.
"""
from __future__ import annotations

import copy
from functools import lru_cache

import jsonschema
import kubernetes_validate
import pytest
import yaml

from offline.stacks import ROOT

KUBERNETES_VERSION = "1.34.0"
CRD_DIR = ROOT.parent / "shared" / "schemas" / "karpenter-v1.14.1"
CRD_FILES = {
    ("karpenter.sh/v1", "NodePool"): "karpenter.sh_nodepools.yaml",
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): "karpenter.k8s.aws_ec2nodeclasses.yaml",
}


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
    path = CRD_DIR / CRD_FILES[(api_version, kind)]
    crd = yaml.safe_load(path.read_text())
    version = api_version.split("/")[1]
    (entry,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = strict(copy.deepcopy(entry["schema"]["openAPIV3Schema"]))
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def test_every_object_validates(recording):
    objects = [r.inputs for r in recording.kubernetes_objects()]
    assert objects
    checked = 0
    for obj in objects:
        key = (obj["apiVersion"], obj["kind"])
        if key in CRD_FILES:
            if not CRD_DIR.exists():
                continue
            jsonschema.validate(obj, crd_schema(*key))
        else:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        checked += 1
    assert checked == len(objects) or not CRD_DIR.exists()


@pytest.mark.skipif(not CRD_DIR.exists(), reason=f"Karpenter CRD schemas not found at {CRD_DIR} (CI always has them)")
def test_karpenter_objects_are_checked_against_the_crds(recording):
    kinds = {(o.inputs["apiVersion"], o.inputs["kind"]) for o in recording.kubernetes_objects()}
    assert set(CRD_FILES) <= kinds
    # The strict schema must catch a misspelled field, or the check above proves nothing.
    pool = copy.deepcopy(recording.one("kubernetes:karpenter.sh/v1:NodePool").inputs)
    pool["spec"]["replicaz"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(pool, crd_schema("karpenter.sh/v1", "NodePool"))


def test_core_validation_rejects_a_bad_object(recording):
    template = copy.deepcopy(recording.of_type("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate")[0].inputs)
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["cuont"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(template, KUBERNETES_VERSION, strict=True)
