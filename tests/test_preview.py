"""`pulumi preview` shows every Kubernetes object whole: specs are plain data with Outputs only at
the leaves, so at preview only leaves that depend on a value the cloud computes at create are
unknown, and names that must be stable (the benchmark Job's) come from plain config."""
from __future__ import annotations

import functools

import pytest

from offline.engine import UNKNOWN_PLACEHOLDER, Recording
from offline.stacks import load_stack, run_stack, stack_names

from .conftest import recorded

# (kind, path) -> the cloud value it waits for. Anything else unknown at preview is a spec built
# from computed values (inside an apply) and fails the test.
CLOUD_LEAVES = {
    ("PersistentVolume", ".spec.csi.volumeAttributes.bucketName"): "the bucket name S3 is given at create (bucket_prefix)",
    ("PersistentVolume", ".spec.csi.volumeHandle"): "derived from the bucket name",
    ("Job", ".spec.template.spec.containers[name=llmperf].env[name=RESULTS_BUCKET].value"): "the bucket name",
    ("CronJob", ".spec.jobTemplate.spec.template.spec.containers[name=llmperf].env[name=RESULTS_BUCKET].value"): "the bucket name",
    ("ServiceAccount", ".metadata.annotations.eks.amazonaws.com/role-arn"): "the IAM role's ARN, known once created",
    ("Job", ".spec.template.spec.containers[name=prepare].env[name=BUCKET].value"): "the bucket name",
    ("Deployment", ".spec.template.spec.initContainers[name=publisher].env[name=BUCKET].value"): "the bucket name",
}


@functools.lru_cache(maxsize=None)
def previewed(stack: str) -> Recording:
    return run_stack(load_stack(stack), preview=True)


def unknown_leaves(value, path: str = ""):
    """Paths of unknown values; list items with a name are addressed by it, not by position."""
    if value == UNKNOWN_PLACEHOLDER:
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from unknown_leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            label = f"name={item['name']}" if isinstance(item, dict) and isinstance(item.get("name"), str) else index
            yield from unknown_leaves(item, f"{path}[{label}]")


@pytest.mark.parametrize("stack", stack_names())
def test_every_kubernetes_spec_is_known_but_for_cloud_leaves(stack):
    recording = previewed(stack)
    for obj in recording.kubernetes_objects():
        kind = obj.inputs["kind"]
        for path in unknown_leaves(obj.inputs):
            assert (kind, path) in CLOUD_LEAVES, (obj.urn, path)
        body = obj.inputs.get("spec", obj.inputs.get("data", obj.inputs.get("stringData")))
        assert body != UNKNOWN_PLACEHOLDER, obj.urn


@pytest.mark.parametrize("stack", [s for s in stack_names() if s != "platform"])
def test_preview_and_up_agree_on_every_known_value_and_the_job_name(stack):
    preview, up = previewed(stack), recorded(stack)
    jobs = [r.one("kubernetes:batch/v1:Job", "benchmark-run").inputs["metadata"]["name"] for r in (preview, up)]
    assert jobs[0] == jobs[1] != UNKNOWN_PLACEHOLDER
    by_urn = {r.urn: r for r in up.resources}
    for obj in preview.kubernetes_objects():
        assert obj.urn in by_urn
        assert known_parts(obj.inputs) == known_parts(by_urn[obj.urn].inputs, like=obj.inputs), obj.urn


def known_parts(value, like=None):
    """`value` with every leaf that is unknown in `like` (the preview) dropped."""
    like = value if like is None else like
    if like == UNKNOWN_PLACEHOLDER:
        return None
    if isinstance(value, dict):
        return {k: known_parts(v, like.get(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [known_parts(v, other) for v, other in zip(value, like)]
    return value


def test_the_check_sees_a_spec_built_inside_an_apply():
    """Guards the test above: an object whose spec came from an apply is wholly unknown."""
    assert list(unknown_leaves({"spec": UNKNOWN_PLACEHOLDER})) == [".spec"]
    assert (("EC2NodeClass", ".spec")) not in CLOUD_LEAVES
