"""A pairing's namespace: its servers, claims, volume claim, secret and benchmark live here."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from ..handle import ClusterHandle

POD_SECURITY_LABELS = {
    # Enforced: baseline, which the vLLM servers meet (root, no capability, RuntimeDefault seccomp, no
    # host path); every other pod meets restricted, which is warned and audited for all. A stack that
    # gives its servers a capability baseline refuses enforces no level instead (WorkspaceArgs.enforce).
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
"""Pod Security Admission levels of a pairing's namespace (Kubernetes Pod Security Standards)."""


@dataclass(frozen=True)
class WorkspaceArgs:
    cluster: ClusterHandle
    namespace: str
    """Derived from the stack name (StackSpec.namespace), so two pairings never share one."""
    labels: dict[str, str]
    enforce: str = "baseline"
    """The Pod Security level enforced: "privileged" only when a server is given back a capability
    baseline refuses (serving.addCapabilities; stackconfig/server.py BASELINE_CAPABILITIES)."""


class Workspace(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    """The namespace's name, as an Output: objects placed in it wait for it to exist."""

    def __init__(self, name: str, args: WorkspaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("sdtrn2:pairing:Workspace", name, None, opts)
        # Was the Cluster component's "cluster-workloads" before the platform/pairing split.
        previous = pulumi.Alias(name="cluster-workloads", parent=pulumi.create_urn("cluster", "sdtrn2:cluster:Cluster"))
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": args.namespace, "labels": {**args.labels, **POD_SECURITY_LABELS,
                                                         "pod-security.kubernetes.io/enforce": args.enforce}},
            opts=args.cluster.k8s_options(self, aliases=[previous]),
        )
        self.namespace = namespace.metadata.name
        self.register_outputs({"namespace": self.namespace})
