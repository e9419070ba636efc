"""A pairing workload's identity in one call: its IAM role (bound to one service account, by the
platform's mechanism) and that service account, annotated for IRSA where the platform uses it."""
from __future__ import annotations

from typing import Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..handle import ClusterHandle
from ..identity import WorkloadRole, WorkloadRoleArgs


def workload_account(parent: pulumi.Resource, cluster: ClusterHandle, *, role_name: str, account_name: str,
                     namespace: pulumi.Input[str], namespace_name: str, service_account: str,
                     policy: pulumi.Input[dict], tags: dict[str, str], uses_kubernetes_api: bool,
                     role_aliases: Sequence[pulumi.Alias] = (), account_aliases: Sequence[pulumi.Alias] = (),
                     ) -> tuple[WorkloadRole, k8s.core.v1.ServiceAccount]:
    """`uses_kubernetes_api` False: the service account mounts no API token (the AWS token of
    IRSA or Pod Identity is a projected volume of its own)."""
    role = WorkloadRole(role_name, WorkloadRoleArgs(
        identity=cluster.identity, namespace=namespace_name, service_account=service_account, policy=policy, tags=tags,
    ), opts=pulumi.ResourceOptions(parent=parent, aliases=list(role_aliases)))
    account = k8s.core.v1.ServiceAccount(
        account_name,
        metadata={"name": service_account, "namespace": namespace, "annotations": role.annotations},
        automount_service_account_token=None if uses_kubernetes_api else False,
        opts=cluster.k8s_options(parent, aliases=list(account_aliases)),
    )
    return role, account
