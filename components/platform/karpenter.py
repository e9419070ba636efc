"""Karpenter: CRDs, controller IAM, node role and access entry, interruption queue, Helm release."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from stackconfig.versions import KARPENTER, KARPENTER_CHART, KARPENTER_CRD_CHART

from ..iam import ec2_node_role
from ..identity import WorkloadIdentity, WorkloadRole, WorkloadRoleArgs
from .interruption_queue import InterruptionQueue, InterruptionQueueArgs
from .karpenter_policy import controller_policy

# A fixed release name keeps the service account name ("karpenter": the chart names it after the
# release fullname, charts/karpenter/templates/_helpers.tpl) stable for the role binding (docs/facts.md, "Karpenter v1").
RELEASE_NAME = "karpenter"
CRD_RELEASE_NAME = "karpenter-crd"
NAMESPACE = "kube-system"


@dataclass(frozen=True)
class KarpenterArgs:
    cluster_name: str
    region: str
    identity: WorkloadIdentity
    system_node_selector: dict[str, str]
    """Keeps the controller on the on-demand system nodes, never on nodes it manages."""
    provider: k8s.Provider
    cluster_ready: list[pulumi.Resource]
    tags: dict[str, str]


class Karpenter(pulumi.ComponentResource):
    node_role_name: pulumi.Output[str]
    release: k8s.helm.v3.Release
    crds: k8s.helm.v3.Release
    """NodePools and EC2NodeClasses depend on both releases: created after, deleted before."""

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:karpenter:Karpenter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self))

        node_role = ec2_node_role(f"{name}-node", self, args.tags)
        access = aws.eks.AccessEntry(f"{name}-node", cluster_name=args.cluster_name, principal_arn=node_role.arn,
                                     type="EC2_LINUX", opts=pulumi.ResourceOptions(parent=self, depends_on=args.cluster_ready))
        queue = InterruptionQueue(f"{name}-interruption", InterruptionQueueArgs(queue_name=args.cluster_name), opts=child)
        controller = WorkloadRole(f"{name}-controller", WorkloadRoleArgs(
            identity=args.identity,
            namespace=NAMESPACE,
            service_account=RELEASE_NAME,
            policy=pulumi.Output.all(identity.account_id, partition.partition, node_role.arn, queue.arn).apply(
                lambda v: controller_policy(cluster_name=args.cluster_name, region=args.region, account_id=v[0],
                                            partition=v[1], node_role_arn=v[2], queue_arn=v[3])),
            tags=args.tags,
        ), opts=child)

        # Helm installs a chart's crds/ on first install only and never upgrades them; the
        # upgrade guide recommends the karpenter-crd chart, same version, for CRDs
        # (aws/karpenter-provider-aws release-v1.14.1:website/content/en/v1.14/upgrading/upgrade-guide.md).
        self.crds = k8s.helm.v3.Release(
            f"{name}-crd",
            name=CRD_RELEASE_NAME,
            namespace=NAMESPACE,
            chart=KARPENTER_CRD_CHART,
            version=KARPENTER.version,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.cluster_ready),
        )
        self.release = k8s.helm.v3.Release(
            name,
            name=RELEASE_NAME,
            namespace=NAMESPACE,
            chart=KARPENTER_CHART,
            version=KARPENTER.version,
            # The CRDs belong to the release above; two owners would fail on ownership metadata.
            skip_crds=True,
            values={
                "settings": {
                    "clusterName": args.cluster_name,
                    "interruptionQueue": queue.name,
                    # Static NodePools (spec.replicas) are how trn2 nodes come up at all: Karpenter
                    # does not provision for pods with DRA claims (docs/facts.md, "Karpenter and DRA").
                    # settings.featureGates.staticCapacity: alpha, off by default, unchanged in 1.15.0
                    # (aws/karpenter-provider-aws@d77d1a3 charts/karpenter/values.yaml, image tag 1.15.0).
                    "featureGates": {"staticCapacity": True},
                },
                "serviceAccount": {"annotations": controller.annotations},
                "nodeSelector": args.system_node_selector,
                "controller": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}},
            },
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[*args.cluster_ready, self.crds, access, controller, queue]),
        )
        self.node_role_name = node_role.name
        self.register_outputs({"nodeRoleName": self.node_role_name, "interruptionQueue": queue.name,
                               "controllerRoleArn": controller.arn})
