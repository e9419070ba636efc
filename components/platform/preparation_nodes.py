"""Where models are prepared (components/pairing/preparation.py): a NodePool Karpenter fills on
demand with CPU instances that have local NVMe and fast networking, and empties when the Jobs end.
Never a trn2 node: preparing is downloading, hashing, rescaling and uploading."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from ..handle import PREPARATION_NODE_LABEL, PREPARATION_TAINT
from ..nodeclass import ec2_node_class_spec

NODE_POOL_NAME = "model-prep"
MIN_NETWORK_MBPS = 25_000
"""At least 25 Gbps: the hub and S3 are the bottleneck of a preparation, and 810 GB (Llama-3.1-405B
in BF16) at 25 Gbps is about 4.5 minutes of wire time each way."""
MIN_LOCAL_NVME_GIB = 100
"""Local NVMe at all: the instance store, as RAID0, is kubelet's ephemeral storage, which holds the
files in flight (their downloads and rescaled copies). How much is the Job's own ephemeral-storage
request, a bound far below this (stackconfig/store.py scratch_bytes; tests/test_capacity.py)."""
CPU_LIMIT = "512"
"""At most this many vCPU of preparation nodes at once (several Jobs of a few large nodes)."""


def node_pool_spec(node_class_name: str) -> dict:
    """Plain data. Karpenter picks, among these, an instance whose NVMe holds the Job's
    ephemeral-storage request (Karpenter well-known labels: instance-local-nvme in GiB,
    instance-network-bandwidth in Mbps; aws/karpenter-provider-aws v1.14.1 pkg/apis/v1/labels.go)."""
    return {
        "template": {
            "metadata": {"labels": dict(PREPARATION_NODE_LABEL)},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class_name},
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r", "i"]},
                    {"key": "karpenter.k8s.aws/instance-local-nvme", "operator": "Gt", "values": [str(MIN_LOCAL_NVME_GIB - 1)]},
                    {"key": "karpenter.k8s.aws/instance-network-bandwidth", "operator": "Gt", "values": [str(MIN_NETWORK_MBPS - 1)]},
                ],
                "taints": [dict(PREPARATION_TAINT)],
                "expireAfter": "24h",
            },
        },
        "limits": {"cpu": CPU_LIMIT},
        # Gone once its Jobs are: nothing else tolerates the taint.
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
    }


@dataclass(frozen=True)
class PreparationNodesArgs:
    cluster_name: pulumi.Input[str]
    node_role_name: pulumi.Input[str]
    ami_alias: str
    provider: k8s.Provider
    ready: list[pulumi.Resource]
    """Karpenter (its CRDs and controller): these objects go after it and before it on destroy."""
    tags: dict[str, str]


class PreparationNodes(pulumi.ComponentResource):
    node_pool: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: PreparationNodesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:capacity:PreparationNodes", name, None, opts)
        node_class = k8s.apiextensions.CustomResource(
            f"{name}-nodeclass",
            api_version="karpenter.k8s.aws/v1",
            kind="EC2NodeClass",
            metadata={"name": NODE_POOL_NAME},
            spec=ec2_node_class_spec(args.cluster_name, args.node_role_name, args.ami_alias, 100, args.tags),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.ready),
        )
        self.node_pool = k8s.apiextensions.CustomResource(
            f"{name}-nodepool",
            api_version="karpenter.sh/v1",
            kind="NodePool",
            metadata={"name": NODE_POOL_NAME},
            spec=node_pool_spec(NODE_POOL_NAME),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[*args.ready, node_class]),
        )
        self.register_outputs({"nodePool": NODE_POOL_NAME})
