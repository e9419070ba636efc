"""One platform, many pairings: a shared pairing creates only its own resources, reads the cluster
from the platform's outputs, and never collides with another pairing on the same platform."""
from __future__ import annotations

import functools
import json

import pytest
import yaml

from offline import stacks as offline_stacks
from offline.engine import Recording
from offline.stacks import load_stack, run_stack
from stackconfig import ConfigError, PlatformSpec

from .conftest import PLATFORMS, SHARED, recorded
from .helpers import plan_copy, project_copy

PLATFORM = "organization/sd-trn2/platform"
# Types only a platform creates.
PLATFORM_TYPES = {"aws:ec2/vpc:Vpc", "eks:index:Cluster", "eks:index:ManagedNodeGroup", "kubernetes:helm.sh/v3:Release",
                  "aws:eks/addon:Addon", "aws:sqs/queue:Queue", "aws:s3/bucket:Bucket", "sdtrn2:karpenter:Karpenter",
                  "sdtrn2:neuron:NeuronDra", "sdtrn2:storage:ModelStore", "sdtrn2:network:Network", "sdtrn2:cluster:Cluster"}
# Physical names AWS resources are given (auto-named ones get a unique suffix from the provider).
AWS_NAME_INPUTS = ("name", "dashboardName", "bucket", "bucketPrefix", "clusterName")


@functools.lru_cache(maxsize=None)
def on_platform(stack: str) -> Recording:
    """A pairing stack file run as a pairing of the shared platform."""
    return run_stack(load_stack(stack, {"sd-trn2:platform": PLATFORM}))


PAIRINGS = ("qwen3-32b-qwen3-1.7b", "qwen3-32b-qwen3-0.6b", "llama3.1-8b-llama3.2-1b")


def kubernetes_names(recording: Recording) -> set[tuple]:
    return {(o.inputs["apiVersion"], o.inputs["kind"], o.inputs["metadata"].get("namespace"), o.inputs["metadata"]["name"])
            for o in recording.kubernetes_objects()}


def aws_names(recording: Recording) -> set[tuple]:
    return {(r.type, key, r.inputs[key]) for r in recording.resources
            if r.type.startswith("aws:") and r.custom and not r.read for key in AWS_NAME_INPUTS if r.inputs.get(key)}


def test_the_shipped_stacks_include_a_platform_and_a_shared_pairing():
    assert PLATFORMS == ["platform"] and SHARED
    assert isinstance(load_stack("platform").spec(), PlatformSpec)


@pytest.mark.parametrize("stack", sorted(set(PAIRINGS) | set(SHARED)))
def test_a_shared_pairing_creates_no_platform_resources(stack):
    recording = on_platform(stack) if stack in PAIRINGS else recorded(stack)
    types = {r.type for r in recording.resources}
    assert not types & PLATFORM_TYPES, types & PLATFORM_TYPES
    (reference,) = [r for r in recording.resources if r.type == "pulumi:pulumi:StackReference"]
    assert reference.read and reference.inputs["name"] == PLATFORM


def test_pairings_on_one_platform_never_share_a_name():
    recordings = [on_platform(stack) for stack in PAIRINGS]
    for names in (kubernetes_names, aws_names):
        seen: dict[tuple, int] = {}
        for index, recording in enumerate(recordings):
            found = names(recording)
            assert found, names.__name__
            for name in found:
                assert seen.setdefault(name, index) == index, name
    namespaces = {load_stack(s, {"sd-trn2:platform": PLATFORM}).spec().benchmark.metrics_namespace for s in PAIRINGS}
    assert len(namespaces) == len(PAIRINGS)


def test_two_pairings_select_only_their_own_nodes():
    selectors = []
    for stack in PAIRINGS[:2]:
        recording = on_platform(stack)
        pool = recording.one("kubernetes:karpenter.sh/v1:NodePool", "trn2-nodepool").inputs["spec"]
        labels = pool["template"]["metadata"]["labels"]
        for deployment in recording.of_type("kubernetes:apps/v1:Deployment"):
            selector = deployment.inputs["spec"]["template"]["spec"]["nodeSelector"]
            assert selector == labels
        selectors.append(json.dumps(labels, sort_keys=True))
    assert selectors[0] != selectors[1]


def test_a_shared_pairing_reads_the_cluster_from_the_platform_outputs():
    platform = recorded("platform").raw_outputs
    recording = on_platform("qwen3-32b-qwen3-1.7b")
    node_class = recording.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "trn2-nodeclass").inputs["spec"]
    assert node_class["role"] == platform["karpenterNodeRoleName"]
    assert node_class["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": platform["clusterName"]}}]
    volumes = recording.of_type("kubernetes:core/v1:PersistentVolume")
    assert len(volumes) == 6  # two prepared models, and each of two servers' committed and staging sets
    for volume in volumes:
        assert volume.inputs["spec"]["csi"]["volumeAttributes"]["bucketName"] == platform["modelBucket"]
    # The pairing's own identities (benchmark, model preparation, servers' publishers) trust the platform's issuer.
    components = recording.of_type("sdtrn2:iam:WorkloadRole")
    assert len(components) == 3
    for component in components:
        role = next(r for r in recording.of_type("aws:iam/role:Role") if r.parent == component.urn)
        (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        assert set(statement["Condition"]["StringEquals"]) == {f"{platform['oidcIssuer']}:sub", f"{platform['oidcIssuer']}:aud"}
        assert statement["Principal"] == {"Federated": platform["oidcProviderArn"]}
    provider = recording.one("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "[secret]"


def test_a_pairing_waits_for_nothing_of_the_platform_it_does_not_own():
    """The platform is another stack: nothing in the pairing depends on platform resources."""
    recording = on_platform("qwen3-32b-qwen3-1.7b")
    urns = {r.urn for r in recording.resources}
    for resource in recording.resources:
        assert set(resource.dependencies) <= urns, resource.urn


def test_an_undeployed_platform_is_named(monkeypatch):
    monkeypatch.setattr(offline_stacks, "_platform_outputs", lambda stack: offline_stacks.StackOutputs({}, []))
    with pytest.raises(Exception) as caught:
        run_stack(load_stack("qwen3-32b-qwen3-0.6b", {"sd-trn2:platform": PLATFORM}))
    assert "deploy it first" in str(caught.value) and "make up STACK=platform" in str(caught.value)


@pytest.mark.parametrize("overrides, key, words", [
    ({"aws:region": "ap-south-2"}, "aws:region", "differs from the platform"),
    ({"sd-trn2:cluster": {"systemNodeCount": 3}}, "cluster", "belongs to the platform stack"),
    ({"sd-trn2:modelStore": {"retainOnDestroy": True}}, "modelStore", "belongs to the platform stack"),
    ({"sd-trn2:platform": "organization/other-project/platform"}, "platform", "a platform must be a stack of 'sd-trn2'"),
    ({"sd-trn2:platform": "organization/sd-trn2/no-such-stack"}, "platform", "no stack file"),
    ({"sd-trn2:platform": "organization/sd-trn2/qwen3-32b-qwen3-1.7b"}, "platform", "is a pairing stack"),
    ({"sd-trn2:platform": "platform"}, "platform", "<organization>/<project>/<stack>"),
    ({"sd-trn2:capacity": {"instanceType": "trn2.3xlarge"}}, "capacity.instanceType", "zones were chosen for"),
    ({"sd-trn2:capacity": {"capacityType": "reserved", "reservationIds": ["cr-0123456789abcdef0"]}},
     "capacity.reservationIds", "cluster.availabilityZones"),
])
def test_a_pairing_that_does_not_fit_its_platform_is_refused_by_key(overrides, key, words):
    with pytest.raises(ConfigError) as caught:
        load_stack("qwen3-32b-qwen3-1.7b", {"sd-trn2:platform": PLATFORM, **overrides}).spec()
    problems = dict(caught.value.problems)
    assert words in problems.get(key, ""), problems


def test_a_platform_refuses_pairing_keys():
    with pytest.raises(ConfigError) as caught:
        load_stack("platform", {"sd-trn2:variants": [], "sd-trn2:capacity": {"instanceType": "trn2.48xlarge", "amiAlias": "x"}}).spec()
    problems = dict(caught.value.problems)
    assert "unknown key" in problems["variants"] and "unknown key" in problems["capacity.amiAlias"]


def test_a_pod_identity_platform_gives_its_pairings_associations(tmp_path):
    """The program reads the platform's stack file from disk, so this plans a copy of the project
    whose platform uses Pod Identity (no test writes into stacks/)."""
    project_copy(tmp_path)
    platform_file = tmp_path / "stacks" / "Pulumi.platform.yaml"
    config = yaml.safe_load(platform_file.read_text())
    config["config"]["sd-trn2:cluster"] = {"workloadIdentity": "pod-identity"}
    platform_file.write_text(yaml.safe_dump(config))
    stack = "qwen3-32b-qwen3-1.7b-shared"
    result = plan_copy(tmp_path, stack, tmp_path / "plan")
    assert result.returncode == 0, result.stderr
    resources = json.loads((tmp_path / "plan" / stack / "resources.json").read_text())
    associations = [r for r in resources if r["type"] == "aws:eks/podIdentityAssociation:PodIdentityAssociation"]
    spec = load_stack(stack).spec()
    assert sorted((a["inputs"]["namespace"], a["inputs"]["serviceAccount"]) for a in associations) == [
        (spec.namespace, account) for account in ("llmperf", "model-prep", "vllm")]
    for account in [r for r in resources if r["type"] == "kubernetes:core/v1:ServiceAccount"]:
        assert "eks.amazonaws.com/role-arn" not in account["inputs"]["metadata"].get("annotations", {})
    for role in [r for r in resources if r["type"] == "aws:iam/role:Role"]:
        assert "pods.eks.amazonaws.com" in role["inputs"]["assumeRolePolicy"] and "Federated" not in role["inputs"]["assumeRolePolicy"]
