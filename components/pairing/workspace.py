"""A pairing's namespace: its servers, claims, volume claim, secret and benchmark live here."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from ..handle import ClusterHandle


@dataclass(frozen=True)
class WorkspaceArgs:
    cluster: ClusterHandle
    namespace: str
    """Derived from the stack name (StackSpec.namespace), so two pairings never share one."""
    labels: dict[str, str]


class Workspace(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    """The namespace's name, as an Output: objects placed in it wait for it to exist."""

    def __init__(self, name: str, args: WorkspaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:pairing:Workspace", name, None, opts)
        # Was the Cluster component's "cluster-workloads" before the platform/pairing split.
        previous = pulumi.Alias(name="cluster-workloads", parent=pulumi.create_urn("cluster", "sdtrn2:cluster:Cluster"))
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": args.namespace, "labels": args.labels},
            opts=args.cluster.k8s_options(self, aliases=[previous]),
        )
        self.namespace = namespace.metadata.name
        self.register_outputs({"namespace": self.namespace})
