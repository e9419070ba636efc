"""Upgrading a running stack to the next Kubernetes minor (1.34 to 1.35, and 1.35 to 1.36) is one
config change and one `pulumi up`.

The plan of the same stack at both versions differs only where an upgrade must: the control
plane's version, the system node group's version and AMI release, and the add-on builds, and
nothing that would replace a resource (same URNs). The order is the dependency graph's: the
control plane first (kube-proxy and the VPC CNI are its children), then the system node group,
then the add-ons that need nodes, then Karpenter and the trn2 NodePool, whose nodes drift to the
new AMI. The node group names its version itself: pulumi-eks copies the cluster's version into a
managed node group only when it names neither a version nor a launch template (pulumi/pulumi-eks
nodejs/eks/nodes/nodegroup.ts, `if (!args.version && !args.launchTemplate)`, at v4.3.0 and at
7bf0c1b after it), and the system nodes' launch template would otherwise leave them on the old minor.
1.35 to 1.36 is the move EKS makes by itself when 1.35 leaves standard support under supportType
STANDARD: the stack file can follow it with the same one-line change.
"""
from __future__ import annotations

import pytest

from offline.stacks import load_stack, run_stack

STACK = "qwen3-32b-qwen3-1.7b"


UPGRADES = [("1.34", "1.35"), ("1.35", "1.36")]


def plan_at(version: str):
    return run_stack(load_stack(STACK, {"sd-trn2:cluster": {"kubernetesVersion": version}}))


@pytest.fixture(scope="module", params=UPGRADES, ids=[f"{a}-to-{b}" for a, b in UPGRADES])
def upgrade(request):
    return request.param


@pytest.fixture(scope="module")
def plans(upgrade):
    return tuple(plan_at(version) for version in upgrade)


def test_the_upgrade_changes_the_control_plane_version_and_the_addon_builds_only(plans, upgrade):
    before, after = ({r.urn: r for r in plan.resources} for plan in plans)
    assert sorted(before) == sorted(after)  # nothing replaced, nothing new
    changed = {urn.rsplit("::", 1)[-1]: (before[urn].inputs, after[urn].inputs) for urn in before
               if before[urn].inputs != after[urn].inputs}
    from stackconfig.versions import EKS_ADDONS

    from .test_cluster import eks_default

    def build(addon: str, version: str) -> str:
        return EKS_ADDONS[version][addon].build or eks_default(addon, version)

    old, new = upgrade
    moved = {a for a in EKS_ADDONS[new] if build(a, old) != build(a, new)}
    resource_of = {"coredns": "cluster-coredns", "amazon-cloudwatch-observability": "container-insights",
                   "aws-mountpoint-s3-csi-driver": "model-store-csi", "vpc-cni": "cluster-eks", "kube-proxy": "cluster-eks"}
    assert {"coredns", "kube-proxy", "vpc-cni", "aws-mountpoint-s3-csi-driver"} <= moved
    assert sorted(changed) == sorted({"cluster-eks", "cluster-system"}
                                     | {resource_of[a] for a in moved if a != "eks-pod-identity-agent"})
    cluster_before, cluster_after = changed["cluster-eks"]
    assert (cluster_before["version"], cluster_after["version"]) == upgrade
    assert {k for k in cluster_after if cluster_after[k] != cluster_before[k]} == {"version", "vpcCniOptions", "kubeProxyAddonOptions"}
    nodes_before, nodes_after = changed["cluster-system"]
    assert {k for k in nodes_after if nodes_after[k] != nodes_before[k]} == {"version", "releaseVersion"}
    for name in set(changed) - {"cluster-eks", "cluster-system"}:
        inputs_before, inputs_after = changed[name]
        assert {k for k in inputs_after if inputs_after[k] != inputs_before[k]} == {"addonVersion"}, name
    # The trn2 capacity is untouched: its AMI alias serves both versions, so the nodes drift only
    # because Karpenter resolves the alias for the cluster's new version.
    pool_before, pool_after = (p.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "trn2-nodeclass").inputs for p in plans)
    assert pool_before == pool_after


def test_the_upgrade_runs_control_plane_then_system_nodes_then_addons_then_karpenter_and_its_nodes(plans):
    _, after = plans
    cluster = after.one("eks:index:Cluster")
    nodes = after.one("eks:index:ManagedNodeGroup")
    assert nodes.inputs["cluster"] == {"resourceUrn": cluster.urn}  # the node group is built from the cluster's outputs
    for addon in after.of_type("aws:eks/addon:Addon"):
        assert after.depends_on(addon, cluster) and after.depends_on(addon, nodes), addon.name
    karpenter = after.one("kubernetes:helm.sh/v3:Release", "karpenter")
    assert after.depends_on(karpenter, nodes)
    for kind in ("kubernetes:karpenter.sh/v1:NodePool", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"):
        for node_object in after.of_type(kind):  # the trn2 nodes and the preparation nodes
            assert after.depends_on(node_object, karpenter), node_object.name


def test_the_system_nodes_follow_the_control_plane_and_its_ami_release(plans, upgrade):
    """The system node group names the cluster's version and the AMI release pinned for it, so the
    upgrade moves its nodes too (EKS replaces them one by one)."""
    from stackconfig.versions import AMI_RELEASE

    for plan, version in zip(plans, upgrade):
        nodes = plan.one("eks:index:ManagedNodeGroup").inputs
        assert (nodes["version"], nodes["releaseVersion"]) == (version, AMI_RELEASE.release_version(version))
        assert nodes["releaseVersion"].startswith(f"{version}.") and nodes["releaseVersion"].endswith(AMI_RELEASE.tag[1:])
