"""The trn2 EC2NodeClass and a static NodePool sized to serve every variant at once."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackconfig.model import CapacitySettings

from ..handle import PAIRING_LABEL, ClusterHandle
from ..nodeclass import ec2_node_class_spec


def node_pool_spec(node_class_name: str, capacity: CapacitySettings, node_count: int, labels: dict[str, str],
                   taint: dict[str, str]) -> dict:
    return {
        # Static capacity: Karpenter keeps exactly this many nodes, whatever the pods ask for.
        "replicas": node_count,
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class_name},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [capacity.instance_type]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity.capacity_type]},
                ],
                "taints": [taint],
                # Replacing a node throws away its weight cache; nodes live as long as the stack.
                "expireAfter": "Never",
            },
        },
        # Above replicas only by the headroom for replacing drifted nodes (CapacitySettings).
        "limits": {"nodes": node_count + capacity.replacement_headroom_nodes},
        "disruption": {"consolidateAfter": "Never"},
    }


@dataclass(frozen=True)
class Trn2NodesArgs:
    cluster: ClusterHandle
    """The platform: node role, discovery tag, provider; its Karpenter must outlive these objects
    on destroy so its finalizers can terminate the instances (the handle's readiness)."""
    name: str
    """The EC2NodeClass and NodePool name: cluster-scoped, so derived from the pairing."""
    pairing: str
    """The pairing's slug, on its nodes as the PAIRING_LABEL."""
    capacity: CapacitySettings
    node_count: int
    tags: dict[str, str]


class Trn2Nodes(pulumi.ComponentResource):
    node_pool: k8s.apiextensions.CustomResource
    node_labels: dict[str, str]
    """What the pairing's pods select: its own trn2 nodes and no other pairing's."""

    def __init__(self, name: str, args: Trn2NodesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:capacity:Trn2Nodes", name, None, opts)
        cluster = args.cluster
        self.node_labels = {**cluster.trn2_node_label, PAIRING_LABEL: args.pairing}
        node_class = k8s.apiextensions.CustomResource(
            f"{name}-nodeclass",
            api_version="karpenter.k8s.aws/v1",
            kind="EC2NodeClass",
            metadata={"name": args.name},
            spec=ec2_node_class_spec(cluster.name, cluster.node_role_name, args.capacity.ami_alias, args.capacity.root_volume_gib,
                                     args.tags, args.capacity.reservation_ids),
            opts=cluster.k8s_options(self),
        )
        self.node_pool = k8s.apiextensions.CustomResource(
            f"{name}-nodepool",
            api_version="karpenter.sh/v1",
            kind="NodePool",
            metadata={"name": args.name},
            spec=node_pool_spec(args.name, args.capacity, args.node_count, self.node_labels, cluster.neuron_taint),
            opts=cluster.k8s_options(self, depends_on=[node_class]),
        )
        self.register_outputs({"nodePool": args.name, "nodes": args.node_count})
