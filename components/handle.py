"""The cluster handle: everything a pairing needs from the cluster it runs on, as one typed object.

A platform builds it (components/platform/__init__.py) or a shared pairing reads it from the platform
stack's outputs (`ClusterHandle.from_platform_stack`); pairing components take the handle
instead of loose fields, and "wait for the cluster" is spelled once, `k8s_options`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from stackconfig import PlatformSpec

from .identity import WorkloadIdentity

SYSTEM_NODE_LABEL = {"sd-trn2/node-role": "system"}
"""On-demand nodes Karpenter never manages: the controller and the benchmark run there."""
TRN2_NODE_LABEL = {"sd-trn2/node-role": "trn2"}
PAIRING_LABEL = "sd-trn2/pairing"
"""Carried by a pairing's trn2 nodes; its pods select it, so pairings never share a node."""
PREPARATION_NODE_LABEL = {"sd-trn2/node-role": "model-prep"}
"""Nodes Karpenter launches for model preparation Jobs (components/platform/preparation_nodes.py)."""
PREPARATION_TAINT = {"key": "sd-trn2/model-prep", "effect": "NoSchedule"}
PREPARATION_TOLERATION = {"key": "sd-trn2/model-prep", "operator": "Exists", "effect": "NoSchedule"}
NEURON_TAINT = {"key": "aws.amazon.com/neuron", "effect": "NoSchedule"}
NEURON_TOLERATION = {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True)
class ClusterHandle:
    name: pulumi.Input[str]
    """The EKS cluster's name (the discovery tag value of its subnets and security group)."""
    region: str
    kubeconfig: pulumi.Input[str]
    """A secret; the Kubernetes provider is built from it."""
    provider: k8s.Provider
    identity: WorkloadIdentity
    """How a pairing binds an IAM role to one of its service accounts."""
    node_role_name: pulumi.Input[str]
    """Karpenter's node role: every pairing's EC2NodeClass launches nodes with it."""
    model_bucket: pulumi.Input[str]
    """The platform's model store, mounted by the Mountpoint driver the platform runs."""
    model_bucket_arn: pulumi.Input[str]
    versions: dict[str, Any] = field(default_factory=dict)
    """What the platform runs (Kubernetes, support type, Karpenter, the Neuron chart, each EKS
    add-on's build), exported as `versions`; empty when the platform is another stack."""
    ready: tuple[pulumi.Resource, ...] = ()
    """What pairing objects wait for (and are deleted before): the platform's resources when
    one program builds both; nothing when the platform is another, already deployed stack."""
    system_node_selector: dict[str, str] = field(default_factory=lambda: dict(SYSTEM_NODE_LABEL))
    trn2_node_label: dict[str, str] = field(default_factory=lambda: dict(TRN2_NODE_LABEL))
    neuron_taint: dict[str, str] = field(default_factory=lambda: dict(NEURON_TAINT))
    neuron_toleration: dict[str, str] = field(default_factory=lambda: dict(NEURON_TOLERATION))
    preparation_node_selector: dict[str, str] = field(default_factory=lambda: dict(PREPARATION_NODE_LABEL))
    preparation_toleration: dict[str, str] = field(default_factory=lambda: dict(PREPARATION_TOLERATION))

    def k8s_options(self, parent: pulumi.Resource, depends_on: list[pulumi.Resource] | None = None,
                    **options: Any) -> pulumi.ResourceOptions:
        """Options for a Kubernetes object of a pairing: through the cluster's provider, after
        the platform is ready (and before it on destroy), after `depends_on`."""
        return pulumi.ResourceOptions(parent=parent, provider=self.provider,
                                      depends_on=[*self.ready, *(depends_on or [])], **options)

    def outputs(self) -> dict[str, Any]:
        """The handle as stack outputs: what `from_platform_stack` reads back."""
        identity = self.identity
        return {
            "clusterName": self.name, "region": self.region, "kubeconfig": pulumi.Output.secret(self.kubeconfig),
            "workloadIdentity": identity.mechanism, "oidcProviderArn": identity.oidc_provider_arn or "",
            "oidcIssuer": identity.oidc_issuer or "", "karpenterNodeRoleName": self.node_role_name,
            "modelBucket": self.model_bucket, "modelBucketArn": self.model_bucket_arn,
            **({"versions": self.versions} if self.versions else {}),
        }

    @classmethod
    def from_platform_stack(cls, reference: str, platform: PlatformSpec) -> ClusterHandle:
        """The handle of a deployed platform stack. Plain facts (region, identity mechanism)
        come from its parsed stack file; computed ones from its outputs."""
        stack = pulumi.StackReference(reference)

        def present(value: Any, name: str) -> Any:
            if value is None:
                raise pulumi.RunError(f"platform stack {reference} has no output {name!r}: deploy it first "
                                      f"(make up STACK={reference.rsplit('/', 1)[-1]})")
            return value

        def output(name: str) -> pulumi.Output[Any]:
            return stack.get_output(name).apply(lambda value: present(value, name))

        kubeconfig = output("kubeconfig")
        irsa = platform.cluster.workload_identity == "irsa"
        return cls(
            name=output("clusterName"),
            region=platform.region,
            kubeconfig=kubeconfig,
            provider=k8s.Provider("platform-k8s", kubeconfig=kubeconfig, enable_server_side_apply=True),
            identity=WorkloadIdentity(
                mechanism=platform.cluster.workload_identity,
                cluster_name=output("clusterName"),
                oidc_provider_arn=output("oidcProviderArn") if irsa else None,
                oidc_issuer=output("oidcIssuer") if irsa else None,
            ),
            node_role_name=output("karpenterNodeRoleName"),
            model_bucket=output("modelBucket"),
            model_bucket_arn=output("modelBucketArn"),
        )
